package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kwire/kwire/capture"
)

// A damaged length prefix (a flipped byte in a transferred capture file)
// makes a frame claim far more bytes than it has: the decoder would wait
// for them, and take every frame after it on the connection as that
// frame's body, or skip them all as one oversize frame. When a frame with
// a plausible header claims much more than the largest frame of its
// direction so far, the bytes after its header are searched for the frame
// that must follow it: a request with the same client id and one of the
// next correlation ids, or the response to the request after the one
// being answered. Once found, the frame is given up as damaged (counted
// as a resync of its bytes) and decoding goes on there. A frame that
// really is that large has no such frame inside it, and is decoded (or
// skipped, above --max-frame) as before.

const (
	// suspectMin and suspectRatio: a frame is suspect when it claims more
	// than suspectMin bytes and suspectRatio times the largest frame of
	// its direction so far.
	suspectMin   = 1 << 10
	suspectRatio = 16
	// lookLimit bounds the bytes searched after a suspect frame's header.
	lookLimit = 1 << 20
	// nextCorrs is how far past a request's correlation id the next one
	// may be (clients number each request; some skip a few).
	nextCorrs = 16
)

// look is what identifies the frame that follows a suspect one.
type look struct {
	on     bool
	resp   bool   // a response: the follower answers corr
	corr   int32  // request: the suspect's correlation id
	prev   int32  // request: the last one decoded before it (-1: none)
	client []byte // request: the suspect's client id
	last   string // request: the client id of the connection's last request
	left   int64  // bytes still to search
}

// suspect starts looking after the frame at the start of rem, of claimed
// length l, if it is suspect on dir and its header is plausible. It
// reports whether it did.
func (d *Decoder) suspect(cs *connState, dir capture.Dir, rem []byte, l int64) bool {
	s := &cs.dir[dir]
	if l <= suspectMin || l <= suspectRatio*s.largest || len(rem) < 8 {
		return false
	}
	lk := look{on: true, left: lookLimit}
	if dir == capture.ToServer {
		// A plausible header, or one in turn whose client id was hit too.
		h, ok := parseRequestHeader(&d.protos, &d.tags, rem[4:])
		if !ok || !h.plausible() && !d.inTurn(cs, h.key, h.version, h.corr) {
			return false
		}
		lk.corr, lk.prev, lk.client, lk.last = h.corr, cs.lastCorr, append(s.look.client[:0], h.clientID...), cs.clientID
	} else {
		// The suspect answers the oldest request: its follower, the next.
		if len(cs.pending) < 2 || int32(binary.BigEndian.Uint32(rem[4:])) != cs.pending[0].corr {
			return false
		}
		lk.resp, lk.corr = true, cs.pending[1].corr
	}
	s.look = lk
	return true
}

// follower searches p, bytes after a suspect frame's header, from offset
// from, for the frame that follows it: its offset, or false.
func (d *Decoder) follower(lk *look, p []byte, from int) (int, bool) {
	for i := from; i+8 <= len(p); i++ {
		l := int64(int32(binary.BigEndian.Uint32(p[i:])))
		if l < 4 || l > int64(d.opts.MaxFrame) {
			continue
		}
		if lk.resp {
			if int32(binary.BigEndian.Uint32(p[i+4:])) == lk.corr {
				return i, true
			}
			continue
		}
		if i+12 > len(p) {
			break
		}
		// After the suspect's id, or, if a flipped byte hit that too,
		// after the id of the request before it.
		corr := int32(binary.BigEndian.Uint32(p[i+8:]))
		if l < 8 || (corr <= lk.corr || corr > lk.corr+nextCorrs) && (lk.prev < 0 || corr <= lk.prev+1 || corr > lk.prev+1+nextCorrs) {
			continue
		}
		// The suspect's client id, or, if a flipped byte hit that too,
		// that of the request before it.
		if h, ok := parseRequestHeader(&d.protos, &d.tags, p[i+4:]); ok && h.plausible() &&
			(bytes.Equal(h.clientID, lk.client) || lk.prev >= 0 && string(h.clientID) == lk.last) {
			return i, true
		}
	}
	return 0, false
}

// lookBuffered searches rem, the buffered suspect frame (less than it
// claims), for its follower; it remembers how far it searched.
func (d *Decoder) lookBuffered(s *stream, rem []byte) (int, bool) {
	end := min(len(rem), lookLimit)
	if i, ok := d.follower(&s.look, rem[:end], max(s.looked, 8)); ok {
		return i, true
	}
	s.looked = max(8, end-4-maxHeaderProbe)
	return 0, false
}

