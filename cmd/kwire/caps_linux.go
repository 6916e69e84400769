package main

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/internal/caps"
)

// liveCaps are the capabilities kwire live still needs once its sockets,
// eBPF programs, listener, files and terminal are open; it drops the rest
// (dropLiveCaps).
func liveCaps(f *liveFlags) []int {
	var keep []int
	if f.rotateMB > 0 {
		// -w's next numbered files, in a directory root may not own.
		keep = append(keep, unix.CAP_DAC_OVERRIDE)
	}
	if len(f.common.tlsKeylog) > 0 || f.probe.tls {
		// Key logs are re-read as the clients write them, and --tls
		// opens the executables and libraries of every user's processes.
		keep = append(keep, unix.CAP_DAC_READ_SEARCH)
	}
	if f.probe.ebpf {
		// The probes' maps are read and updated as connections come and
		// go (bpf(2) on their descriptors needs it when
		// kernel.unprivileged_bpf_disabled is set, as it is by default).
		if caps.Permitted(unix.CAP_BPF) {
			keep = append(keep, unix.CAP_BPF)
		} else if !f.probe.tls {
			keep = append(keep, unix.CAP_SYS_ADMIN)
		}
	}
	if f.probe.tls {
		// Processes that start later are probed as they appear: their
		// /proc/PID/exe, maps and root (any user's: CAP_SYS_PTRACE),
		// and a uprobe per function, which perf_event_open refuses
		// without CAP_SYS_ADMIN (EACCES on Linux 6.18 with CAP_PERFMON
		// and every other capability: TestLiveDropsCapabilities).
		keep = append(keep, unix.CAP_SYS_PTRACE, unix.CAP_PERFMON, unix.CAP_SYS_ADMIN)
	}
	return keep
}

// dropLiveCaps drops the capabilities kwire live no longer needs and says
// what it kept, for the status line; a failure is a warning on stderr.
func (r *liveRun) dropLiveCaps(f *liveFlags) string {
	if !dropCaps {
		return ""
	}
	kept, err := caps.Keep(liveCaps(f)...)
	switch {
	case err != nil: // caps.ErrCgo says how to build kwire instead
		fmt.Fprintf(r.stderr, "kwire: warning: capabilities kept for the whole run: %v\n", err)
		return ""
	case len(kept) == 0:
		return ", capabilities dropped"
	}
	names := make([]string, len(kept))
	for i, c := range kept {
		names[i] = caps.Name(c)
	}
	return ", capabilities dropped but " + strings.Join(names, ", ")
}
