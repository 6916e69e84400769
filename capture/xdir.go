package capture

import (
	"slices"
	"time"

	"github.com/gopacket/gopacket/reassembly"
)

// Disorder across the two directions.
//
// A tap with one feed per direction, a switch's SPAN port or a cloud
// traffic mirror carries each direction of a connection on a path of its
// own, and one path can run milliseconds behind the other: a response is
// captured before the request it answers, a segment after the
// acknowledgement of it. Reassembly orders each direction by itself; the
// order between them is what this file restores.
//
// Every segment says, in its acknowledgement number, how much of the other
// direction its sender had received. Bytes that acknowledge bytes of the
// other direction not captured yet are held (copied) until those bytes
// arrive, so that a request is delivered before the response that
// acknowledges it, as it was sent. The wait is bounded like the wait for
// a segment missing within a direction: after Options.ReorderTimeout of
// capture time, when the other direction closes, or when more than
// maxHeldBytes are held, held bytes go on; the bytes they waited for are
// then a gap of their own direction, reported as any gap is. Before the
// other direction's first packet, bytes wait only where the handshake
// says where it begins: on a connection seen mid-stream, or a capture of one
// direction, they go on at once (the first response of a connection
// seen mid-stream with the clients' feed late can then come before its
// request). A connection whose other direction never showed up within the
// timeout is not held again.
//
// Nothing is held in the ordinary case, where a segment acknowledges only
// bytes already captured: the check is a comparison per chunk.

// maxAckAhead bounds how far ahead of the other direction's bytes an
// acknowledgement may point and be waited for: further, the header is
// damaged; a feed running late is not 16 MiB behind on one connection.
const maxAckAhead = 1 << 24

// maxHeldBytes bounds the bytes held per direction.
const maxHeldBytes = 8 << 20

// waitChunk is a chunk held until the other direction's bytes that ack
// acknowledges have arrived.
type waitChunk struct {
	kind   Kind
	data   []byte // a copy
	n      int
	reason CloseReason
	t      time.Time // its own capture time
	ack    reassembly.Sequence
	at     time.Time // the capture clock when it was held
}

// noteAck records the acknowledgement of the packet of direction hi being
// assembled: the bytes it delivers (its own, and those it lets out of
// reassembly's buffers) wait for what it acknowledges. (Not the furthest
// acknowledgement of the direction: a FIN seen ahead of the last data,
// acknowledging the other side's FIN, would hold that data until the
// other side closes.)
func (h *halfState) noteAck(ack reassembly.Sequence, ok bool) {
	h.ack, h.ackOK = ack, ok
	if ok && h.otherAt == 0 && h.synNext != 0 {
		h.otherAt = ack // the handshake's ACK: where the other side begins
	}
}

// ahead reports whether ack acknowledges bytes of the direction other
// than hi that have not arrived.
func (s *stream) ahead(hi int, ack reassembly.Sequence) bool {
	o := &s.half[1-hi]
	if o.closed || s.oneWay {
		return false
	}
	if !o.started {
		// The other feed has not shown its first packet. Where this
		// direction began with the handshake, its first
		// acknowledgement tells where the other begins: wait for
		// bytes after it. Else (the capture began mid-stream, or has
		// one direction only) there is no telling: deliver.
		at := s.half[hi].synAcks
		if at == 0 {
			at = s.half[hi].otherAt
		}
		return at != 0 && at.Difference(ack) > 0 && at.Difference(ack) <= maxAckAhead
	}
	d := o.pos.Difference(ack)
	return d > 0 && d <= maxAckAhead
}

