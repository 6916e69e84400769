package decode

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stream is the decoder's state for one direction of a connection.
type stream struct {
	buf     []byte    // bytes not yet consumed: a partial frame, or unsynced data
	start   time.Time // capture time of buf[0]
	synced  bool      // the next byte (after skip) starts a frame
	skip    int64     // bytes of the current frame still to skip (oversize, damaged)
	skipped int64     // bytes skipped since sync was lost
	lostAt  time.Time // when sync was lost
	cands   []int     // resync: offsets in buf of plausible frame starts
	scan    int       // resync: next offset in buf to judge
	orphans []orphan  // resync: response headers skipped, which a sync may explain
	orphanB int       // resync: the capacity of the orphans' bodies
	chain   int64     // resync: where the orphans followed from the skipped run's start end
	filling bool      // resync: the last pinned orphan gets the bytes of its frame as they are skipped
	holes   []hole    // zero-filled NotCopied runs in buf's frame (holes.go)
	largest int64     // the largest frame decoded (lookahead.go)
	looked  int       // lookahead: next offset to search after a suspect frame
	look    look      // lookahead: the frame that follows a suspect one
	claimed int64     // lookahead: the suspect frame's length
	skipAt  int64     // lookahead: bytes of the suspect frame skipped so far
}

// scan is the result of looking for a frame at an offset.
type scan uint8

const (
	none      scan = iota // no frame starts here
	found                 // a frame starts here
	candidate             // a plausible header; the frame is not complete yet
	tail                  // too few bytes left to judge the header
)

// orphan is a response header skipped while resyncing, at off bytes into
// the skipped run: perhaps the answer to a request sent before the
// capture began. When the frame a resync finds starts where a run of them
// ends, frame after frame, they were such answers (see explainSkipped).
type orphan struct {
	off, n int64 // n: the frame's length, its 4-byte prefix excluded
	corr   int32
	body   []byte // after corr, a copy; nil if not whole when seen, or over maxOrphanBytes
	open   bool   // its frame ran past the bytes at hand when seen
	pinned bool   // at the skipped run's start, or where the pinned one before ends
}

// maxOrphans bounds the skipped response headers remembered; maxOrphanRun
// how many a sync explains.
const (
	maxOrphans   = 256
	maxOrphanRun = 64
	// maxOrphanBytes bounds the bytes of skipped responses kept per
	// direction, to decode those a sync or the end explains (counted in
	// the decoder's buffered bytes).
	maxOrphanBytes = 256 << 10
)

// maxHeaderProbe bounds the bytes a request header can need to be judged:
// length, key, version, correlation id, a client id of up to 255 bytes.
const maxHeaderProbe = 4 + 10 + 255

// feed handles a data chunk on one direction.
func (d *Decoder) feed(cs *connState, dir capture.Dir, c *capture.Chunk) {
	s := &cs.dir[dir]
	p := c.Data
	cs.answered = cs.answered || dir == capture.ToClient
	if s.skip > 0 && !s.look.on { // (a suspect frame's bytes are searched: consume)
		n := min(int64(len(p)), s.skip)
		s.skip -= n
		p = p[n:]
		if len(p) == 0 {
			return
		}
	}
	if len(s.buf) == 0 {
		rest, dir := d.consume(cs, dir, p, c.Time, 0, c.Time)
		s := &cs.dir[dir]
		if len(rest) > 0 {
			s.buf = append(d.streamBuf(s, rest), rest...)
			s.start = c.Time
		} else if s.buf != nil {
			d.putStreamBuf(s)
		}
		return
	}
	old := len(s.buf)
	s.buf = append(s.buf, p...)
	d.drain(cs, dir, old, c.Time)
}