// lookSkipped searches p, bytes of a suspect frame being skipped (above
// --max-frame), for its follower.
func (d *Decoder) lookSkipped(s *stream, p []byte) (int, bool) {
	i, ok := d.follower(&s.look, p, 0)
	if s.look.left -= int64(len(p)); s.look.left <= 0 {
		s.look.on = false
	}
	return i, ok
}

// damagedLength gives up the frame of claimed length l whose length cannot
// be right: the frame after it starts n bytes after its start. kept says
// the frame was read up to there (keepCut) rather than skipped.
func (d *Decoder) damagedLength(cs *connState, dir capture.Dir, n int64, l int64, t time.Time, kept bool) {
	s := &cs.dir[dir]
	s.look.on, s.looked, s.skip = false, 0, 0
	d.stats.Resyncs++
	what := "read up to there"
	if !kept {
		d.stats.SkippedBytes += n
		what = "skipped"
	}
	d.anomaly(cs, dir, t, AnomalyResync, n, -1, fmt.Sprintf(
		"a frame claims %d bytes, but the frame after it starts %d bytes on: its length is damaged; %s", l, n, what))
}

// keepCut reads a frame whose damaged length was found out by the frame
// after it (frame: up to there, after the length prefix), when its header
// is a request's (plausible, or the connection's next) whose body reads
// to the byte, or the answer to a request awaiting one: the exchange is
// kept, rather than skipped with it. It reports whether it read the frame.
func (d *Decoder) keepCut(cs *connState, dir capture.Dir, frame []byte, t time.Time) bool {
	if len(d.holes) > 0 || len(cs.dir[dir].holes) > 0 || len(frame) < 8 {
		return false // bytes not copied: left to the usual rules
	}
	if dir == capture.ToServer {
		// Its body must read as the request, to the byte: what is cut
		// there may be no frame at all (the one before claimed too little).
		h, ok := parseRequestHeader(&d.protos, &d.tags, frame)
		if !ok || !h.known || !h.plausible() && !d.inTurn(cs, h.key, h.version, h.corr) || !d.exactBody(&h, frame) {
			return false
		}
		return d.request(cs, frame, t)
	}
	if cs.find(int32(binary.BigEndian.Uint32(frame))) < 0 {
		return false
	}
	d.response(cs, frame, t)
	return true
}

// highByteHit judges a length prefix at rem[0] that no frame has (negative,
// or above --max-frame): found when its high byte was hit by a flipped byte
// of a damaged capture file and the low three bytes are the length: the
// header after it is the connection's next request (Decoder.inTurn) or the
// answer to its oldest one, and the frame so long ends where the buffered
// bytes end or where another frame starts; tail when more bytes must say.
// It also returns the length the low bytes give.
// Low bytes that claim far more than the frames before (a suspect, as for
// the look-ahead) are not taken. A frame of 16 MiB or more has a high byte
// of its own, but never one that makes it negative or larger than
// --max-frame.
func (d *Decoder) highByteHit(cs *connState, dir capture.Dir, rem []byte) (scan, int64) {
	l := int64(binary.BigEndian.Uint32(rem) & 0xffffff)
	if rem[0] == 0 || l > suspectMin && l > suspectRatio*cs.dir[dir].largest {
		return none, l // a frame above --max-frame, undamaged; or one the look-ahead judges
	}
	if dir == capture.ToServer {
		switch {
		case len(rem) < 14:
			return tail, l
		case l < 8 || !d.inTurnAt(cs, rem):
			return none, l
		}
	} else if len(rem) < 8 {
		return tail, l
	} else if l < 4 || len(cs.pending) == 0 || int32(binary.BigEndian.Uint32(rem[4:])) != cs.pending[0].corr {
		return none, l
	}
	end := 4 + l
	switch n := int64(len(rem)); {
	case n == end:
		return found, l
	case n < end+4:
		return tail, l
	}
	next := rem[end:]
	if n := int64(int32(binary.BigEndian.Uint32(next))); n < 4 || n > int64(d.opts.MaxFrame) {
		return none, l
	} else if dir == capture.ToServer {
		return d.requestHead(next, n), l // found, none, or tail
	}
	return found, l
}