// deliver hands one chunk to the Sink, or holds it while its direction
// waits for the other's bytes it acknowledges; a chunk of one direction
// may release the other's. A direction closed by its FIN holds its Close
// behind what it held.
func (s *stream) deliver(hi int, kind Kind, data []byte, n int, reason CloseReason, t time.Time) {
	if kind != Close && s.conn.Ignore {
		return
	}
	h := &s.half[hi]
	switch {
	case kind == Close && reason != CloseFIN:
		// A reset, or reassembly gives up on the connection: what both
		// directions held goes on, before the close.
		s.releaseAll(hi)
		s.releaseAll(1 - hi)
		s.send(hi, kind, data, n, reason, t)
		return
	case kind == Close:
		// A FIN: it comes after what its direction held, and what the
		// other direction held waiting for this one goes on (ahead is
		// false once a direction is closed).
		if len(h.held) == 0 || !s.hold(hi, kind, data, n, reason, t) {
			s.releaseAll(hi)
			s.send(hi, kind, data, n, reason, t)
		}
	case len(h.held) > 0 || h.ackOK && s.ahead(hi, h.ack):
		if !s.hold(hi, kind, data, n, reason, t) {
			s.releaseAll(hi)
			s.send(hi, kind, data, n, reason, t)
		}
	default:
		s.send(hi, kind, data, n, reason, t)
	}
	if len(s.half[1-hi].held) > 0 {
		s.releaseReady(1-hi, kind == Data)
	}
}

// hold keeps a copy of a chunk of direction hi; false when that would hold
// more than maxHeldBytes.
func (s *stream) hold(hi int, kind Kind, data []byte, n int, reason CloseReason, t time.Time) bool {
	h := &s.half[hi]
	if h.heldBytes+len(data) > maxHeldBytes {
		return false
	}
	if !s.waiting {
		s.waiting = true
		s.a.waiting = append(s.a.waiting, s)
	}
	if data != nil {
		data = append([]byte(nil), data...)
	}
	h.held = append(h.held, waitChunk{kind: kind, data: data, n: n, reason: reason, t: t, ack: h.ack, at: s.a.now})
	h.heldBytes += len(data)
	return true
}

// releaseReady delivers the held chunks of direction hi whose wait is
// over, in order; came says the bytes they waited for came (else they
// were given up as a gap).
func (s *stream) releaseReady(hi int, came bool) {
	h := &s.half[hi]
	i := 0
	for i < len(h.held) && !s.ahead(hi, h.held[i].ack) {
		i++
	}
	s.release(hi, i, came)
}

// releaseAll delivers every held chunk of direction hi, their wait given
// up.
func (s *stream) releaseAll(hi int) {
	s.release(hi, len(s.half[hi].held), false)
}

// release delivers the first n held chunks of direction hi. When the bytes
// they waited for came, they are dated no earlier than the latest packet:
// readable only once what they acknowledge had come, and so the chunks of
// a connection keep their order in time (a response is not dated before
// its request). Given up, they keep their own time.
func (s *stream) release(hi, n int, came bool) {
	h := &s.half[hi]
	if n == 0 {
		return
	}
	for _, c := range h.held[:n] {
		h.heldBytes -= len(c.data)
		t := c.t
		if came {
			t = later(t, s.last)
		}
		if c.kind == Data {
			h.dataT = later(h.dataT, t)
		}
		s.send(hi, c.kind, c.data, c.n, c.reason, t)
	}
	m := copy(h.held, h.held[n:])
	clear(h.held[m:])
	h.held = h.held[:m]
	if m == 0 {
		h.held = nil
	}
}

// releaseHeld delivers the chunks held ReorderTimeout or longer (all of
// them with all), in order of connection ID. A direction still not started
// then is taken for one the capture does not have.
func (a *Assembler) releaseHeld(all bool) {
	if len(a.waiting) == 0 {
		return
	}
	slices.SortFunc(a.waiting, func(x, y *stream) int { return cmpUint64(x.conn.ID, y.conn.ID) })
	keep := a.waiting[:0]
	for _, s := range a.waiting {
		for hi := range 2 {
			h := &s.half[hi]
			if len(h.held) > 0 && (all || a.now.Sub(h.held[0].at) >= a.opts.ReorderTimeout) {
				if !s.half[1-hi].started {
					s.oneWay = true
				}
				s.releaseAll(hi)
			}
		}
		if len(s.half[0].held)+len(s.half[1].held) > 0 {
			keep = append(keep, s)
		} else {
			s.waiting = false
		}
	}
	clear(a.waiting[len(keep):])
	a.waiting = keep
}
