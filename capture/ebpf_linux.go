//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/bpf"
)

// EBPF is a Source reading the bytes that processes move through TCP
// sockets on the broker ports, from eBPF probes on system calls (bpf/
// holds them). It produces the same chunks as a packet capture, plus the
// process owning each connection's client side (Conn.Process), for the
// sockets of this host only. Each Conn follows one socket: when both ends
// are local (loopback) the first seen, normally the client's.
//
// Data chunks carry at most EBPFOptions.SnapBytes of each system call; the
// rest of the call, and every sendfile, is a Gap of known length, which
// keeps the decoder in sync (the frame it falls in is reported without a
// body). Close chunks come when the socket reaches TCP_CLOSE, once the
// bytes it moved have been delivered. Handshake is set for connections
// opened while the probes were attached.
//
// It needs Linux 5.8+ with BTF, and root (CAP_BPF and CAP_PERFMON);
// OpenEBPF says what is missing (ErrEBPFUnavailable).
type EBPF struct {
	eo      EBPFOptions
	objs    bpf.ProbeObjects
	links   []link.Link
	rd      *ringbuf.Reader
	tr      *tracker
	hooks   string
	bootOff int64 // wall-clock ns minus monotonic ns
	ran     bool

	st   Stats // owned by Run's goroutine
	est  EBPFStats
	kern [cntMax]uint64
	mu   sync.Mutex
	pub  Stats // as of the last tick

	tls *tlsProbes // EBPFOptions.TLS; nil otherwise
}

// Counter indexes of the probes' per-CPU array (enum counter in kwire.c).
const (
	cntEvents = iota
	cntDrops
	cntReadErrs
	cntIovTrunc
	cntTLSCalls
	cntTLSNoSock
	cntTLSCipher
	cntMax
)

// Event kinds and flags (enum kind, enum flag in kwire.c).
const (
	kindClose     = 1
	flagServer    = 1
	flagHandshake = 2
	flagSendfile  = 4
	flagReset     = 8
	flagTLS       = 16
)

// syscalls are the data system calls traced, by the enter program each
// uses; one exit program serves them all.
func (e *EBPF) syscalls() map[string]*ebpf.Program {
	p := &e.objs.ProbePrograms
	return map[string]*ebpf.Program{
		"read": p.EnterRead, "write": p.EnterWrite, "readv": p.EnterReadv, "writev": p.EnterWritev,
		"recvfrom": p.EnterRecvfrom, "sendto": p.EnterSendto, "recvmsg": p.EnterRecvmsg,
		"sendmsg": p.EnterSendmsg, "sendfile64": p.EnterSendfile64,
	}
}

// OpenEBPF checks what the kernel offers, loads the probes and attaches
// them (mounting tracefs if it is mounted nowhere). Of opts, Ports
// (required: tested in the kernel), IdleTimeout and MaxConns apply; eo
// (may be nil) tunes the probes. Run starts reading; Close releases an
// EBPF that is never run. Errors wrap ErrEBPFUnavailable with the reason
// when the system cannot run the probes.
func OpenEBPF(eo *EBPFOptions, opts *Options) (*EBPF, error) {
	o := opts.withDefaults()
	if o.Ports.Empty() {
		return nil, errors.New("ebpf capture needs the broker ports (--port)")
	}
	e := &EBPF{eo: eo.withDefaults()}
	e.st.EBPF = &e.est
	e.tr = newTracker(opts, e.eo.ReorderWait, &e.st, &e.est)
	e.tr.mute = e.mute
	hooks, err := checkKernel()
	if err != nil {
		return nil, err
	}
	e.hooks = hooks
	if err := e.load(&o.Ports); err != nil {
		return nil, err
	}
	// The TLS probes go in first: a TLS socket's system calls that come
	// before its process's probes are reported as ciphertext.
	if e.eo.TLS {
		if e.tls, err = e.openTLS(); err != nil {
			e.Close()
			return nil, err
		}
		e.hooks += "; " + e.tls.hooks()
	}
	if err := e.attach(); err != nil {
		e.Close()
		return nil, err
	}
	if e.rd, err = ringbuf.NewReader(e.objs.Events); err != nil {
		e.Close()
		return nil, fmt.Errorf("ebpf: ring buffer: %w", err)
	}
	var mono unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	e.bootOff = time.Now().UnixNano() - mono.Nano()
	return e, nil
}

