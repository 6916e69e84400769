package caps

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// TB is what WithoutNetRaw needs of a testing.TB (the package is also in
// the kwire binary, which does not import testing).
type TB interface {
	Helper()
	Skipf(format string, args ...any)
}

// WithoutNetRaw runs f on this OS thread with CAP_NET_RAW out of its
// effective capabilities (they are per thread on Linux), then puts it
// back. f must not hand its work to other goroutines. The test is skipped
// when capabilities cannot be read or changed.
func WithoutNetRaw(t TB, f func()) {
	t.Helper()
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var saved, data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &saved[0]); err != nil {
		runtime.UnlockOSThread()
		t.Skipf("capget: %v", err)
	}
	data = saved
	data[0].Effective &^= 1 << unix.CAP_NET_RAW
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		runtime.UnlockOSThread()
		t.Skipf("capset: %v", err)
	}
	defer func() {
		// A thread that cannot get its capability back dies with the
		// goroutine instead of serving others.
		if unix.Capset(&hdr, &saved[0]) == nil {
			runtime.UnlockOSThread()
		}
	}()
	f()
}
