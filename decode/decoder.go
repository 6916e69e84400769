package decode

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// Decoder turns chunks into exchanges. It is a capture.Sink. It is not safe
// for concurrent use: a source calls it from one goroutine.
type Decoder struct {
	opts     Options
	h        Handler
	conns    map[uint64]*connState
	buffered int64 // bytes held in partial frames, all connections
	stats    Stats
	protos   [maxKey]kmsg.Request // one request per key, for header checks
	tags     kbin.Reader          // skips tagged fields (kmsg.SkipTags takes an interface)

	ex      Exchange // reused for every Handler call
	an      Anomaly
	scratch []byte // re-encoding buffer for resync validation

	bodies    freeList // request body buffers (message.go)
	streams   freeList // stream buffers (stream.go)
	holes     []hole   // the holes of the frame being decoded (holes.go)
	spans     []recordSpan
	respHoles []PartitionIndex
	spares    spares // recycled messages (recycle.go)
	deferred  []byte // the response body emit passes on (Options.DeferResponses)
	// seen has bit v of seen[k] set once a request of key k, version v
	// was read: what an unmatched response's API is inferred from
	// (infer.go).
	seen [maxKey]uint64
}

// New returns a Decoder calling h. opts may be nil.
func New(h Handler, opts *Options) *Decoder {
	d := &Decoder{opts: opts.withDefaults(), h: h, conns: make(map[uint64]*connState),
		bodies:  freeList{each: maxKeptBody, total: maxFreeBufs},
		streams: freeList{each: maxKeptStream, total: maxFreeStreams}}
	for k := range d.protos {
		d.protos[k] = kmsg.RequestForKey(int16(k))
	}
	d.spares.ref = d.opts.ReferenceKmsg
	return d
}

// SetDeferResponses turns Options.DeferResponses on or off for the frames
// decoded from now on.
func (d *Decoder) SetDeferResponses(on bool) { d.opts.DeferResponses = on }

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }

// connState is the decoder's state for one connection.
type connState struct {
	conn    *capture.Conn
	dir     [2]stream
	pending []*pending // requests awaiting responses, in request order
	free    []*pending
	frames  int64 // frames decoded; 0 means not yet known to be Kafka
	// kafkaish: its first request did not decode, but its header was a
	// Kafka request's but for one field, or its broker side sent a
	// response frame (damage to the requests): searched on as on a
	// broker port (notKafka). answered: the broker side sent bytes.
	kafkaish, answered bool
	lastCorr           int32 // of the latest request decoded (-1: none yet)
	sniffed            int   // bytes searched without finding a frame
	first              bool  // first data chunk seen
	// guessing: the source guessed the sides (mid-stream, no broker port)
	// and no request was found yet: both directions are searched for one.
	guessing bool
	closed   [2]bool

	clientID string // last client id, reused to avoid an allocation per request

	early      []early // responses that came before their requests
	earlyBytes int
	// pendingBytes is the request bodies pending entries hold (p.buf):
	// counted in buffered, so that Options.MaxBuffered bounds them.
	pendingBytes int64

	apis      []apiFit // the APIs and versions of its requests (infer.go)
	triedAll  int      // unmatched responses tried as every API (infer.go)
	inferWork int      // bytes read trying unmatched responses (infer.go)

	saslRaw    bool // SaslHandshake v0 done: raw SASL tokens follow (KIP-43)
	saslTokens int  // raw tokens sent, awaiting the broker's token
	reported   map[AnomalyKind]bool
}

// Chunk implements capture.Sink.
func (d *Decoder) Chunk(c *capture.Chunk) {
	cs := d.conns[c.Conn.ID]
	if cs == nil {
		if c.Kind == capture.Close {
			return
		}
		cs = &connState{conn: c.Conn, guessing: c.Conn.Role == capture.RoleGuess, lastCorr: -1}
		// A stream seen from its first byte starts at a frame.
		cs.dir[0].synced, cs.dir[1].synced = c.Conn.Handshake, c.Conn.Handshake
		d.conns[c.Conn.ID] = cs
	}
	before := cs.buffered()
	switch c.Kind {
	case capture.Data:
		if !c.Conn.Ignore && len(c.Data) > 0 {
			d.data(cs, c)
		}
	case capture.Gap:
		if !c.Conn.Ignore {
			d.gap(cs, c)
		}
	case capture.Close:
		d.close(cs, c)
		if d.conns[c.Conn.ID] == nil {
			d.buffered -= before
			return
		}
	}
	d.buffered += cs.buffered() - before
	if d.buffered > int64(d.opts.MaxBuffered) && c.Kind != capture.Close {
		d.shed(cs, c)
	}
}

// buffered is the bytes cs holds: partial frames, bodies of requests
// awaiting responses, responses held for requests not yet seen. A
// partial frame counts its buffer's capacity, not the bytes in it so
// far: the buffer is sized for the whole frame its length claims (up to
// maxKeptStream), and in a damaged file many streams at once claim
// frames far longer than what follows.
func (cs *connState) buffered() int64 {
	return int64(cap(cs.dir[0].buf)+cap(cs.dir[1].buf)+cs.earlyBytes+cs.dir[0].orphanB+cs.dir[1].orphanB) + cs.pendingBytes
}