// drain decodes the frames in dir's buffer, whose bytes from offset old
// on arrived at time t, and keeps what is left.
func (d *Decoder) drain(cs *connState, dir capture.Dir, old int, t time.Time) {
	s := &cs.dir[dir]
	rest, dir := d.consume(cs, dir, s.buf, s.start, old, t)
	s = &cs.dir[dir]
	if len(rest) <= len(s.buf)-old { // what is left began in this chunk
		s.start = t
	}
	n := copy(s.buf, rest)
	s.buf = s.buf[:n]
	switch {
	case n == 0:
		d.putStreamBuf(s)
	case cap(s.buf) > maxKeptStream && n < 1<<20: // let a huge frame's buffer go
		s.buf = append([]byte(nil), s.buf...)
	}
}

// Stream buffers: a direction holds one only while it has a partial frame
// (or unsynced bytes). Emptied, it goes to the decoder's free list (at most
// maxFreeStreams bytes, in buffers of at most maxKeptStream), so that the
// memory held follows the partial frames, not the connections: a
// connection that has gone quiet, or died with its FIN lost to a drop,
// holds none until it is closed or times out.
const (
	maxKeptStream  = 4 << 20
	maxFreeStreams = 32 << 20
)

// streamBuf returns an empty buffer for s to keep rest, the start of a
// partial frame: its own if big enough, else one from the free list or
// new, sized for the whole frame when s is in sync and the frame's length
// is known (no doubling and copying as its segments arrive).
func (d *Decoder) streamBuf(s *stream, rest []byte) []byte {
	need := len(rest)
	if s.synced && len(rest) >= 4 {
		if l := int64(int32(binary.BigEndian.Uint32(rest))); l > 0 && l <= int64(d.opts.MaxFrame) {
			need = max(need, int(min(4+l, maxKeptStream)))
		}
	}
	if cap(s.buf) >= need {
		return s.buf[:0]
	}
	if s.buf != nil {
		d.putStreamBuf(s)
	}
	if b := d.streams.get(need); b != nil {
		return b
	}
	return make([]byte, 0, need)
}

// putStreamBuf takes s's (empty) buffer away, to the free list if it
// fits there.
func (d *Decoder) putStreamBuf(s *stream) {
	d.streams.put(s.buf)
	s.buf = nil
}

