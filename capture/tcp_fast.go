package capture

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// The in-order fast path beside gopacket's reassembly.
//
// Most segments of a capture arrive in order: the next bytes of their
// direction, or an acknowledgement with none. For those, gopacket's
// Assembler does a lot of general work (a map keyed by two Flows, a lock,
// a page list, a scatter-gather) to end up calling Accept and then
// ReassembledSG with the segment's own payload. The fast path holds each
// connection itself from its first packet and does just that, calling the
// same stream code with the same arguments gopacket would.
//
// The first segment of a connection that is anything else (out of order,
// a retransmission overlapping delivered bytes, a FIN or a RST, one ahead
// of its direction's start) hands the connection to gopacket for the rest
// of its life: gopacket is primed with one empty segment per direction
// that puts its state (which direction came first, each direction's next
// sequence number, the last time seen) where it would be had it seen
// every packet, and then assembles the segment itself. Idle closes and
// the final flush treat held connections as gopacket treats its own.
//
// Options.ReferenceTCP turns the fast path off; FuzzTCPFast and
// TestReferenceSame (cmd/kwire) require the same chunks, stats and output
// with and without it.

// invalidSeq is gopacket's "no sequence number yet".
const invalidSeq reassembly.Sequence = -1

// tcpKey names a connection by its endpoints, the lower first.
type tcpKey struct {
	a, b   [16]byte
	ap, bp uint16
	v6     bool
}

// fastConn is a connection the fast path holds, or one it gave gopacket.
type fastConn struct {
	key  tcpKey
	s    *stream
	gp   bool // gopacket holds it: every packet goes there
	fwd0 bool // half 0, the first packet's direction, runs from a to b
	// What gopacket would hold: each direction's next sequence number,
	// and the latest capture time of the connection's packets.
	next [2]reassembly.Sequence
	seen time.Time
}

// tcpKey returns the key of the decoded packet's connection and whether
// the packet runs from its a endpoint to b.
func (d *decoder) tcpKey() (k tcpKey, fwd bool) {
	t := &d.tcp
	sp, dp := uint16(t.SrcPort), uint16(t.DstPort)
	c := bytes.Compare(d.src, d.dst)
	fwd = c < 0 || c == 0 && sp <= dp
	k.v6 = d.v6
	if fwd {
		copy(k.a[:], d.src)
		copy(k.b[:], d.dst)
		k.ap, k.bp = sp, dp
	} else {
		copy(k.a[:], d.dst)
		copy(k.b[:], d.src)
		k.ap, k.bp = dp, sp
	}
	return k, fwd
}

// assemble reassembles the decoded TCP segment: in order on a connection
// the fast path holds, itself; otherwise through gopacket.
func (a *Assembler) assemble(netFlow gopacket.Flow, t *layers.TCP) {
	if a.fast == nil {
		a.asm.AssembleWithContext(netFlow, t, &a.ctx)
		return
	}
	k, fwd := a.dec.tcpKey()
	ts := a.ctx.ci.Timestamp
	c := a.lastFast // a request's answer comes on the same connection
	if c == nil || c.key != k {
		c = a.fast[k]
		a.lastFast = c
	}
	switch {
	case c != nil && c.gp:
		a.toGopacket(c, netFlow, t)
		return
	case c == nil:
		// What gopacket's pool does with a packet of a new connection.
		s := a.newStream(netFlow, t.TransportFlow(), t, &a.ctx)
		if s == nil {
			return
		}
		c = &fastConn{key: k, s: s, fwd0: fwd, next: [2]reassembly.Sequence{invalidSeq, invalidSeq}, seen: ts}
		s.fc = c
		a.fast[k] = c
		a.lastFast = c
	}
	hi, dir := 0, reassembly.TCPDirClientToServer
	if fwd != c.fwd0 {
		hi, dir = 1, reassembly.TCPDirServerToClient
	}
	if c.seen.Before(ts) {
		c.seen = ts
	}
	// From here on, gopacket's AssembleWithContext for a connection with
	// nothing queued.
	next := c.next[hi]
	start := next == invalidSeq && t.SYN
	if !c.s.Accept(t, a.ctx.ci, dir, next, &start, &a.ctx) {
		return
	}
	if t.SYN && next != invalidSeq {
		return // a SYN on a synchronized direction is no data
	}
	seq, n := reassembly.Sequence(t.Seq), len(t.Payload)
	switch {
	case t.FIN || t.RST:
	case next == invalidSeq && (t.SYN || start):
		if t.SYN {
			seq = seq.Add(1)
		}
		a.inOrder(c, hi, seq, t.Payload)
		return
	case next != invalidSeq:
		switch d := next.Difference(seq); {
		case d == 0:
			a.inOrder(c, hi, seq, t.Payload)
			return
		case d < 0 && n == 0:
			return // an old acknowledgement: nothing to deliver
		}
	}
	a.handOver(c, hi, netFlow, t, start)
}