// shed keeps the decoder within Options.MaxBuffered: the connection that
// just grew gives up what it holds. A partial frame in sync has a known
// length, so the rest of it is skipped and the stream stays in sync; its
// header still pairs request and response. Requests awaiting a response
// drop their bodies (the exchange keeps its header, ErrBufferLimit), and
// responses held for requests not yet seen are reported unmatched.
func (d *Decoder) shed(cs *connState, c *capture.Chunk) {
	limit := func(dir capture.Dir, n int64) {
		d.stats.BufferLimit++
		if cs.once(AnomalyBufferLimit) {
			d.anomaly(cs, dir, c.Time, AnomalyBufferLimit, n, -1,
				fmt.Sprintf("more than --max-buffer %d bytes held for partial frames and unanswered requests: frame skipped (reported once per connection)", d.opts.MaxBuffered))
		}
	}
	for _, p := range cs.pending {
		if n := len(p.buf); n > 0 { // p.req aliases p.buf
			limit(capture.ToServer, int64(n))
			p.req, p.reqErr, p.buf = nil, ErrBufferLimit, nil
			cs.pendingBytes -= int64(n)
			d.buffered -= int64(n)
		}
	}
	for len(cs.early) > 0 {
		limit(capture.ToClient, int64(len(cs.early[0].frame)))
		d.buffered -= int64(len(cs.early[0].frame))
		d.unmatched(cs, 1)
	}
	for dir := range cs.dir {
		s := &cs.dir[dir]
		if s.orphanB > 0 { // skipped responses' bodies: their headers are kept
			d.buffered -= int64(s.orphanB)
			for i := range s.orphans {
				s.orphans[i].body = nil
			}
			s.orphanB = 0
		}
		if len(s.buf) == 0 {
			continue
		}
		n := int64(len(s.buf))
		limit(capture.Dir(dir), n)
		if s.synced && n >= 4 {
			total := 4 + int64(int32(binary.BigEndian.Uint32(s.buf)))
			d.damaged(cs, capture.Dir(dir), s.buf[4:], s.start)
			s.skip = total - n
		} else {
			s.skipped += n
		}
		d.stats.SkippedBytes += n
		d.buffered -= int64(cap(s.buf))
		s.drop()
		s.buf = nil
	}
}

// data handles the next bytes of one direction.
func (d *Decoder) data(cs *connState, c *capture.Chunk) {
	if !cs.first {
		cs.first = true
		if d.sniffFirst(cs, c) {
			return
		}
	}
	d.feed(cs, c.Dir, c)
}

// sniffFirst looks at a connection's first bytes: TLS is reported and the
// connection ignored. It reports whether the connection is now ignored.
// (Sides guessed wrong are settled by resync, see settle.)
func (d *Decoder) sniffFirst(cs *connState, c *capture.Chunk) bool {
	p := c.Data
	if len(p) >= 3 && (p[0] == 0x16 || p[0] == 0x17) && p[1] == 0x03 && p[2] <= 0x04 {
		// A TLS record (handshake or application data): Kafka frames
		// never start this way, since a 0x1603xxxx length is > 369 MB.
		d.stats.TLSConns++
		d.anomaly(cs, c.Dir, c.Time, AnomalyTLS, 0, -1, "TLS on a Kafka connection: not decoded (capture the plaintext listener, give the clients' key log with --tls-keylog, or use kwire live --ebpf --tls on the client host)")
		c.Conn.Ignore = true
		return true
	}
	return false
}

// close handles the end of one direction. When both directions ended, or
// the connection was reset, evicted or the capture ended, the requests still
// awaiting a response are reported as missing and the state is dropped.
func (d *Decoder) close(cs *connState, c *capture.Chunk) {
	cs.closed[c.Dir] = true
	if c.Reason == capture.CloseFIN && !(cs.closed[0] && cs.closed[1]) {
		return
	}
	d.unmatched(cs, len(cs.early))
	for _, p := range cs.pending {
		d.emit(cs, p, nil, ResponseMissing, time.Time{}, 0, nil)
		d.release(cs, p)
	}
	cs.pending, cs.pendingBytes = cs.pending[:0], 0
	if ch, ok := d.h.(CloseHandler); ok && !cs.conn.Ignore && (c.Reason == capture.CloseFIN || c.Reason == capture.CloseRST) {
		ch.ConnClosed(cs.conn, c.Time, c.Reason)
	}
	if !cs.conn.Ignore {
		for i := range cs.dir {
			// Bytes never decoded: a partial last frame (normal when a
			// capture stops), or data with no frame boundary found.
			s := &cs.dir[i]
			n := s.skipped + int64(len(s.buf))
			if !s.synced && len(s.orphans) > 0 && capture.Dir(i) == capture.ToClient && !cs.guessing {
				// Whole responses to the end: their requests were
				// not captured (explainSkipped).
				s.fillOrphan(s.buf, s.skipped)
				n -= d.explainSkipped(cs, s, n, math.MaxInt32, s.buf, s.skipped, c.Time)
			}
			d.stats.SkippedBytes += n
			if !s.synced && n > 0 {
				d.stats.Resyncs++ // reported as a resync that found no boundary
				d.anomaly(cs, capture.Dir(i), c.Time, AnomalyResync, n, -1,
					fmt.Sprintf("skipped %d bytes: no frame boundary found before the connection ended", n))
			}
		}
	}
	delete(d.conns, cs.conn.ID)
}

// anomaly reports an anomaly through the handler.
func (d *Decoder) anomaly(cs *connState, dir capture.Dir, t time.Time, kind AnomalyKind, n int64, key int16, detail string) {
	d.an = Anomaly{Kind: kind, Conn: cs.conn, Dir: dir, Time: t, Bytes: n, Key: key, Version: -1, CorrelationID: -1, Detail: detail}
	d.h.Anomaly(&d.an)
}

// once reports whether kind was not yet reported on cs, and marks it.
func (cs *connState) once(kind AnomalyKind) bool {
	if cs.reported[kind] {
		return false
	}
	if cs.reported == nil {
		cs.reported = make(map[AnomalyKind]bool)
	}
	cs.reported[kind] = true
	return true
}
