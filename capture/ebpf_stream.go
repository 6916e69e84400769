package capture

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// probeEvent is one event of the socket probes, decoded (see bpf/kwire.c).
// The Linux source reads them from the ring buffer; tests build them.
type probeEvent struct {
	close bool
	time  time.Time
	sock  sockID
	// local and remote are the socket's ends; server is set when the
	// local end is the broker (its port is a broker port).
	local, remote netip.AddrPort
	server        bool
	// handshake: the probes saw the socket open, offsets count from its
	// first byte.
	handshake bool
	// tls: the bytes are plaintext a TLS library moved (EBPFOptions.TLS),
	// and the socket's system calls move its ciphertext.
	tls bool
	// Data: the call moved n bytes at offset in direction recv (else
	// send) of the local socket; data holds the first of them (only valid
	// during the call). sendfile: none of them could be seen.
	recv     bool
	offset   uint64
	n        uint64
	data     []byte
	sendfile bool
	proc     Process
	// Close: the kernel's byte counts when the socket reached TCP_CLOSE;
	// reset when it closed from an open state.
	sent, received uint64
	reset          bool
}

// sockID identifies a socket: its kernel address and when the probes
// started counting its bytes (an address is reused by later sockets).
type sockID struct{ sk, gen uint64 }

// tracker turns probe events into the chunks of one Conn per connection.
// It follows one socket per connection: when both ends are local (as on
// loopback) the first one seen, and asks the kernel to mute the other.
type tracker struct {
	notCopied   bool // the Gap being sent was not copied on purpose (--snap)
	opts        Options
	reorderWait time.Duration
	sink        Sink
	mute        func(id sockID, on bool) // tell the kernel; may be nil
	socks       map[sockID]*esock        // followed sockets
	twins       map[sockID]time.Time     // muted sockets -> their latest event
	pairs       map[[2]netip.AddrPort]*esock
	overCap     map[sockID]struct{}
	busy        map[*esock]struct{}  // sockets with pending pieces or closing
	gone        map[sockID]time.Time // sockets closed by the kernel -> when
	idled       map[sockID]struct{}  // sockets closed for being idle
	lastSweep   time.Time
	nextID      uint64
	st          *Stats
	est         *EBPFStats
	idleClosed  uint64
	chunk       Chunk
}

// maxPendingBytes bounds the bytes held per direction waiting for a
// missing part; past it the missing part becomes a gap at once.
const maxPendingBytes = 8 << 20

// esock is a followed socket and its connection.
type esock struct {
	id      sockID
	conn    *Conn
	server  bool
	tls     bool      // its bytes are a TLS library's plaintext
	last    time.Time // wall time of its latest event
	dirs    [2]edir   // by local direction: 0 sent, 1 received
	closing bool      // its close event came: waiting for the bytes counted
	closeBy time.Time // then close anyway
	reset   bool
	muted   bool // the Sink ignores it: the kernel was asked to mute it
	// resumed: followed again after an idle close, so each direction
	// starts at its first event's offset, not at 0.
	resumed bool
}

// edir is one direction of a followed socket.
type edir struct {
	next    uint64 // stream offset of the next byte to deliver
	pending []epiece
	held    int       // bytes in pending
	since   time.Time // when the oldest pending piece came
	end     uint64    // bytes counted by the kernel at close
	closed  bool
	started bool // an event of this direction came
}

// epiece is an event's bytes held until the stream reaches them.
type epiece struct {
	t      time.Time
	offset uint64
	n      uint64
	data   []byte
}

func newTracker(opts *Options, reorderWait time.Duration, st *Stats, est *EBPFStats) *tracker {
	return &tracker{
		opts: opts.withDefaults(), reorderWait: reorderWait, st: st, est: est,
		socks: map[sockID]*esock{}, twins: map[sockID]time.Time{}, pairs: map[[2]netip.AddrPort]*esock{},
		overCap: map[sockID]struct{}{}, busy: map[*esock]struct{}{}, gone: map[sockID]time.Time{},
		idled: map[sockID]struct{}{},
	}
}

