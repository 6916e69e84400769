//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
)

// tlsProbes are an EBPF's uprobes on TLS libraries (EBPFOptions.TLS): it
// finds the executables and libssl of the selected processes, probes each
// file once (a uprobe is on the file: every process running it, now or
// later, is probed; the programs filter by process like the syscall
// probes), and looks again for new processes at every tick.
type tlsProbes struct {
	e       *EBPF
	files   map[fileID]bool   // looked at: probed or not
	pids    map[uint32]string // looked at: -> what was found
	links   []link.Link
	probes  uint64 // uprobes attached, kept after detach for the last Stats
	targets uint64
	skipped struct{ jvm, noTLS, failed uint64 }
	report  []string
	failure string // the first reason a process could not be probed
}

// fileID identifies a file across mount namespaces and paths.
type fileID struct{ dev, ino uint64 }

// openTLS checks that uprobes work here, probes EBPFOptions.TLSTargets
// (any failure is an error) and the selected processes (failures are
// counted).
func (e *EBPF) openTLS() (*tlsProbes, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("%w: --tls probes are built for x86-64 (amd64), this is %s", ErrEBPFUnavailable, runtime.GOARCH)
	}
	if err := features.HaveProgramType(ebpf.Kprobe); err != nil {
		return nil, fmt.Errorf("%w: --tls needs uprobes, and this kernel loads no kprobe-type BPF program (CONFIG_UPROBE_EVENTS and CONFIG_BPF_EVENTS): %v", ErrEBPFUnavailable, err)
	}
	_, pmuErr := os.Stat("/sys/bus/event_source/devices/uprobe")
	_, tfErr := os.Stat(tracefsDir() + "/uprobe_events")
	if pmuErr != nil && tfErr != nil {
		return nil, fmt.Errorf("%w: --tls needs uprobes: no uprobe PMU (/sys/bus/event_source/devices/uprobe) and no uprobe_events in tracefs (kernel built without CONFIG_UPROBE_EVENTS)", ErrEBPFUnavailable)
	}
	t := &tlsProbes{e: e, files: map[fileID]bool{}, pids: map[uint32]string{}}
	for _, path := range e.eo.TLSTargets {
		id, err := statID(path)
		if err != nil {
			t.detach()
			return nil, fmt.Errorf("--tls target: %w", err)
		}
		what, err := t.probe(path, id)
		if err != nil {
			t.detach()
			return nil, fmt.Errorf("--tls target %s: %w", path, err)
		}
		t.report = append(t.report, fmt.Sprintf("%s in %s", what, path))
	}
	t.scan()
	return t, nil
}

// hooks describes the probes for EBPF.Hooks.
func (t *tlsProbes) hooks() string {
	return fmt.Sprintf("TLS uprobes: %d in %d files (OpenSSL SSL_read/SSL_write, Go crypto/tls Read/Write)", t.probes, t.targets)
}

// probe inspects the file at path and attaches the probes its TLS library
// needs. It returns what it probed. A panic while reading the file (the
// ELF readers of inspectTLS and of link.OpenExecutable, on a damaged or
// crafted file) is its error: its probes are closed, the others stay.
func (t *tlsProbes) probe(path string, id fileID) (what string, err error) {
	t.files[id] = false
	n := len(t.links)
	defer func() {
		recoverELF(&err)
		if err != nil {
			for _, l := range t.links[n:] {
				l.Close()
			}
			t.links = t.links[:n]
		}
	}()
	tg, err := inspectTLS(path)
	if err != nil {
		return "", err
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return "", err
	}
	switch tg.lib {
	case tlsLibOpenSSL:
		err = t.probeOpenSSL(ex, tg)
		what = "OpenSSL (" + strings.Join(tg.ssl, ", ") + ")"
	case tlsLibGo:
		err = t.probeGo(ex, tg)
		what = "Go crypto/tls (" + tg.goVersion + ")"
	}
	if err != nil {
		return "", err
	}
	t.files[id] = true
	t.targets++
	t.probes = uint64(len(t.links))
	return what, nil
}