// highByteLength counts a length prefix set back by highByteHit to l.
func (d *Decoder) highByteLength(cs *connState, dir capture.Dir, rem []byte, l int64, t time.Time) {
	d.stats.Resyncs++
	d.anomaly(cs, dir, t, AnomalyResync, 0, -1, fmt.Sprintf(
		"a frame's length prefix 0x%08x cannot be right, its high byte damaged: read as %d bytes, where the next frame starts", binary.BigEndian.Uint32(rem), l))
}

// junkRequest reports whether p, the start of an incomplete request frame
// of length l, cannot be a request header, whatever API it would be for:
// a key or version out of any range Kafka uses, a negative correlation id,
// a client id that does not fit or is not text. Such bytes are not a frame
// start (the frame before had a damaged length): waiting for l bytes
// would swallow the frames after them. Keys kmsg does not know are not
// junk: they are reported as unknown APIs.
func junkRequest(p []byte, l int64) bool {
	if len(p) < 14 {
		return false
	}
	key, version := int16(binary.BigEndian.Uint16(p[4:])), int16(binary.BigEndian.Uint16(p[6:]))
	n := int64(int16(binary.BigEndian.Uint16(p[12:])))
	if key < 0 || key >= 1024 || version < 0 || version >= 128 || p[8]&0x80 != 0 || n < -1 || 10+n > l {
		return true
	}
	return !printable(p[14:min(int64(len(p)), 14+max(n, 0))])
}

// inTurnAt reports whether the request header at p[4:] is in turn on its
// connection (Decoder.inTurn): junk for its client id length alone is
// then a damaged request, kept by Decoder.request.
func (d *Decoder) inTurnAt(cs *connState, p []byte) bool {
	if len(p) < 14 || p[8]&0x80 != 0 {
		return false
	}
	return d.inTurn(cs, int16(binary.BigEndian.Uint16(p[4:])), int16(binary.BigEndian.Uint16(p[6:])), int32(binary.BigEndian.Uint32(p[8:])))
}

// nearRequest reports whether frame, a request frame that did not decode,
// has a Kafka request header but for one field: of a key kmsg knows, a
// version of that key, a correlation id >= 0 and a printable client id
// that fits, at most one is wrong. A connection whose first request is
// such a frame is Kafka with a damaged byte, not another protocol.
func (d *Decoder) nearRequest(frame []byte) bool {
	if len(frame) < 10 {
		return false
	}
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	corr, n := int32(binary.BigEndian.Uint32(frame[4:])), int(int16(binary.BigEndian.Uint16(frame[8:])))
	wrong := 0
	proto := keyKnown(&d.protos, key)
	if proto == nil {
		wrong++
	} else if version < 0 || version > proto.MaxVersion() {
		wrong++
	}
	if corr < 0 {
		wrong++
	}
	if n < -1 || 10+n > len(frame) || !printable(frame[10:10+max(n, 0)]) {
		wrong++
	}
	return wrong <= 1
}

// reframe is called for a response to corr, a request not seen: when the
// request direction is waiting for the rest of a frame, and its buffered
// bytes hold, after that frame's start, a plausible header of the request
// corr, the frame's length was damaged (it claims more than it has, the
// request that was answered among what it claims), or it is not a frame
// at all (the one before it claimed too little). It is given up as for a
// suspect frame found by its follower, and the requests after it are
// decoded: the response waiting for its request meets it. No size
// threshold is needed here: the answer says a request was sent.
func (d *Decoder) reframe(cs *connState, corr int32, t time.Time) {
	s := &cs.dir[capture.ToServer]
	if !s.synced || s.skip > 0 || len(s.buf) < 8 || cs.guessing || cs.rawSASL(capture.ToServer) {
		return
	}
	l := int64(int32(binary.BigEndian.Uint32(s.buf)))
	if 4+l <= int64(len(s.buf)) {
		return
	}
	for i := 4; i+12 <= len(s.buf); i++ {
		if int32(binary.BigEndian.Uint32(s.buf[i+8:])) != corr {
			continue
		}
		if n := int64(int32(binary.BigEndian.Uint32(s.buf[i:]))); n < 8 || n > int64(d.opts.MaxFrame) {
			continue
		}
		if h, ok := parseRequestHeader(&d.protos, &d.tags, s.buf[i+4:]); !ok || !h.plausible() {
			continue
		}
		d.damagedLength(cs, capture.ToServer, int64(i), l, t, d.keepCut(cs, capture.ToServer, s.buf[4:i], t))
		n := copy(s.buf, s.buf[i:])
		s.buf = s.buf[:n]
		d.drain(cs, capture.ToServer, n, t)
		return
	}
}