// consume decodes the frames at the start of p and returns what is left: a
// partial frame, or bytes kept while looking for a frame boundary. Bytes
// before offset old arrived at time t0, the rest at time t. It also returns
// the direction of p, which changes when a guessed connection's sides are
// settled the other way round.
func (d *Decoder) consume(cs *connState, dir capture.Dir, p []byte, t0 time.Time, old int, t time.Time) ([]byte, capture.Dir) {
	s := &cs.dir[dir]
	off := 0
	for off < len(p) {
		if s.skip > 0 {
			n := min(int64(len(p)-off), s.skip)
			if s.look.on { // skipping a suspect frame above --max-frame
				if i, ok := d.lookSkipped(s, p[off:off+int(n)]); ok {
					d.damagedLength(cs, dir, s.skipAt+int64(i), s.claimed, t, false)
					off += i
					continue
				}
				s.skipAt += n
			}
			if s.skip -= n; s.skip == 0 {
				s.look.on = false
			}
			off += int(n)
			continue
		}
		if !s.synced {
			i, ok := d.resync(cs, dir, p[off:])
			s.fillOrphan(p[off:off+i], s.skipped)
			off += i
			s.skipped += int64(i)
			if d.notKafka(cs, dir, t) {
				return nil, dir
			}
			if !ok {
				return p[off:], dir
			}
			if cs.guessing {
				dir = d.settle(cs, dir)
				s = &cs.dir[dir]
			} else if dir == capture.ToClient && len(s.orphans) > 0 && len(p)-off >= 8 {
				s.skipped -= d.explainSkipped(cs, s, s.skipped, int32(binary.BigEndian.Uint32(p[off+4:])), p[:off], s.skipped-int64(off), t)
			}
			s.clearOrphans()
			d.synced(cs, dir, t)
		}
		rem := p[off:]
		if len(rem) < 4 {
			return rem, dir
		}
		l := int64(int32(binary.BigEndian.Uint32(rem)))
		if (l < 0 || l > int64(d.opts.MaxFrame)) && !cs.rawSASL(dir) { // a damaged high byte? (lookahead.go)
			switch r, low := d.highByteHit(cs, dir, rem); r {
			case tail:
				return rem, dir
			case found:
				d.highByteLength(cs, dir, rem, low, t)
				l = low
			}
		}
		if l < 4 || (dir == capture.ToServer && l < 8) {
			if l < 0 || !cs.rawSASL(dir) {
				d.desync(cs, dir, t)
				continue
			}
		}
		if int64(len(rem)) < 4+l && dir == capture.ToServer && !cs.rawSASL(dir) && junkRequest(rem, l) && !d.inTurnAt(cs, rem) {
			d.desync(cs, dir, t) // not a frame start: the one before was cut wrong
			continue
		}
		// Far larger than anything before: a damaged length? (lookahead.go)
		if int64(len(rem)) < 4+l && (s.look.on || d.suspect(cs, dir, rem, l)) {
			if i, ok := d.lookBuffered(s, rem); ok {
				d.damagedLength(cs, dir, int64(i), l, t, d.keepCut(cs, dir, rem[4:i], t))
				off += i
				continue
			}
		}
		if l > int64(d.opts.MaxFrame) {
			if !d.oversize(cs, dir, rem, l, t) {
				return rem, dir // need the header first
			}
			if s.look.on { // search the bytes skipped after what is here
				s.claimed, s.skipAt = l, int64(min(len(rem), lookLimit))
				s.skip -= s.skipAt
				off += int(s.skipAt)
				s.look.left -= s.skipAt
			}
			continue // s.skip now covers the frame
		}
		if int64(len(rem)) < 4+l {
			return rem, dir
		}
		frame := rem[4 : 4+l]
		ft := t
		if off < old {
			ft = t0
		}
		if off == 0 && len(s.holes) > 0 && len(s.buf) > 0 && &p[0] == &s.buf[0] {
			d.holes, s.holes = append(d.holes[:0], s.holes...), s.holes[:0]
		}
		if dir == capture.ToServer {
			if !d.request(cs, frame, t) {
				cs.kafkaish = cs.kafkaish || cs.frames == 0 && d.nearRequest(frame)
				d.holes = d.holes[:0]
				d.desync(cs, dir, t)
				continue
			}
		} else {
			d.response(cs, frame, ft)
		}
		d.holes = d.holes[:0]
		off += int(4 + l)
		s.largest, s.looked, s.look.on = max(s.largest, l), 0, false
	}
	return nil, dir
}

// settle ends the guessing on a connection whose sides were guessed: dir
// just yielded a request, so it is the client->broker direction. If that
// is the direction the source called ToClient, the sides are swapped.
// It returns dir's new name, ToServer.
func (d *Decoder) settle(cs *connState, dir capture.Dir) capture.Dir {
	cs.guessing = false
	if dir == capture.ToClient {
		cs.conn.Swap()
		cs.dir[0], cs.dir[1] = cs.dir[1], cs.dir[0]
		cs.closed[0], cs.closed[1] = cs.closed[1], cs.closed[0]
	}
	// The other direction was searched for requests: search it again,
	// for responses.
	other := &cs.dir[capture.ToClient]
	other.cands, other.scan = other.cands[:0], 0
	return capture.ToServer
}

// maxCands bounds the candidate frame starts remembered while resyncing.
const maxCands = 64

