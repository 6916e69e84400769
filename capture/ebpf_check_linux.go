//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// removeMemlock lifts RLIMIT_MEMLOCK, which kernels before 5.11 charge
// BPF memory to (later ones charge the memory cgroup, and the limit does
// not matter to them). It is what cilium/ebpf's rlimit.RemoveMemlock does
// on old kernels, without that package: its init creates a BPF map, in
// every kwire run, to find out which kernel it runs on. Without
// CAP_SYS_RESOURCE it fails; as before, that is no error here: loading
// the probes says what is wrong, if anything is.
func removeMemlock() {
	_ = unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil)
}

// checkKernel finds out whether the probes can run here, and which hooks
// the kernel offers. The probes use syscall tracepoints, which every
// kernel with BPF ring buffers has. Function-level hooks (fentry/fexit,
// kprobes on tcp_sendmsg/tcp_recvmsg) would also see io_uring and splice
// traffic; they are reported, not used: kwire has no probes for them yet,
// and kernels that lock BPF down refuse them (EPERM) even to root.
func checkKernel() (string, error) {
	removeMemlock()
	if _, err := btf.LoadKernelSpec(); err != nil {
		return "", fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux: %v); kwire's probes need a kernel built with CONFIG_DEBUG_INFO_BTF", ErrEBPFUnavailable, err)
	}
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return "", fmt.Errorf("%w: the kernel has no BPF ring buffer (Linux 5.8 or later needed)", ErrEBPFUnavailable)
		}
		return "", permissionError(err)
	}
	mounted, err := ensureTracefs()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrEBPFUnavailable, err)
	}
	var notes []string
	if mounted != "" {
		notes = append(notes, "mounted tracefs on "+mounted)
	}
	if err := features.HaveProgramType(ebpf.Tracing); err != nil {
		// Any error, not only ErrNotSupported: a locked-down kernel
		// answers EPERM.
		notes = append(notes, fmt.Sprintf("fentry unavailable (%v)", shortErr(err)))
	} else {
		notes = append(notes, "fentry available, not used")
	}
	if _, err := os.Stat(tracefsDir() + "/kprobe_events"); err != nil {
		notes = append(notes, "kprobes unavailable (no kprobe_events)")
	} else {
		notes = append(notes, "kprobes available, not used")
	}
	return "syscall tracepoints (read, write, readv, writev, recvfrom, sendto, recvmsg, sendmsg, sendfile64) + sock:inet_sock_set_state; " +
		strings.Join(notes, "; "), nil
}

func shortErr(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// permissionError explains a refusal to create maps or load programs.
func permissionError(err error) error {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %v", ErrEBPFUnavailable, err)
	}
	why := "needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)"
	if os.Geteuid() == 0 {
		why = "refused to root"
	}
	if l := lockdown(); l != "" && l != "none" {
		why += fmt.Sprintf("; kernel lockdown is %q", l)
	}
	return fmt.Errorf("%w: %s (%v)", ErrEBPFUnavailable, why, err)
}

// lockdown returns the kernel lockdown mode, "" when unknown.
func lockdown() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return strings.TrimSpace(s)
}

// loadError explains a failure to load the probes.
func loadError(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: the kernel's verifier rejected kwire's probes (kernel too old or too different?): %v", ErrEBPFUnavailable, err)
	}
	return permissionError(err)
}

// tracefsDir is where tracefs is mounted ("" if nowhere).
func tracefsDir() string {
	for _, p := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) == nil && st.Type == unix.TRACEFS_MAGIC {
			return p
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint options ... - fstype source ...
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "tracefs" && len(fields) > 4 && fields[3] == "/" {
				return fields[4]
			}
		}
	}
	return ""
}

// ensureTracefs mounts tracefs on /sys/kernel/tracing when it is mounted
// nowhere (tracepoints are attached by the ids it lists). It returns
// where it mounted it, "" when it was there.
func ensureTracefs() (string, error) {
	if tracefsDir() != "" {
		return "", nil
	}
	const dir = "/sys/kernel/tracing"
	if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
		return "", fmt.Errorf("tracefs is not mounted and mounting it on %s failed (%v): mount -t tracefs nodev %s", dir, err, dir)
	}
	return dir, nil
}