// inOrder delivers b, the bytes at seq, the next of direction hi.
func (a *Assembler) inOrder(c *fastConn, hi int, seq reassembly.Sequence, b []byte) {
	c.next[hi] = seq.Add(len(b))
	if len(b) > 0 {
		c.s.reassembled(hi, b, 0, false)
	}
}

// handOver gives c to gopacket, primed, and has it assemble the current
// segment, which direction hi's stream has accepted already (with start).
func (a *Assembler) handOver(c *fastConn, hi int, netFlow gopacket.Flow, t *layers.TCP, start bool) {
	c.gp = true
	net0, sp, dp := netFlow, t.SrcPort, t.DstPort
	if hi == 1 {
		net0, sp, dp = netFlow.Reverse(), dp, sp
	}
	// The first primer creates gopacket's connection with half 0 as its
	// client-to-server direction; each sets its direction's next sequence
	// number (half 0's primer is refused if it has none) and the time.
	a.adopt = c.s
	a.prime(net0, sp, dp, c.next[0], c.seen)
	if c.next[1] != invalidSeq {
		a.prime(net0.Reverse(), dp, sp, c.next[1], c.seen)
	}
	a.adopt = nil
	a.replay, a.replayStart = true, start
	a.asm.AssembleWithContext(netFlow, t, &a.ctx)
	a.replay = false
}

// prime feeds gopacket an empty segment from src to dst ports at next
// (invalidSeq: a direction not started), captured at ts.
func (a *Assembler) prime(netFlow gopacket.Flow, sp, dp layers.TCPPort, next reassembly.Sequence, ts time.Time) {
	h := &a.primeHdr
	binary.BigEndian.PutUint16(h[0:], uint16(sp))
	binary.BigEndian.PutUint16(h[2:], uint16(dp))
	binary.BigEndian.PutUint32(h[4:], uint32(max(next, 0)))
	h[12], h[13] = 5<<4, 0x10 // 20-byte header, ACK
	if a.primeTCP.DecodeFromBytes(h[:], nf) != nil {
		return
	}
	a.priming, a.primeNext = true, next
	a.primeCtx.ci = gopacket.CaptureInfo{Timestamp: ts}
	a.asm.AssembleWithContext(netFlow, &a.primeTCP, &a.primeCtx)
	a.priming = false
}

// accepted answers Accept for a primer or a handed-over segment, whose
// stream state is already what it must be; ok is false for other packets.
func (a *Assembler) accepted(start *bool) (accept, ok bool) {
	switch {
	case a.priming:
		if a.primeNext == invalidSeq {
			return false, true // only the time: the direction has not started
		}
		*start = true // gopacket takes the primer's seq as the next one
		return true, true
	case a.replay:
		a.replay = false
		*start = a.replayStart
		return true, true
	}
	return false, false
}

// toGopacket assembles a segment of a connection gopacket holds, keeping
// what the fast path knows of it: the time, and whether gopacket replaced
// it (a SYN on a closed connection) or dropped it.
func (a *Assembler) toGopacket(c *fastConn, netFlow gopacket.Flow, t *layers.TCP) {
	a.route, a.routed, a.routedTo = c, false, nil
	a.asm.AssembleWithContext(netFlow, t, &a.ctx)
	a.route = nil
	ts := a.ctx.ci.Timestamp
	switch {
	case a.routed && a.routedTo == nil: // replaced by nothing: gone
		a.forget(c)
	case a.routed:
		c.s.unfast(c)
		c.s, c.seen = a.routedTo, ts
		c.s.fc = c
	case c.seen.Before(ts):
		c.seen = ts
	}
}

// unfast forgets that c held s.
func (s *stream) unfast(c *fastConn) {
	if s.fc == c {
		s.fc = nil
	}
}

// forget drops c from the fast path's table, and from its stream.
func (a *Assembler) forget(c *fastConn) {
	c.s.unfast(c)
	if a.fast[c.key] == c {
		delete(a.fast, c.key)
	}
	if a.lastFast == c {
		a.lastFast = nil
	}
}

// gone is called when gopacket drops s's connection from its pool.
func (s *stream) gone() {
	if c := s.fc; c != nil {
		s.a.forget(c)
	}
}

// fastFlush does what gopacket's flush does to the connections the fast
// path holds, after it: each last seen before tc (all of them, with all)
// is closed, and forgotten; and it forgets the connections gopacket holds
// that its flush has just dropped.
func (a *Assembler) fastFlush(tc time.Time, all bool) {
	for _, c := range a.fast {
		if !all && !c.seen.Before(tc) {
			continue
		}
		a.forget(c)
		if !c.gp {
			c.s.ReassemblyComplete(nil)
		}
	}
}

// reapFast drops s, evicted, if the fast path holds it: gopacket never saw
// it, so there is nothing to reset there.
func (a *Assembler) reapFast(s *stream) {
	c := s.fc
	if c == nil || c.gp {
		return
	}
	a.forget(c)
	s.reaped = true
}
