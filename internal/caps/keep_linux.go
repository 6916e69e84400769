package caps

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrCgo says that capabilities cannot be dropped in every thread: the
// binary uses cgo, whose threads the Go runtime does not know.
var ErrCgo = errors.New("built with cgo: capabilities cannot be changed in every thread (build with CGO_ENABLED=0)")

// Keep drops every capability of the process but keep, for good:
// in every thread (capabilities are per thread, and Go runs goroutines
// on many), the effective and permitted sets are reduced to keep (those
// of it the process has), the inheritable and ambient sets emptied, the
// bounding set reduced to keep when the process may (CAP_SETPCAP), so
// that no program it runs gets the rest back (root's otherwise would),
// and no_new_privs set. It returns the capabilities kept.
//
// Keep uses syscall.AllThreadsSyscall, which needs a binary without cgo
// (kwire's is): with cgo it returns ErrCgo and changes nothing.
func Keep(keep ...int) ([]int, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var cur [2]unix.CapUserData
	if err := unix.Capget(&hdr, &cur[0]); err != nil {
		return nil, fmt.Errorf("capget: %w", err)
	}
	var data [2]unix.CapUserData
	var kept []int
	for _, c := range keep {
		if c < 0 || c >= 64 || cur[c/32].Permitted&(1<<(c%32)) == 0 {
			continue
		}
		data[c/32].Permitted |= 1 << (c % 32)
		data[c/32].Effective |= 1 << (c % 32)
		kept = append(kept, c)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		if errors.Is(err, syscall.ENOTSUP) {
			return nil, ErrCgo
		}
		return nil, fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return nil, fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	// The bounding set first: dropping from it needs CAP_SETPCAP, which
	// the capset below takes away.
	if cur[unix.CAP_SETPCAP/32].Effective&(1<<(unix.CAP_SETPCAP%32)) != 0 {
		for c := 0; c <= lastCap(); c++ {
			if data[c/32].Permitted&(1<<(c%32)) != 0 {
				continue
			}
			if in, _, _ := syscall.RawSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_READ, uintptr(c), 0); in != 1 {
				continue
			}
			if err := allThreads(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
				return nil, fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
			}
		}
	}
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return nil, fmt.Errorf("capset: %w", err)
	}
	return kept, nil
}

// Permitted says whether the process may use capability c.
func Permitted(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var cur [2]unix.CapUserData
	return c >= 0 && c < 64 && unix.Capget(&hdr, &cur[0]) == nil && cur[c/32].Permitted&(1<<(c%32)) != 0
}

// allThreads runs a system call in every thread of the process.
func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		return errno
	}
	return nil
}

// lastCap is the kernel's highest capability number.
func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 && n < 64 {
		return n
	}
	return unix.CAP_LAST_CAP
}

// Name is a capability's name as capabilities(7) writes it: CAP_NET_RAW.
func Name(c int) string {
	if c >= 0 && c < len(names) && names[c] != "" {
		return names[c]
	}
	return "CAP_" + strconv.Itoa(c)
}

var names = [...]string{
	unix.CAP_DAC_OVERRIDE: "CAP_DAC_OVERRIDE", unix.CAP_DAC_READ_SEARCH: "CAP_DAC_READ_SEARCH",
	unix.CAP_NET_RAW: "CAP_NET_RAW", unix.CAP_SYS_PTRACE: "CAP_SYS_PTRACE", unix.CAP_SYS_ADMIN: "CAP_SYS_ADMIN",
	unix.CAP_PERFMON: "CAP_PERFMON", unix.CAP_BPF: "CAP_BPF",
}