// load configures and loads the probes, and fills the port map.
func (e *EBPF) load(ports *Ports) error {
	spec, err := bpf.LoadProbe()
	if err != nil {
		return fmt.Errorf("ebpf: %w", err)
	}
	var comm [16]byte
	if len(e.eo.Comm) > 15 {
		return fmt.Errorf("ebpf: process name %q is longer than the kernel's 15 bytes", e.eo.Comm)
	}
	copy(comm[:], e.eo.Comm)
	for name, v := range map[string]any{
		"cfg_snap": uint32(e.eo.SnapBytes), "cfg_pid": e.eo.PID, "cfg_cgroup": e.eo.CgroupID,
		"cfg_use_comm": boolByte(e.eo.Comm != ""), "cfg_comm": comm, "cfg_wake_bytes": uint64(e.eo.RingBytes / 4),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("ebpf: set %s: %w", name, err)
		}
	}
	spec.Maps["events"].MaxEntries = uint32(e.eo.RingBytes)
	if err := e.loadObjects(spec); err != nil {
		return err
	}
	for p := range 65536 {
		if ports.Contains(uint16(p)) {
			if err := e.objs.Ports.Update(uint32(p), uint8(1), ebpf.UpdateAny); err != nil {
				e.objs.Close()
				return fmt.Errorf("ebpf: port map: %w", err)
			}
		}
	}
	return nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// loadObjects loads the maps and the syscall programs, and the TLS
// library programs (uprobes, of the kprobe program type, which a kernel
// without CONFIG_UPROBE_EVENTS and CONFIG_KPROBE_EVENTS refuses) only when
// they are wanted.
func (e *EBPF) loadObjects(spec *ebpf.CollectionSpec) error {
	if e.eo.TLS {
		if err := spec.LoadAndAssign(&e.objs, nil); err != nil {
			return loadError(err)
		}
		return nil
	}
	var sys struct {
		*bpf.ProbeMaps
		EnterRead       *ebpf.Program `ebpf:"enter_read"`
		EnterReadv      *ebpf.Program `ebpf:"enter_readv"`
		EnterRecvfrom   *ebpf.Program `ebpf:"enter_recvfrom"`
		EnterRecvmsg    *ebpf.Program `ebpf:"enter_recvmsg"`
		EnterSendfile64 *ebpf.Program `ebpf:"enter_sendfile64"`
		EnterSendmsg    *ebpf.Program `ebpf:"enter_sendmsg"`
		EnterSendto     *ebpf.Program `ebpf:"enter_sendto"`
		EnterWrite      *ebpf.Program `ebpf:"enter_write"`
		EnterWritev     *ebpf.Program `ebpf:"enter_writev"`
		ExitCall        *ebpf.Program `ebpf:"exit_call"`
		OnSockState     *ebpf.Program `ebpf:"on_sock_state"`
	}
	sys.ProbeMaps = &e.objs.ProbeMaps
	if err := spec.LoadAndAssign(&sys, nil); err != nil {
		return loadError(err)
	}
	p := &e.objs.ProbePrograms
	p.EnterRead, p.EnterReadv, p.EnterRecvfrom, p.EnterRecvmsg = sys.EnterRead, sys.EnterReadv, sys.EnterRecvfrom, sys.EnterRecvmsg
	p.EnterSendfile64, p.EnterSendmsg, p.EnterSendto = sys.EnterSendfile64, sys.EnterSendmsg, sys.EnterSendto
	p.EnterWrite, p.EnterWritev, p.ExitCall, p.OnSockState = sys.EnterWrite, sys.EnterWritev, sys.ExitCall, sys.OnSockState
	return nil
}

// attach attaches every program to its tracepoints.
func (e *EBPF) attach() error {
	add := func(group, name string, p *ebpf.Program) error {
		l, err := link.Tracepoint(group, name, p, nil)
		if err != nil {
			return fmt.Errorf("%w: attach tracepoint %s/%s: %w", ErrEBPFUnavailable, group, name, err)
		}
		e.links = append(e.links, l)
		return nil
	}
	for sc, p := range e.syscalls() {
		if err := add("syscalls", "sys_enter_"+sc, p); err != nil {
			return err
		}
		if err := add("syscalls", "sys_exit_"+sc, e.objs.ExitCall); err != nil {
			return err
		}
	}
	return add("sock", "inet_sock_set_state", e.objs.OnSockState)
}

// Hooks describes the kernel hooks in use and the better ones that are not.
func (e *EBPF) Hooks() string { return e.hooks }

// mute tells the probes to stop (or resume) reporting a socket.
func (e *EBPF) mute(id sockID, on bool) {
	if on {
		_ = e.objs.Muted.Update(id.sk, id.gen, ebpf.UpdateAny)
	} else {
		_ = e.objs.Muted.Delete(id.sk)
	}
}

