package capture

import (
	"slices"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// statsEvery is how many packets pass between two publications of the
// counters that Stats returns while packets are flowing.
const statsEvery = 1024

// Assembler turns packets from any packet source into Chunks: it decodes
// link, IP and TCP headers, reassembles each TCP connection with gopacket's
// reassembly package, decides each connection's roles and delivers ordered
// data, gaps and closes to a Sink. Files feeds it from capture files; a live
// source feeds it the same way.
//
// An Assembler is not safe for concurrent use, except Stats. Chunks are
// delivered synchronously from Packet, Advance and Close; the *Chunk passed
// to the Sink and its Data are only valid during the call.
//
// Time is capture time only: timeouts (Options.IdleTimeout,
// ReorderTimeout) are measured between packet timestamps, never with the
// wall clock, so the same packets always give the same chunks.
type Assembler struct {
	opts  Options
	sink  Sink
	fac   *factory // the pool's: a test points it at another Assembler
	pool  *reassembly.StreamPool
	asm   *reassembly.Assembler
	dec   decoder
	dedup *dedupe
	ctx   packetContext
	chunk Chunk

	now       time.Time // latest capture time seen
	nextFlush time.Time
	flushStep time.Duration
	nextID    uint64

	// Set around calls into the reassembly package, read by streams.
	rst      bool // the current packet has RST set
	hole     hole // bytes of the current packet missing from the capture
	flushing bool // chunks are being produced by a flush: defer them
	// repair: packets that do not decode may have a damaged header
	// (checksum.go repair): capture files only.
	repair bool
	// open names the connections being assembled, for repairs of a
	// damaged port (tcp_repair.go), and redo asks Packet to assemble the
	// current packet again after one: files only.
	open map[connKey]bool
	redo bool
	// keys, order and merged are interleave's scratch.
	keys        []time.Time
	order       []int
	merged      []pendingChunk
	flushReason CloseReason // reason for directions a flush closes
	pending     []pendingChunk
	scratch     []byte // payload padded over a snaplen cut

	overCap map[[2]gopacket.Flow]struct{}

	// The in-order fast path (tcp_fast.go): the connections it holds or
	// gave gopacket (nil: Options.ReferenceTCP), and its state around a
	// call into gopacket: the stream a primer's new connection gets, a
	// primer's or a handed-over segment's answer to Accept, and the
	// connection a segment was routed to and what gopacket made of it.
	fast        map[tcpKey]*fastConn
	lastFast    *fastConn // the entry of fast looked up last, or nil
	adopt       *stream
	priming     bool
	primeNext   reassembly.Sequence
	replay      bool
	replayStart bool
	route       *fastConn
	routed      bool
	routedTo    *stream
	primeHdr    [20]byte
	primeTCP    layers.TCP
	primeCtx    packetContext

	// Eviction of connections without payload when the table is full
	// (evict.go).
	quiet   quietList
	reap    []*stream // evicted by the current packet, still in the pool
	reuse   *stream   // ended, its 4-tuple reused by the current packet's SYN (stream.go reusedBy)
	waiting []*stream // holding chunks for the other direction (xdir.go)
	resets  []*stream // a direction to end when its resetDue passes (stream.go)
	reaping bool      // reset is feeding reassembly a made-up RST
	rstHdr  [20]byte
	rstTCP  layers.TCP
	rstCtx  packetContext

	st     Stats // owned by the feeding goroutine
	mu     sync.Mutex
	pub    Stats // st as of the last publish, for Stats
	closed bool
}

// packetContext passes a packet's CaptureInfo to the reassembly package
// without allocating per packet.
type packetContext struct{ ci gopacket.CaptureInfo }

func (c *packetContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

// NewAssembler returns an Assembler delivering to sink. opts may be nil.
func NewAssembler(opts *Options, sink Sink) *Assembler {
	return newAssembler(opts, sink, nil)
}

// reassemblyOf is gopacket's reassembly of an Assembler.
type reassemblyOf struct {
	fac  *factory
	pool *reassembly.StreamPool
	asm  *reassembly.Assembler
}

// newAssembler is NewAssembler, with the reassembly of one that is done
// and whose pool is empty if r is not nil (a test's: a new StreamPool
// allocates 1024 connections).
func newAssembler(opts *Options, sink Sink, r *reassemblyOf) *Assembler {
	a := &Assembler{opts: opts.withDefaults(), sink: sink, overCap: map[[2]gopacket.Flow]struct{}{}}
	if r == nil {
		r = &reassemblyOf{fac: &factory{}}
		r.pool = reassembly.NewStreamPool(r.fac)
		r.asm = reassembly.NewAssembler(r.pool)
	}
	r.fac.a = a
	a.fac, a.pool, a.asm = r.fac, r.pool, r.asm
	a.asm.MaxBufferedPagesPerConnection = a.opts.MaxBufferedPagesPerConn
	a.asm.MaxBufferedPagesTotal = a.opts.MaxBufferedPagesTotal
	if !a.opts.ReferenceTCP {
		a.fast = map[tcpKey]*fastConn{}
	}
	if a.opts.DedupeWindow > 0 {
		a.dedup = newDedupe(a.opts.DedupeWindow, oneSlots)
	}
	// Flush often enough that neither timeout is overshot by much, but not
	// so often that walking every connection costs much.
	a.flushStep = max(min(a.opts.ReorderTimeout, a.opts.IdleTimeout)/2, time.Second)
	return a
}

// Packet decodes one frame of link type lt captured at ci.Timestamp and
// feeds its TCP segment to reassembly, delivering any chunks it completes.
// data is only read during the call. Frames need not arrive in timestamp
// order, but the capture clock only moves forward.
func (a *Assembler) Packet(lt layers.LinkType, data []byte, ci gopacket.CaptureInfo) {
	a.st.Packets++
	a.st.Bytes += uint64(max(ci.Length, len(data)))
	if a.st.Packets%statsEvery == 0 {
		a.publish()
	}
	a.Advance(ci.Timestamp)

	d := &a.dec
	v := d.decode(lt, data)
	if v != pktTCP && a.repair && repair(lt, data) { // a damaged header? (checksum.go)
		if v = d.decode(lt, data); v == pktTCP {
			a.st.RepairedPackets++
		}
	}
	if v == pktTCP && a.repair && a.ipFix(lt, data) { // tcp_repair.go
		a.st.RepairedPackets++
	}
	cut := ci.CaptureLength < ci.Length
	if cut {
		a.st.SnaplenTruncated++
	}
	switch v {
	case pktNonIP:
		a.st.SkippedNonIP++
		return
	case pktNonTCP:
		a.st.SkippedNonTCP++
		return
	case pktFragment:
		a.st.Fragments++
		return
	case pktBad:
		a.st.Undecodable++
		return
	}
	a.st.TCPPackets++
	a.hole = hole{}
	if cut && d.claimed > len(d.tcp.Payload) {
		a.padCut()
	}
	if a.dedup != nil && a.dedup.seen(d, ci.Timestamp) {
		a.st.Duplicates++
		return
	}
	a.ctx.ci = ci
	a.rst = d.tcp.RST
	a.assemble(d.netFlow, &d.tcp)
	if s := a.reuse; s != nil { // the SYN of a new connection on an ended one's 4-tuple
		a.reuse = nil
		a.reap = append(a.reap, s)
		a.reapEvicted()
		a.assemble(d.netFlow, &d.tcp)
	}
	if a.redo { // a damaged port was set back (tcp_repair.go)
		a.redo = false
		if d.decode(lt, data) == pktTCP {
			a.st.RepairedPackets++
			a.rst = d.tcp.RST
			a.assemble(d.netFlow, &d.tcp)
		}
	}
	a.rst, a.hole = false, hole{}
	if len(a.reap) > 0 {
		a.reapEvicted()
	}
}

// padCut extends a segment the capture cut short to the length its IP
// header claims, with zeros, and records the padded bytes as a hole: the
// stream reports them as a Gap of exact size instead of waiting for bytes
// that will never come.
func (a *Assembler) padCut() {
	t := &a.dec.tcp
	n := len(t.Payload)
	a.scratch = slices.Grow(a.scratch[:0], a.dec.claimed)[:a.dec.claimed]
	copy(a.scratch, t.Payload)
	clear(a.scratch[n:])
	t.Payload = a.scratch
	a.hole = hole{seq: reassembly.Sequence(t.Seq).Add(n), n: a.dec.claimed - n}
}

// Advance moves the capture clock to t (if later than now) and, when due,
// flushes: data waiting longer than ReorderTimeout for a missing segment is
// delivered behind a Gap, and connections idle longer than IdleTimeout are
// closed (CloseIdle). Packet calls it; a live source also calls it when no
// packet arrives for a while.
func (a *Assembler) Advance(t time.Time) {
	if t.After(a.now) {
		a.now = t
	}
	if len(a.resets) > 0 {
		a.releaseResets(false) // due within the flush step
	}
	if a.now.Before(a.nextFlush) {
		return
	}
	a.nextFlush = a.now.Add(a.flushStep)
	a.flush(CloseIdle, func() {
		tc := a.now.Add(-a.opts.IdleTimeout)
		a.asm.FlushWithOptions(reassembly.FlushOptions{T: a.now.Add(-a.opts.ReorderTimeout), TC: tc})
		a.fastFlush(tc, false)
	})
	a.releaseHeld(false)
}

// Close delivers what is left of every connection, then a Close with
// CloseEOF for each direction still open. The Assembler must not be used
// afterwards.
func (a *Assembler) Close() {
	if a.closed {
		return
	}
	a.closed = true
	a.releaseResets(true)
	a.flush(CloseEOF, func() {
		a.asm.FlushAll()
		a.fastFlush(time.Time{}, true)
	})
	a.releaseHeld(true) // closed connections released theirs: none left
	a.publish()
}

// flush runs f with chunk delivery deferred, then delivers the chunks in
// order of connection ID: the reassembly package walks its connections in
// map order, which differs from run to run. A connection's two directions
// are interleaved by capture time (interleave), as they would have come
// without the flush.
func (a *Assembler) flush(reason CloseReason, f func()) {
	a.flushing, a.flushReason = true, reason
	f()
	a.flushing = false
	slices.SortStableFunc(a.pending, func(x, y pendingChunk) int {
		return cmpUint64(x.s.conn.ID, y.s.conn.ID)
	})
	for i := 0; i < len(a.pending); {
		j := i + 1
		for j < len(a.pending) && a.pending[j].s == a.pending[i].s {
			j++
		}
		a.interleave(a.pending[i:j])
		i = j
	}
	p := a.pending
	a.pending = nil
	for i := range p {
		c := &p[i]
		c.s.deliver(c.half, c.kind, c.data, c.n, c.reason, c.t)
		p[i] = pendingChunk{}
	}
	a.pending = p[:0]
	a.publish()
}

// interleave puts one connection's flushed chunks in capture-time order
// across its two directions, each direction's own order kept: a flush
// that gives up on a missing segment delivers a whole direction at once,
// and the responses held behind a hole would otherwise all come before
// the requests held behind another. A chunk without data (a gap, a close)
// sorts with the next data of its direction, a close after all of it.
func (a *Assembler) interleave(p []pendingChunk) {
	if len(p) < 2 {
		return
	}
	keys := a.keys[:0]
	for range p {
		keys = append(keys, time.Time{})
	}
	for half := range 2 {
		var next time.Time // the earliest data time from here on
		for i := len(p) - 1; i >= 0; i-- {
			if p[i].half != half {
				continue
			}
			if p[i].kind == Data && (next.IsZero() || p[i].t.Before(next)) {
				next = p[i].t
			}
			keys[i] = next
			if next.IsZero() {
				keys[i] = maxChunkTime // no data after it: at the end
			}
		}
	}
	idx := a.order[:0]
	for i := range p {
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(x, y int) int { return keys[x].Compare(keys[y]) })
	out := a.merged[:0]
	for _, i := range idx {
		out = append(out, p[i])
	}
	copy(p, out)
	clear(out)
	a.keys, a.order, a.merged = keys, idx, out[:0]
}

// maxChunkTime sorts after every capture time.
var maxChunkTime = time.Unix(1<<62, 0)

func cmpUint64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Stats returns the counters as of the last publication (every statsEvery
// packets, every flush and Close). Safe from any goroutine.
func (a *Assembler) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pub
}

func (a *Assembler) publish() {
	a.mu.Lock()
	a.pub = a.st
	a.mu.Unlock()
}

// pendingChunk is a chunk produced during a flush, delivered after it.
type pendingChunk struct {
	s      *stream
	half   int
	kind   Kind
	data   []byte // a copy: the reassembly pages are reused
	n      int
	reason CloseReason
	t      time.Time
}