// resync looks for the next frame boundary in p, the unsynced bytes of a
// direction. It returns the offset of the first frame and true; or the
// number of leading bytes that cannot hold a frame start (to drop) and false.
//
// A candidate is an offset where a plausible header starts. Its frame is
// accepted only once complete, when kmsg decodes it and re-encodes it to
// exactly its length; meanwhile scanning goes on, so that a false candidate
// with a huge length (record data that looks like a header) cannot stall
// the stream: the first later frame that validates wins.
func (d *Decoder) resync(cs *connState, dir capture.Dir, p []byte) (int, bool) {
	s := &cs.dir[dir]
	if s.scan > len(p) { // defensive: state from bytes no longer here
		s.cands, s.scan = s.cands[:0], 0
	}
	kept := s.cands[:0]
	for _, c := range s.cands {
		switch d.frameAt(cs, dir, p[c:]) {
		case found:
			s.cands, s.scan = s.cands[:0], 0
			return c, true
		case candidate, tail:
			kept = append(kept, c)
		}
	}
	s.cands = kept
	i := s.scan
	for ; i < len(p); i++ {
		r := d.frameAt(cs, dir, p[i:])
		if r == found {
			s.cands, s.scan = s.cands[:0], 0
			return i, true
		}
		if r == tail {
			break
		}
		if r == none && dir == capture.ToClient && !cs.guessing {
			d.noteOrphan(s, s.skipped+int64(i), p[i:])
		}
		if r == candidate {
			if len(s.cands) == maxCands {
				s.cands = append(s.cands[:0], s.cands[1:]...)
			}
			s.cands = append(s.cands, i)
		}
	}
	drop := i
	if len(s.cands) > 0 && s.cands[0] < drop {
		drop = s.cands[0]
	}
	for k := range s.cands {
		s.cands[k] -= drop
	}
	s.scan = i - drop
	return drop, false
}

// noteOrphan remembers a response header at p[0], off bytes into the
// skipped run, if it could be one: a sane length and correlation id, and
// where its frame ends, if p goes on there, the header of a later
// response (a sane length, a higher correlation id: brokers answer in
// order). Record data is full of small numbers that read as a length
// and an id; that last test keeps most of them out. The header at the
// skipped run's start (the first byte the capture has of the stream, or
// the first after a gap), and each one where the one before it so found
// ends, are pinned: the frames followed from the start, as tshark
// follows them. When there are too many, those not pinned whose end was
// not yet known go first.
func (d *Decoder) noteOrphan(s *stream, off int64, p []byte) {
	if len(p) < 8 {
		return
	}
	l, corr := int64(int32(binary.BigEndian.Uint32(p))), int32(binary.BigEndian.Uint32(p[4:]))
	if l < 4 || l > int64(d.opts.MaxFrame) || corr < 0 {
		return
	}
	end := 4 + l
	if end+8 <= int64(len(p)) {
		l2, corr2 := int64(int32(binary.BigEndian.Uint32(p[end:]))), int32(binary.BigEndian.Uint32(p[end+4:]))
		if l2 < 4 || l2 > int64(d.opts.MaxFrame) || corr2 <= corr {
			return
		}
	}
	if len(s.orphans) == maxOrphans {
		s.forgetOrphans()
	}
	o := orphan{off: off, n: l, corr: corr, open: end > int64(len(p)), pinned: off == s.chain}
	if o.pinned {
		s.chain, s.filling = off+end, false
	}
	switch {
	case s.orphanB+int(l) > maxOrphanBytes:
	case !o.open:
		o.body = append([]byte(nil), p[8:end]...)
		s.orphanB += cap(o.body)
	case o.pinned: // the rest as it is skipped (fillOrphan)
		o.body = append(make([]byte, 0, l-4), p[8:]...)
		s.orphanB += cap(o.body)
		s.filling = true
	}
	s.orphans = append(s.orphans, o)
}

// fillOrphan adds to the body of the orphan being filled, the last
// pinned one, the bytes of its frame among b, skipped bytes that start at
// offset at of the skipped run.
func (s *stream) fillOrphan(b []byte, at int64) {
	if !s.filling {
		return
	}
	k := len(s.orphans) - 1
	for k >= 0 && !s.orphans[k].pinned {
		k--
	}
	if k < 0 {
		s.filling = false
		return
	}
	o := &s.orphans[k]
	from, end := o.off+8+int64(len(o.body)), o.off+4+o.n
	if lo, hi := max(from, at), min(end, at+int64(len(b))); lo == from && hi > lo {
		o.body = append(o.body, b[lo-at:hi-at]...) // within its capacity, counted in orphanB
	}
	s.filling = o.off+8+int64(len(o.body)) < end
}