// probeOpenSSL attaches the OpenSSL probes: each function's return probe
// first, so that no call is stashed without one.
func (t *tlsProbes) probeOpenSSL(ex *link.Executable, tg *tlsTarget) error {
	p := &t.e.objs.ProbePrograms
	enter := map[string]*ebpf.Program{
		"SSL_write": p.SslWriteEnter, "SSL_read": p.SslReadEnter, "SSL_write_ex": p.SslWriteExEnter,
		"SSL_read_ex": p.SslReadExEnter, "SSL_do_handshake": p.SslHandshakeEnter, "SSL_connect": p.SslHandshakeEnter,
		"SSL_accept": p.SslHandshakeEnter,
	}
	for _, fn := range tg.ssl {
		l, err := ex.Uretprobe(fn, p.SslRet, nil)
		if err != nil {
			return fmt.Errorf("uretprobe %s: %w", fn, err)
		}
		t.links = append(t.links, l)
		if l, err = ex.Uprobe(fn, enter[fn], nil); err != nil {
			return fmt.Errorf("uprobe %s: %w", fn, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// probeGo attaches the Go probes: on each RET of Write and Read (a
// uretprobe would corrupt a goroutine whose stack moves during the call),
// then on the entries.
func (t *tlsProbes) probeGo(ex *link.Executable, tg *tlsTarget) error {
	p := &t.e.objs.ProbePrograms
	enter := map[string]*ebpf.Program{goTLSWrite: p.GoWriteEnter, goTLSRead: p.GoReadEnter, goTLSHandshake: p.GoHandshakeEnter}
	for _, fn := range tg.goFuncs {
		for _, r := range fn.rets {
			l, err := ex.Uprobe(fn.name, p.GoRet, &link.UprobeOptions{Address: fn.offset, Offset: r})
			if err != nil {
				return fmt.Errorf("uprobe %s+%#x (RET): %w", fn.name, r, err)
			}
			t.links = append(t.links, l)
		}
		l, err := ex.Uprobe(fn.name, enter[fn.name], &link.UprobeOptions{Address: fn.offset})
		if err != nil {
			return fmt.Errorf("uprobe %s: %w", fn.name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// scan looks at the processes not looked at yet that the options select,
// and probes their executables and the libssl they map.
func (t *tlsProbes) scan() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	alive := make(map[uint32]bool, len(ents))
	self := uint32(os.Getpid())
	for _, d := range ents {
		n, err := strconv.ParseUint(d.Name(), 10, 32)
		if err != nil || uint32(n) == self {
			continue
		}
		pid := uint32(n)
		alive[pid] = true
		if _, seen := t.pids[pid]; seen || !t.selected(pid) {
			continue
		}
		t.pids[pid] = t.process(pid)
	}
	for pid := range t.pids {
		if !alive[pid] {
			delete(t.pids, pid) // the pid may come back as another process
		}
	}
}

// selected applies EBPFOptions.PID and Comm (the kernel applies them
// again, with the cgroup).
func (t *tlsProbes) selected(pid uint32) bool {
	if t.e.eo.PID != 0 && pid != t.e.eo.PID {
		return false
	}
	if t.e.eo.Comm != "" && procComm(pid) != t.e.eo.Comm {
		return false
	}
	return true
}

func procComm(pid uint32) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSuffix(string(b), "\n")
}

// process probes one process's executable and libssl, and says what it
// found.
func (t *tlsProbes) process(pid uint32) string {
	dir := fmt.Sprintf("/proc/%d", pid)
	exe, _ := os.Readlink(dir + "/exe")
	libs, jvm := mappedLibs(dir + "/maps")
	if jvm || filepath.Base(exe) == "java" {
		t.skipped.jvm++
		t.report = append(t.report, fmt.Sprintf("pid %d (%s): a JVM, whose TLS uprobes cannot reach: decrypt it with a key log (--tls-keylog, written by a Java agent)", pid, procComm(pid)))
		return "jvm"
	}
	paths := []string{dir + "/exe"}
	for _, l := range libs {
		paths = append(paths, dir+"/root"+l)
	}
	probed, failed := false, ""
	for _, path := range paths {
		id, err := statID(path)
		if err != nil {
			failed = err.Error()
			continue
		}
		if done, seen := t.files[id]; seen {
			probed = probed || done
			continue
		}
		what, err := t.probe(path, id)
		switch {
		case err == nil:
			probed = true
			name := exe
			if path != dir+"/exe" {
				name = strings.TrimPrefix(path, dir+"/root")
			}
			t.report = append(t.report, fmt.Sprintf("%s in %s (pid %d %s)", what, name, pid, procComm(pid)))
		case !errors.Is(err, errNoTLSLib):
			failed = fmt.Sprintf("%s: %v", path, err)
		}
	}
	switch {
	case probed:
		return "probed"
	case failed != "":
		t.skipped.failed++
		if t.failure == "" {
			t.failure = fmt.Sprintf("pid %d (%s): %s", pid, procComm(pid), failed)
			t.report = append(t.report, t.failure)
		}
		return "failed"
	}
	t.skipped.noTLS++
	return "no TLS library"
}

// mappedLibs returns the libssl files a process maps, and whether it is a
// JVM (it maps libjvm).
func mappedLibs(maps string) (libs []string, jvm bool) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := fields[5]
		base := filepath.Base(path)
		switch {
		case strings.HasPrefix(base, "libjvm.so"):
			jvm = true
		case len(fields) > 6 && fields[6] == "(deleted)":
			// Replaced on disk (an upgrade): the path names another
			// file than the one mapped; the process is probed once it
			// restarts on the new one.
		case strings.HasPrefix(base, "libssl.so") && strings.HasPrefix(path, "/") && !slices.Contains(libs, path):
			libs = append(libs, path)
		}
	}
	return libs, jvm
}

func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// stats adds the probes' counters.
func (t *tlsProbes) stats(s *EBPFStats) {
	s.TLSTargets = t.targets
	s.TLSProbes = t.probes
	s.TLSSkippedJVM, s.TLSSkippedNoTLS, s.TLSSkippedFailed = t.skipped.jvm, t.skipped.noTLS, t.skipped.failed
}

func (t *tlsProbes) detach() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
}

// TLSReport lists what the TLS probes found so far: each file probed and
// its library, the JVMs skipped, the first process that could not be
// probed and why. Empty without EBPFOptions.TLS. Call it before Run, or
// from Run's goroutine (a Sink or Ticker).
func (e *EBPF) TLSReport() []string {
	if e.tls == nil {
		return nil
	}
	return slices.Clone(e.tls.report)
}
