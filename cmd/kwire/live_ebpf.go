package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/jsonout"
)

// probeFlags are kwire live's eBPF flags (--ebpf instead of -i).
type probeFlags struct {
	ebpf   bool
	pid    uint
	comm   string
	cgroup string
	snap   int
	// --tls, --tls-target: uprobes on TLS libraries (capture.EBPFOptions.TLS).
	tls        bool
	tlsTargets fileList
}

const probeHelp = `
Examples with eBPF (root):
  kwire live --ebpf --port 9092 --comm java
  kwire live --ebpf --port 19092-19094 --pid 4242 --json
  kwire live --ebpf --port 9092 --tui

With --ebpf instead of -i, kwire reads the bytes processes on this host
move through TCP sockets on --port, from eBPF probes on system calls
(Linux 5.8+ with BTF, root): connections also say which process (pid,
comm) owns their client side. --pid, --comm and --cgroup restrict it to
some processes; members, clients and events carry the pid and comm.
At most --snap bytes of each call are copied, the rest is a gap of known
size: a Produce or Fetch whose uncopied bytes all fall in its record data
is still decoded, every field but the records (records_not_copied); a
frame cut elsewhere (a multi-partition Fetch cut across a later
partition's fields, a group message larger than --snap) keeps its header
only, counted in not_copied_frames: raise --snap if it grows. Bytes a
broker sends with sendfile (a Kafka broker's Fetch record data) are never
seen, only counted: sendfile_bytes, and in the decoder, with the records
--snap cut, records_not_copied_bytes.

With --tls, kwire also reads the plaintext of TLS connections (SSL and
SASL_SSL listeners) from uprobes on the client's TLS library: OpenSSL's
SSL_read/SSL_write in libssl (librdkafka clients, kcat) and Go's
crypto/tls (franz-go, sarama); x86-64 only, and the kernel needs
CONFIG_UPROBE_EVENTS (docs/ebpf.md). The executables and libssl of the
processes --pid or --comm select (every process without them) are probed,
at start and as they appear; --tls-target adds a binary or library by
path. The plaintext is decoded as if it had been clear, on the same
connection, pid and comm; the ciphertext of those connections is counted
(tls_cipher_bytes), not decoded twice. JVM processes (Java clients, the
Kafka broker) cannot be reached by uprobes: they are skipped and counted
(tls_skipped_jvm); decrypt their traffic with a key log written by a Java
agent instead (kwire live -i IFACE --tls-keylog FILE).
  kwire live --ebpf --tls --port 9093 --comm rdkafka-app
  kwire live --ebpf --tls --port 9093 --tls-target /usr/local/bin/orders-svc
`

// liveUsage is kwire live's help with --ebpf in it.
func liveUsage() string {
	h := strings.Replace(liveHelp, "Usage: kwire live -i IFACE [flags]", "Usage: kwire live -i IFACE [flags]\n       kwire live --ebpf [--pid N] [--comm NAME] [--tls] [flags]", 1)
	return strings.Replace(h, "\nFlags:\n", probeHelp+"\nFlags:\n", 1)
}

func (f *probeFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.ebpf, "ebpf", false, "capture with eBPF socket probes instead of an interface (-i)")
	fs.UintVar(&f.pid, "pid", 0, "with --ebpf, only the process with this `PID`")
	fs.StringVar(&f.comm, "comm", "", "with --ebpf, only processes with this `NAME` (their comm, at most 15 bytes)")
	fs.StringVar(&f.cgroup, "cgroup", "", "with --ebpf, only processes in this cgroup v2 `DIR` (e.g. /sys/fs/cgroup/system.slice/kafka.service)")
	fs.BoolVar(&f.tls, "tls", false, "with --ebpf, read TLS connections' plaintext from uprobes on the clients' OpenSSL (libssl) or Go crypto/tls; not JVMs: use --tls-keylog for those")
	fs.Var(&f.tlsTargets, "tls-target", "with --ebpf --tls, also probe this executable or shared library `PATH` (a Go binary, a libssl.so); repeatable")
	fs.IntVar(&f.snap, "snap", 4096, "with --ebpf, most `BYTES` copied per system call (at most 65536); the rest is a gap of known size")
}