// event handles one probe event; now is the wall clock.
func (t *tracker) event(ev *probeEvent, now time.Time) {
	t.st.Packets++
	if ev.close {
		t.closeEvent(ev, now)
		return
	}
	t.st.Bytes += ev.n
	t.st.TCPPackets++
	t.est.Calls++
	t.est.CallBytes += ev.n
	t.est.CopiedBytes += uint64(len(ev.data))
	if ev.tls {
		t.est.TLSBytes += ev.n
	}
	if ev.sendfile {
		t.est.SendfileBytes += ev.n
	} else {
		t.est.SnapBytes += ev.n - uint64(len(ev.data))
	}
	if _, ok := t.twins[ev.sock]; ok {
		t.twins[ev.sock] = now // the other end of a followed connection
		return
	}
	if _, ok := t.gone[ev.sock]; ok {
		t.est.LateEvents++ // read after the kernel closed it, after its Close
		return
	}
	s := t.socks[ev.sock]
	if s == nil {
		if s = t.open(ev, now); s == nil {
			return
		}
	}
	s.last = now
	d := &s.dirs[dirIndex(ev.recv)]
	if !d.started {
		d.started = true
		if s.resumed {
			d.next = ev.offset
		}
	}
	if d.closed {
		t.est.LateEvents++
		return
	}
	if s.conn.Ignore {
		// Bytes moved before the kernel muted the socket: pass over them,
		// so that its close is not kept waiting for them.
		d.next = max(d.next, ev.offset+ev.n)
		if s.closing {
			t.tryClose(s, now, false)
		}
		return
	}
	switch {
	case ev.offset+ev.n <= d.next:
		t.est.LateEvents++
	case ev.offset <= d.next:
		t.deliver(s, ev.recv, ev.time, ev.offset, ev.n, ev.data)
		t.drain(s, ev.recv)
	default:
		t.st.OutOfOrder++
		if len(d.pending) == 0 {
			d.since = now
			t.busy[s] = struct{}{}
		}
		p := epiece{t: ev.time, offset: ev.offset, n: ev.n, data: append([]byte(nil), ev.data...)}
		i, _ := slices.BinarySearchFunc(d.pending, p.offset, func(a epiece, o uint64) int { return cmp.Compare(a.offset, o) })
		d.pending = slices.Insert(d.pending, i, p)
		d.held += len(p.data)
		if d.held > maxPendingBytes {
			t.st.BufferLimitGaps++
			t.skipTo(s, ev.recv, ev.time, d.pending[0].offset)
		}
	}
	if s.closing {
		t.tryClose(s, now, false)
	}
}

func dirIndex(recv bool) int {
	if recv {
		return 1
	}
	return 0
}

// chunkDir is the Chunk direction of a local direction of s.
func (s *esock) chunkDir(recv bool) Dir {
	if recv == s.server {
		return ToServer
	}
	return ToClient
}

func (t *tracker) send(s *esock, recv bool, kind Kind, tm time.Time, data []byte, n int, reason CloseReason) {
	c := &t.chunk
	*c = Chunk{Conn: s.conn, Dir: s.chunkDir(recv), Kind: kind, Time: tm, Data: data, Len: n, Reason: reason, NotCopied: t.notCopied}
	switch {
	case kind == Data:
		t.st.DeliveredBytes += uint64(len(data))
	case kind == Gap && t.notCopied:
		// Counted by the probe as snap_bytes / sendfile_bytes.
	case kind == Gap:
		t.st.Gaps++
		t.st.GapBytes += uint64(n)
	}
	if kind == Close || !s.conn.Ignore {
		t.sink.Chunk(c)
	}
	c.Data = nil
	if s.conn.Ignore && !s.muted {
		// Not Kafka (or TLS): stop copying its bytes in the kernel.
		s.muted = true
		for i := range s.dirs {
			d := &s.dirs[i]
			d.pending, d.held = nil, 0
		}
		if t.mute != nil {
			t.mute(s.id, true)
		}
	}
}

// deliver passes the part of a piece (offset <= next < offset+n) after
// the next offset: its copied bytes, then the uncopied rest as a gap of
// known length.
func (t *tracker) deliver(s *esock, recv bool, tm time.Time, offset, n uint64, data []byte) {
	d := &s.dirs[dirIndex(recv)]
	from := d.next - offset // bytes of the piece already delivered
	if from < uint64(len(data)) {
		t.send(s, recv, Data, tm, data[from:], 0, 0)
		from = uint64(len(data))
	}
	if from < n {
		// Not copied on purpose (--snap): marked so that decode counts
		// it without reporting a loss.
		t.notCopied = true
		t.send(s, recv, Gap, tm, nil, int(n-from), 0)
		t.notCopied = false
	}
	d.next = offset + n
}

// drain delivers the pending pieces the stream has reached.
func (t *tracker) drain(s *esock, recv bool) {
	d := &s.dirs[dirIndex(recv)]
	for len(d.pending) > 0 && d.pending[0].offset <= d.next {
		p := d.pending[0]
		d.pending = d.pending[1:]
		d.held -= len(p.data)
		if p.offset+p.n <= d.next {
			t.est.LateEvents++
			continue
		}
		t.deliver(s, recv, p.t, p.offset, p.n, p.data)
	}
	if len(d.pending) == 0 {
		d.pending, d.held = nil, 0
	}
}

// skipTo gives up on the bytes before offset: a gap, then what follows.
func (t *tracker) skipTo(s *esock, recv bool, tm time.Time, offset uint64) {
	d := &s.dirs[dirIndex(recv)]
	if offset > d.next {
		t.send(s, recv, Gap, tm, nil, int(offset-d.next), 0)
		d.next = offset
	}
	t.drain(s, recv)
}
