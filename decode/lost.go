package decode

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kwire/kwire/capture"
)

// damaged handles a frame that a gap cut: part is the frame's bytes seen
// before the gap (after the length prefix). A request whose header was seen
// still awaits its response; a response whose correlation id was seen still
// completes its exchange, without a body.
func (d *Decoder) damaged(cs *connState, dir capture.Dir, part []byte, t time.Time) {
	if dir == capture.ToServer {
		h, ok := parseRequestHeader(&d.protos, &d.tags, part)
		// As for a whole request: no negative key, version or id (an
		// unknown key is kept, header only; a known one must be plausible).
		if !ok || h.key < 0 || h.version < 0 || h.corr < 0 || !h.plausible() && h.known {
			return
		}
		p := d.begin(cs, &h, t, 0)
		if p.reqErr == nil {
			p.reqErr = ErrLost
		}
		d.enqueue(cs, p, t)
		return
	}
	if len(part) < 4 {
		return
	}
	if p := d.match(cs, int32(binary.BigEndian.Uint32(part)), 0, t); p != nil {
		d.emit(cs, p, nil, ResponseSeen, t, 0, ErrLost)
		d.release(cs, p)
	}
}

// oversize handles a frame longer than MaxFrame at the start of rem. It
// returns false when more bytes are needed to judge its header. Otherwise
// the frame is skipped (s.skip) while the stream stays in sync, and its
// request still awaits (or its response completes) an exchange; or, when
// the header is not plausible, the direction loses sync.
func (d *Decoder) oversize(cs *connState, dir capture.Dir, rem []byte, l int64, t time.Time) bool {
	s := &cs.dir[dir]
	if len(rem) < 8 {
		return false
	}
	ok := false
	if dir == capture.ToServer {
		switch d.requestHead(rem, l) {
		case tail:
			return false
		case none:
			d.desync(cs, dir, t)
			return true
		}
		if len(rem) < maxHeaderProbe && int64(len(rem)) < 4+l {
			return false
		}
		h, hok := parseRequestHeader(&d.protos, &d.tags, rem[4:])
		if ok = hok && h.plausible(); ok {
			p := d.begin(cs, &h, t, int(min(l+4, 1<<62)))
			p.reqErr = ErrOversize
			d.enqueue(cs, p, t)
		}
	} else if p := d.match(cs, int32(binary.BigEndian.Uint32(rem[4:])), 0, t); p != nil {
		ok = true
		d.emit(cs, p, nil, ResponseSeen, t, int(4+l), ErrOversize)
		d.release(cs, p)
	}
	if !ok {
		d.desync(cs, dir, t)
		return true
	}
	d.stats.Oversize++
	d.anomaly(cs, dir, t, AnomalyOversize, 4+l, -1,
		fmt.Sprintf("frame of %d bytes is above --max-frame %d: skipped", l, d.opts.MaxFrame))
	s.skip = 4 + l
	return true
}

// adopt handles gap c on an unsynced direction whose buffer holds a
// candidate frame start (resync) that the gap falls inside, or that leads
// to it: frames complete in the buffer, one after the other by their
// lengths, up to the one the gap falls inside. Such a candidate can never
// be checked whole: without adopting it, the buffer is dropped and the
// search starts again in the middle of its frame, and a connection whose
// large first frames each lost a segment (a producer with 100 kB
// requests) never yields one and is ignored as not Kafka; on a broker an
// eBPF source picks up mid-stream, a response whose records went by
// sendfile (not copied) follows one whose request came before the probes,
// which nothing can check either. The first candidate is taken as the
// frame boundary when the frame the gap falls inside has a header that
// stands on its own (a request: a known key and version and a printable,
// non-empty client id; a response: the id of a request awaiting its
// answer): the bytes before it are counted as skipped, the frames before
// the gap are decoded, and the gap placed as in a synced direction: a
// hole not copied is filled (holes.go), a gap loses its frame. A false
// candidate desyncs again at the next frame, as any damaged length does.
func (d *Decoder) adopt(cs *connState, c *capture.Chunk) bool {
	dir, n := c.Dir, int64(c.Len)
	s := &cs.dir[dir]
	if n <= 0 || len(s.cands) == 0 || cs.guessing {
		return false
	}
	first := s.cands[0]
	at := first
	var rem []byte
	for {
		rem = s.buf[at:]
		if len(rem) < 14 {
			return false
		}
		l := int64(int32(binary.BigEndian.Uint32(rem)))
		if l < 4 || l > int64(d.opts.MaxFrame) {
			return false
		}
		if have, total := int64(len(rem)), 4+l; have < total {
			if have+n > total {
				return false
			}
			break
		}
		at += int(4 + l) // complete: the next frame follows it
	}
	if dir == capture.ToServer {
		h, ok := parseRequestHeader(&d.protos, &d.tags, rem[4:])
		if !ok || !h.plausible() || len(h.clientID) == 0 {
			return false
		}
	} else if cs.find(int32(binary.BigEndian.Uint32(rem[4:]))) < 0 {
		return false
	}
	s.skipped += int64(first)
	d.synced(cs, dir, c.Time)
	s.buf = s.buf[:copy(s.buf, s.buf[first:])]
	s.cands, s.scan = s.cands[:0], 0
	if at > first {
		d.drain(cs, dir, len(s.buf), c.Time)
		if !s.synced { // a frame before the gap was false after all
			return false
		}
	}
	d.place(cs, c)
	return true
}