// Run reads the probes' events until ctx is done, delivering chunks to
// sink synchronously from the calling goroutine; a sink that implements
// Ticker also gets Tick calls. At the end every connection still open
// gets CloseEOF. It returns ctx.Err() when stopped by ctx. Run detaches
// the probes; it may be called once.
func (e *EBPF) Run(ctx context.Context, sink Sink) error {
	if e.ran {
		return errors.New("capture: EBPF.Run called twice")
	}
	e.ran = true
	defer e.Close()
	e.tr.sink = sink
	ticker, _ := sink.(Ticker)
	var rec ringbuf.Record
	var ev probeEvent
	next := time.Now().Add(e.eo.TickEvery)
	var runErr error
	for {
		runErr = e.read(&rec, &ev, time.Now().Add(e.eo.Poll))
		if runErr == nil {
			runErr = ctx.Err()
		}
		if runErr != nil {
			break
		}
		now := time.Now()
		e.tr.expire(now)
		if !now.Before(next) {
			next = now.Add(e.eo.TickEvery)
			if e.tls != nil {
				e.tls.scan() // processes started since
			}
			e.tick()
			if ticker != nil {
				ticker.Tick(now)
			}
		}
	}
	// Detach, then take what is left in the ring: every event the
	// kernel counted is read.
	e.detach()
	if err := e.read(&rec, &ev, time.Now()); err != nil && runErr == nil {
		runErr = err
	}
	e.tr.closeAll()
	e.tick()
	return runErr
}

// read passes the ring's events to the tracker until it is empty at the
// deadline.
func (e *EBPF) read(rec *ringbuf.Record, ev *probeEvent, deadline time.Time) error {
	e.rd.SetDeadline(deadline)
	for {
		err := e.rd.ReadInto(rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ebpf: read ring buffer: %w", err)
		}
		e.est.Events++
		if e.parse(rec.RawSample, ev) {
			e.tr.event(ev, time.Now())
		}
	}
}

// detach detaches the probes.
func (e *EBPF) detach() {
	for _, l := range e.links {
		l.Close()
	}
	e.links = nil
	if e.tls != nil {
		e.tls.detach()
	}
}

// parse decodes a ring-buffer record (struct event) into ev.
func (e *EBPF) parse(raw []byte, ev *probeEvent) bool {
	// The data follow the header (Go pads the struct after Data).
	const hdr = int(unsafe.Offsetof(bpf.ProbeEvent{}.Data))
	if len(raw) < hdr {
		return false
	}
	var r bpf.ProbeEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), hdr), raw)
	*ev = probeEvent{
		close: r.Kind == kindClose,
		time:  time.Unix(0, int64(r.Ts)+e.bootOff),
		sock:  sockID{r.Sk, r.Gen},
		reset: r.Flags&flagReset != 0,
		sent:  r.Offset, received: r.Aux,
	}
	if ev.close {
		return true
	}
	ev.local = addrPort(r.Family, r.Laddr, r.Lport)
	ev.remote = addrPort(r.Family, r.Raddr, r.Rport)
	ev.server = r.Flags&flagServer != 0
	ev.handshake = r.Flags&flagHandshake != 0
	ev.tls = r.Flags&flagTLS != 0
	ev.sendfile = r.Flags&flagSendfile != 0
	ev.recv = r.Dir == 1
	ev.offset, ev.n = r.Offset, uint64(r.Len)
	if n := int(r.Copied); n > 0 && hdr+n <= len(raw) {
		ev.data = raw[hdr : hdr+n]
	}
	ev.proc = Process{PID: r.Pid, Comm: unix.ByteSliceToString(r.Comm[:]), CgroupID: r.Cgroup}
	return true
}

func addrPort(family uint16, a [16]byte, port uint16) netip.AddrPort {
	if family == unix.AF_INET {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(a).Unmap(), port)
}

// tick reads the kernel counters and publishes Stats.
func (e *EBPF) tick() {
	var sum [cntMax]uint64
	for i := range sum {
		var per []uint64
		if err := e.objs.Counters.Lookup(uint32(i), &per); err == nil {
			for _, v := range per {
				sum[i] += v
			}
		}
	}
	e.kern = sum
	e.est.KernelEvents = sum[cntEvents]
	e.est.RingDrops = sum[cntDrops]
	e.est.UserReadErrors = sum[cntReadErrs]
	e.est.IovTruncated = sum[cntIovTrunc]
	e.est.TLSCalls = sum[cntTLSCalls]
	e.est.TLSNoSocket = sum[cntTLSNoSock]
	e.est.TLSCipherBytes = sum[cntTLSCipher]
	if e.tls != nil {
		e.tls.stats(&e.est)
	}
	s := e.st
	est := e.est
	s.EBPF = &est
	s.Live = &LiveStats{KernelPackets: sum[cntEvents] + sum[cntDrops], KernelDrops: sum[cntDrops], ConnsIdleClosed: e.tr.idleClosed}
	e.mu.Lock()
	e.pub = s
	e.mu.Unlock()
}

// Stats returns the counters as of the last tick (TickEvery). Safe from
// any goroutine.
func (e *EBPF) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.pub
	if s.EBPF != nil {
		est, live := *s.EBPF, *s.Live
		s.EBPF, s.Live = &est, &live
	} else {
		s.EBPF, s.Live = &EBPFStats{}, &LiveStats{}
	}
	return s
}

// Close detaches the probes and frees them. Run does it when it returns.
func (e *EBPF) Close() error {
	e.detach()
	if e.rd != nil {
		e.rd.Close()
	}
	return e.objs.Close()
}