// forgetOrphans makes room for more skipped response headers: of the
// older half, those not pinned whose end was not known when seen, or else
// all not pinned, or else the older half.
func (s *stream) forgetOrphans() {
	keep := s.orphans[:0]
	for i, o := range s.orphans {
		if i < maxOrphans/2 && o.open && !o.pinned {
			s.orphanB -= cap(o.body)
			continue
		}
		keep = append(keep, o)
	}
	if len(keep) == maxOrphans {
		keep = keep[:0]
		for i, o := range s.orphans {
			if i < maxOrphans/2 && !o.pinned {
				s.orphanB -= cap(o.body)
				continue
			}
			keep = append(keep, o)
		}
	}
	if len(keep) == maxOrphans {
		for _, o := range keep[:maxOrphans/2] {
			s.orphanB -= cap(o.body)
		}
		keep = keep[:copy(keep, keep[maxOrphans/2:])]
	}
	clear(s.orphans[len(keep):maxOrphans])
	s.orphans = keep
}

// clearOrphans forgets the skipped response headers and their bodies.
func (s *stream) clearOrphans() {
	clear(s.orphans)
	s.orphans, s.orphanB, s.chain, s.filling = s.orphans[:0], 0, 0, false
}

// explainSkipped, as a response direction syncs on a frame of
// correlation id corr after skipping end bytes (or ends there: corr is
// then MaxInt32), reports the whole responses those bytes end with: the
// run of skipped headers, each frame ending where the next starts and the
// last at end, correlation ids rising to below corr. They answer requests
// sent before the capture began, or lost: counted and reported as
// unmatched responses, their bodies decoded where their API can be
// inferred (from the copy kept, or from win, bytes still at hand that
// start at offset winAt of the skipped run). It returns the bytes they
// explain, no longer skipped, and forgets the headers.
func (d *Decoder) explainSkipped(cs *connState, s *stream, end int64, corr int32, win []byte, winAt int64, t time.Time) int64 {
	var run []orphan // from the last frame back
	for k := len(s.orphans) - 1; k >= 0 && len(run) < maxOrphanRun; k-- {
		if o := s.orphans[k]; o.off+4+o.n == end && o.corr < corr {
			run = append(run, o)
			end, corr = o.off, o.corr
		}
	}
	var explained int64
	for k := len(run) - 1; k >= 0; k-- {
		o := run[k]
		body := o.body
		if int64(len(body)) != o.n-4 {
			body = nil // not all of it: a gap, or over maxOrphanBytes
		}
		if i := o.off + 8 - winAt; body == nil && i >= 0 && o.off+4+o.n-winAt <= int64(len(win)) {
			body = win[i : o.off+4+o.n-winAt]
		}
		d.unmatchedFrame(cs, o.corr, int(4+o.n), body, t)
		explained += 4 + o.n
	}
	s.clearOrphans()
	return explained
}

// frameAt judges whether a frame starts at p[0] on an unsynced direction.
func (d *Decoder) frameAt(cs *connState, dir capture.Dir, p []byte) scan {
	if dir == capture.ToServer || cs.guessing {
		return d.requestAt(p)
	}
	return d.responseAt(cs, p)
}

// requestAt judges a request frame at p[0]: a sane length, a key and
// version kmsg knows, a printable client id and, once complete, a body that
// kmsg decodes and re-encodes to its exact size.
func (d *Decoder) requestAt(p []byte) scan {
	if len(p) < 4 {
		return tail
	}
	l := int64(int32(binary.BigEndian.Uint32(p)))
	if l < 10 || l > int64(d.opts.MaxFrame) {
		return none
	}
	if r := d.requestHead(p, l); r != found {
		return r
	}
	frame := p[4:min(int64(len(p)), 4+l)]
	if int64(len(frame)) < l {
		return candidate
	}
	h, ok := parseRequestHeader(&d.protos, &d.tags, frame)
	if !ok || !h.plausible() || !d.exactBody(&h, frame) {
		return none
	}
	return found
}