// check reports flags that need --ebpf, or that --ebpf excludes.
func (f *probeFlags) check(lf *liveFlags) string {
	switch {
	case !f.ebpf && (f.pid != 0 || f.comm != "" || f.cgroup != ""):
		return "--pid, --comm and --cgroup select processes for --ebpf"
	case !f.ebpf && (f.tls || len(f.tlsTargets) > 0):
		return "--tls reads TLS plaintext with uprobes, which needs --ebpf; to decrypt a packet capture, give --tls-keylog"
	case !f.ebpf:
		return ""
	case len(f.tlsTargets) > 0 && !f.tls:
		return "--tls-target adds files to --tls's probes: give --tls too"
	case lf.iface != "":
		return "-i and --ebpf are two ways to capture: give one"
	case lf.write != "":
		return "-w saves packets, and --ebpf captures none: use -i to save a capture"
	case f.snap < 1 || f.snap > 65536:
		return "--snap must be between 1 and 65536"
	case len(f.comm) > 15:
		return "--comm: the kernel keeps 15 bytes of a process name"
	case f.pid > 1<<22:
		return "--pid is out of range"
	}
	return ""
}

// ebpfSource is the eBPF capture as kwire live's source.
type ebpfSource struct{ *capture.EBPF }

// Interface names the capture in messages.
func (ebpfSource) Interface() string { return "eBPF socket probes" }

// errNoEBPF is what a user whose system cannot run the probes is told.
const errNoEBPF = "capture on an interface instead (kwire live -i IFACE), or with tcpdump and kwire analyze"

// runLiveEBPF is runLive for --ebpf: the same pipeline and outputs.
func runLiveEBPF(ctx context.Context, f *liveFlags, stdout, stderr io.Writer) error {
	p := newPipeline(&f.common, stdout, f.exchanges)
	p.out = jsonout.New(stdout, &jsonout.Options{Text: p.text, FullIDs: f.common.fullIDs, LineFlush: true})
	eo := &capture.EBPFOptions{PID: uint32(f.probe.pid), Comm: f.probe.comm, SnapBytes: f.probe.snap, RingBytes: f.ringMB << 20, TickEvery: f.tickEvery(),
		TLS: f.probe.tls, TLSTargets: f.probe.tlsTargets}
	if f.probe.cgroup != "" {
		var st syscall.Stat_t
		if err := syscall.Stat(f.probe.cgroup, &st); err != nil {
			return fmt.Errorf("--cgroup: %w (give a cgroup v2 directory, e.g. under /sys/fs/cgroup)", err)
		}
		eo.CgroupID = st.Ino
	}
	src, err := capture.OpenEBPF(eo, &capture.Options{Ports: f.common.ports, IdleTimeout: f.idleTimeout, MaxConns: f.maxConns})
	if errors.Is(err, capture.ErrEBPFUnavailable) {
		return fmt.Errorf("%w: %s", err, errNoEBPF)
	}
	if err != nil {
		return err
	}
	r := &liveRun{p: p, src: ebpfSource{src}, stderr: stderr, statsEvery: f.statsEvery, ports: f.common.ports.String()}
	status := fmt.Sprintf("kwire: capturing on eBPF socket probes, ports %s, %s", f.common.ports.String(), src.Hooks())
	if sel := f.probe.selection(); sel != "" {
		status += ", only " + sel
	}
	status += fmt.Sprintf(", at most %d bytes per call, ring %d MiB", f.probe.snap, f.ringMB)
	for _, l := range src.TLSReport() {
		status += "\nkwire: TLS: " + l
	}
	ran, err := r.serve(ctx, f, status, src.Run)
	if !ran { // --metrics could not listen
		src.Close()
		return err
	}
	st := src.Stats()
	if d := st.EBPF.RingDrops; d > 0 {
		fmt.Fprintf(stderr, "kwire: warning: %d probe events were dropped with the ring buffer full (their bytes are gaps): raise --ring-mb or lower --snap\n", d)
	}
	return err
}

// selection describes the process filters.
func (f *probeFlags) selection() string {
	s := ""
	add := func(x string) {
		if s != "" {
			s += " and "
		}
		s += x
	}
	if f.pid != 0 {
		add(fmt.Sprintf("pid %d", f.pid))
	}
	if f.comm != "" {
		add(fmt.Sprintf("comm %q", f.comm))
	}
	if f.cgroup != "" {
		add("cgroup " + f.cgroup)
	}
	return s
}

// liveSource is what liveRun needs of a capture (*capture.Live or
// ebpfSource).
type liveSource interface {
	Stats() capture.Stats
	Interface() string
}