// maxZeroTrail is how many zero bytes a request may carry after what kmsg
// reads of it: librdkafka before 1.0 wrote an empty array (int32 0) into
// ApiVersions v0, which has no field; brokers ignore such bytes.
const maxZeroTrail = 4

// exactBody reports whether the body of frame, a request of header h (a
// key and version kmsg knows), reads as that request and writes back to
// its exact size, or to that size less at most maxZeroTrail zero bytes at
// its end: what tells a request from bytes that only start like one.
func (d *Decoder) exactBody(h *reqHeader, frame []byte) bool {
	req := d.protos[h.key]
	req.SetVersion(h.version)
	body := frame[h.body:]
	if req.ReadFrom(body) != nil {
		return false
	}
	n := len(req.AppendTo(d.scratch[:0]))
	return n == len(body) || n < len(body) && len(body)-n <= maxZeroTrail && allZero(body[n:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// requestHead judges the fixed part of a request header at p[0] (length l):
// key and version kmsg knows, correlation id >= 0, a client id that fits
// the frame and is printable as far as p goes. It returns found when they
// are plausible, tail when p is too short to tell.
func (d *Decoder) requestHead(p []byte, l int64) scan {
	if len(p) < 14 {
		return tail
	}
	key, version := int16(binary.BigEndian.Uint16(p[4:])), int16(binary.BigEndian.Uint16(p[6:]))
	proto := keyKnown(&d.protos, key)
	n := int64(int16(binary.BigEndian.Uint16(p[12:])))
	if proto == nil || version < 0 || version > proto.MaxVersion() || p[8]&0x80 != 0 || n < -1 || 10+n > l {
		return none
	}
	if !printable(p[14:min(int64(len(p)), 14+max(n, 0))]) {
		return none
	}
	return found
}

// responseAt judges a response frame at p[0]: a sane length, the
// correlation id of a request awaiting its response on cs and, once
// complete, a body that decodes and re-encodes to its exact size.
func (d *Decoder) responseAt(cs *connState, p []byte) scan {
	if len(p) < 8 {
		return tail
	}
	l := int64(int32(binary.BigEndian.Uint32(p)))
	if l < 4 || l > int64(d.opts.MaxFrame) || len(cs.pending) == 0 {
		return none
	}
	i := cs.find(int32(binary.BigEndian.Uint32(p[4:])))
	if i < 0 {
		return none
	}
	if int64(len(p)) < 4+l {
		return candidate
	}
	pd := cs.pending[i]
	if keyKnown(&d.protos, pd.key) == nil {
		return found // nothing more to check
	}
	resp, err := d.decodeResponse(pd, p[8:4+l])
	if err != nil {
		return none
	}
	if pd.key != 18 && !exactSize(resp, pd, int(l-4), &d.scratch) {
		return none
	}
	return found
}

// exactSize reports whether resp re-encodes to n bytes (plus the header tag
// byte of flexible versions).
func exactSize(resp kmsg.Response, pd *pending, n int, scratch *[]byte) bool {
	b := resp.AppendTo((*scratch)[:0])
	*scratch = b[:0]
	if resp.IsFlexible() {
		return len(b)+1 == n
	}
	return len(b) == n
}

// desync records that a direction lost its frame boundaries.
func (d *Decoder) desync(cs *connState, dir capture.Dir, t time.Time) {
	s := &cs.dir[dir]
	if s.synced {
		s.synced = false
		s.lostAt = t
		s.cands, s.scan = s.cands[:0], 0
		s.holes = s.holes[:0]
		s.clearOrphans()
	}
	s.looked, s.look.on = 0, false
}

// synced records that a direction found a frame boundary again.
func (d *Decoder) synced(cs *connState, dir capture.Dir, t time.Time) {
	s := &cs.dir[dir]
	s.synced = true
	if s.skipped > 0 {
		d.stats.Resyncs++
		d.stats.SkippedBytes += s.skipped
		d.anomaly(cs, dir, t, AnomalyResync, s.skipped, -1,
			fmt.Sprintf("skipped %d bytes to the next frame boundary", s.skipped))
		s.skipped = 0
	}
}

// notKafka judges a connection whose requests have not yet yielded a
// frame: bytes skipped before the first request beyond the sniff limit (0
// when the stream was seen from its first byte on a port not known to be a
// broker's) mean it is not Kafka. It is then ignored.
func (d *Decoder) notKafka(cs *connState, dir capture.Dir, t time.Time) bool {
	skipped := cs.dir[capture.ToServer].skipped
	limit := int64(d.opts.SniffBytes)
	if cs.guessing { // both directions are searched for requests
		skipped += cs.dir[capture.ToClient].skipped
		limit *= 2
	} else if dir != capture.ToServer {
		return false
	}
	if cs.frames > 0 || skipped == 0 {
		return false
	}
	if cs.conn.Handshake && cs.conn.Role != capture.RolePort && !cs.kafkaish {
		if !cs.answered && skipped <= limit {
			return false // the broker's answer may still say it is Kafka
		}
		limit = 0
	}
	if skipped <= limit {
		return false
	}
	d.stats.NonKafkaConns++
	cs.conn.Ignore = true
	if cs.conn.Role == capture.RolePort {
		d.anomaly(cs, dir, t, AnomalyNotKafka, skipped, -1,
			"no Kafka request found on a broker port: connection ignored")
	}
	cs.dir[0].skipped, cs.dir[1].skipped = 0, 0
	cs.dir[0].drop()
	cs.dir[1].drop()
	return true
}

// gap handles bytes missing from one direction. A gap of known size inside
// a frame whose length is known keeps the direction in sync: that frame is
// lost (its header, when seen, still matches its request or response), the
// next is decoded.
func (d *Decoder) gap(cs *connState, c *capture.Chunk) {
	if c.NotCopied {
		// The source chose not to copy these bytes (eBPF --snap): the
		// frame they cut loses its body, as for a gap, but nothing was
		// lost from the capture: counted, not reported.
		d.stats.NotCopiedBytes += int64(c.Len)
	} else {
		d.stats.Gaps++
		if c.Len > 0 {
			d.stats.GapBytes += int64(c.Len)
		}
		d.anomaly(cs, c.Dir, c.Time, AnomalyGap, int64(c.Len), -1, "bytes missing from the capture")
	}
	d.place(cs, c)
}

// place puts gap c in its direction's stream (see gap), counted already.
func (d *Decoder) place(cs *connState, c *capture.Chunk) {
	s := &cs.dir[c.Dir]
	n := int64(c.Len)
	switch {
	case n < 0:
	case s.skip > 0:
		if n <= s.skip {
			s.skip -= n
			return
		}
		s.skip = 0
	case s.synced && len(s.buf) >= 4:
		total := 4 + int64(int32(binary.BigEndian.Uint32(s.buf)))
		if total <= int64(d.opts.MaxFrame)+4 {
			if c.NotCopied && d.fillHole(cs, c.Dir, n, total, c.Time) {
				return
			}
			// The frame is lost; its header still pairs request and
			// response. If the gap ends inside it, the next frame
			// starts right after it: the direction stays in sync.
			d.damaged(cs, c.Dir, s.buf[4:], s.start)
			if have := int64(len(s.buf)); have+n <= total {
				s.skip = total - have - n
				s.drop()
				return
			}
		}
	}
	if !s.synced {
		if d.adopt(cs, c) {
			return
		}
		s.fillOrphan(s.buf, s.skipped)
		s.filling = false // the rest of its frame went missing
		s.skipped += int64(len(s.buf))
	} else {
		d.stats.SkippedBytes += int64(len(s.buf))
		d.desync(cs, c.Dir, c.Time)
	}
	s.drop()
}

// drop discards the buffered bytes and the resync state that points
// into them.
func (s *stream) drop() {
	s.buf = s.buf[:0]
	s.cands = s.cands[:0]
	s.scan = 0
	s.holes = s.holes[:0]
}
