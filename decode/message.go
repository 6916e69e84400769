package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// Reasons a request or response body is missing from an Exchange.
var (
	ErrUnknownAPI         = errors.New("api key unknown to kmsg")
	ErrUnsupportedVersion = errors.New("api version above what kmsg decodes")
	ErrLost               = errors.New("bytes lost in a capture gap")
	ErrOversize           = errors.New("frame larger than --max-frame, skipped")
	ErrBufferLimit        = errors.New("request body dropped: more than --max-buffer held")
	// ErrNotCopied: the source did not copy bytes outside the frame's
	// record data (eBPF --snap; see holes.go).
	ErrNotCopied = errors.New("bytes not copied by the source (--snap) outside record data")
	// ErrDamagedHeader: a request whose header's client id does not fit
	// its frame (a damaged length), kept for its key, version and
	// correlation id, the next of its connection: its answer is decoded.
	ErrDamagedHeader = errors.New("request header damaged: its client id does not fit the frame; the body is not decoded")
)

// pending is a request awaiting its response.
type pending struct {
	key, version int16
	corr         int32
	clientID     string
	reqTime      time.Time
	reqSize      int
	req          kmsg.Request
	reqErr       error
	buf          []byte // owns the request body that req aliases
	// uncopied lists the partitions of a Produce request whose records
	// the source did not copy (holes.go).
	uncopied []PartitionIndex
}

// rawSASL reports whether the next frame in dir may be a raw SASL token
// (KIP-43: after SaslHandshake v0, tokens are framed by a bare length).
func (cs *connState) rawSASL(dir capture.Dir) bool {
	if dir == capture.ToServer {
		return cs.saslRaw
	}
	return cs.saslTokens > 0
}

// find returns the index of the oldest pending request with correlation id
// corr, or -1.
func (cs *connState) find(corr int32) int {
	for i, p := range cs.pending {
		if p.corr == corr {
			return i
		}
	}
	return -1
}

func (cs *connState) get() *pending {
	if n := len(cs.free); n > 0 {
		p := cs.free[n-1]
		cs.free = cs.free[:n-1]
		return p
	}
	return new(pending)
}

// release returns p, done with, to cs's free list, and its body buffer
// to the decoder's.
func (d *Decoder) release(cs *connState, p *pending) {
	d.bodies.put(p.buf)
	*p = pending{uncopied: p.uncopied[:0]}
	if len(cs.free) < 8 {
		cs.free = append(cs.free, p)
	}
}

// Request body buffers are reused through one free list per decoder, of at
// most maxFreeBufs bytes in buffers of at most maxKeptBody: bounded
// whatever the number of connections, and a burst of big Produce requests
// does not keep its memory.
const (
	maxKeptBody = 64 << 10
	maxFreeBufs = 4 << 20
)

// bodyBuf returns an empty buffer for a request body of n bytes.
func (d *Decoder) bodyBuf(n int) []byte {
	if b := d.bodies.get(n); b != nil {
		return b
	}
	if n <= maxKeptBody { // round up, so that the buffer fits more bodies
		return make([]byte, 0, max(512, 1<<bits.Len(uint(n-1))))
	}
	return make([]byte, 0, n)
}

// intern returns id as a string, reusing the connection's last client id.
func (cs *connState) intern(id []byte) string {
	if string(id) != cs.clientID {
		cs.clientID = string(id)
	}
	return cs.clientID
}

// request handles one complete request frame. It returns false when the
// frame is not a request header at all (the stream lost sync).
func (d *Decoder) request(cs *connState, frame []byte, t time.Time) bool {
	h, ok := parseRequestHeader(&d.protos, &d.tags, frame)
	if cs.saslRaw {
		if !ok || !h.plausible() {
			// A raw SASL token after SaslHandshake v0: never decoded.
			cs.saslTokens++
			d.stats.SASLFrames++
			return true
		}
		cs.saslRaw = false
	}
	if len(d.holes) > 0 && (!ok || d.holes[0].off < 4+h.body) {
		// Zero-filled bytes in the header: nothing of the frame is
		// known but its length, which keeps the stream in sync.
		d.stats.NotCopiedFrames++
		return true
	}
	damaged := !ok && d.damagedClientID(cs, frame, &h)
	if !ok && !damaged || h.corr < 0 || h.key < 0 || h.version < 0 {
		return false
	}
	p := d.begin(cs, &h, t, 4+len(frame))
	if h.known {
		d.noteAPI(cs, h.key, h.version)
	}
	body := frame[h.body:]
	if damaged {
		p.reqErr = ErrDamagedHeader
		d.decodeError(cs, capture.ToServer, t, &h, p.reqErr)
	}
	if p.reqErr == nil {
		// The kmsg message points into the bytes it is read from, so they
		// are copied to outlive the frame; unless only record bytes would
		// point there, and they are not wanted.
		src := body
		drop := d.opts.DropProduceRecords && h.key == 0 && len(d.holes) == 0
		if !drop {
			p.buf = append(d.bodyBuf(len(body)), body...)
			src = p.buf
		}
		req := d.spares.request(h.key)
		req.SetVersion(h.version)
		if err := readBody(req, src, &d.spares.in, d.spares.ref); err != nil {
			if len(d.holes) > 0 {
				err = ErrNotCopied
				d.stats.NotCopiedFrames++
			} else {
				d.decodeError(cs, capture.ToServer, t, &h, err)
			}
			p.reqErr = err
		} else {
			if len(d.holes) > 0 {
				p.uncopied, ok = d.notCopied(req, p.buf, 4+h.body, 4+len(frame), d.holes, p.uncopied[:0])
			}
			if ok {
				if drop {
					pr := req.(*kmsg.ProduceRequest)
					DropRecords(pr)
					p.buf = d.ownRecords(pr)
				}
				redactRequest(req)
				p.req = req
			} else {
				p.reqErr = ErrNotCopied
				d.stats.NotCopiedFrames++
			}
		}
	}
	if r, ok := p.req.(*kmsg.ProduceRequest); ok && r.Acks == 0 {
		d.stats.NoResponse++
		d.emit(cs, p, nil, ResponseNotExpected, time.Time{}, 0, nil)
		d.release(cs, p)
		return true
	}
	d.enqueue(cs, p, t)
	return true
}

// damagedClientID reports whether a frame whose request header did not
// parse is a request all the same, with a damaged client id length (a
// flipped byte in a capture file): a key and version kmsg knows, and the
// correlation id that follows the connection's last one, as every client
// numbers its requests, from 0 or 1 on a connection seen from its SYN. h
// is then the header without a client id or body.
func (d *Decoder) damagedClientID(cs *connState, frame []byte, h *reqHeader) bool {
	if len(frame) < 10 || !d.inTurn(cs, h.key, h.version, h.corr) {
		return false
	}
	h.clientID, h.body, h.known = nil, len(frame), true
	return true
}

// inTurn reports whether a request header's key and version are ones kmsg
// knows and its correlation id the next of the connection: the last one's
// successor, or 0 or 1 for its first request when it was seen from its
// SYN.
func (d *Decoder) inTurn(cs *connState, key, version int16, corr int32) bool {
	next := cs.frames > 0 && corr == cs.lastCorr+1 || cs.frames == 0 && cs.conn.Handshake && (corr == 0 || corr == 1)
	proto := keyKnown(&d.protos, key)
	return next && proto != nil && version >= 0 && version <= proto.MaxVersion()
}

// DropRecords clears the record bytes of a Produce request (what
// Options.DropProduceRecords does), but for a header (61 bytes, still
// aliasing the frame) a partition's records keep: a transactional
// request's first batch's, whose producer id and epoch identify the
// producer instance (BatchProducer); a partition's only batch's, whose
// offsets and timestamps say when the records it appends were made
// (ScanHeaders: lag in seconds).
func DropRecords(r *kmsg.ProduceRequest) {
	txn := r.TransactionID != nil
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			rec := &r.Topics[i].Partitions[j].Records
			if _, _, ok := BatchProducer(*rec); ok && (txn || onlyBatch(*rec)) {
				*rec = (*rec)[:batchHeaderLen:batchHeaderLen]
				continue
			}
			*rec = nil
		}
	}
}

// ownRecords copies the record bytes DropRecords kept in r (batch
// headers, still aliasing the frame) into a body buffer of the decoder's,
// points r at them and returns the buffer (nil when none were kept). The
// frame is the source's, valid only during the Chunk call, and a request
// waits beyond it for its response: read later from the frame, a header
// holds whatever the source wrote there since (a file reader's next
// packets), and the batch's offsets and times are garbage.
func (d *Decoder) ownRecords(r *kmsg.ProduceRequest) []byte {
	n := 0
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			n += len(r.Topics[i].Partitions[j].Records)
		}
	}
	if n == 0 {
		return nil
	}
	buf := d.bodyBuf(n)
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			rec := &r.Topics[i].Partitions[j].Records
			if len(*rec) == 0 {
				continue
			}
			off := len(buf)
			buf = append(buf, *rec...) // within bodyBuf's capacity: no earlier slice moves
			*rec = buf[off:len(buf):len(buf)]
		}
	}
	return buf
}

// onlyBatch reports whether b, beginning with a batch header, holds that
// batch and nothing after it, or is such a header kept already.
func onlyBatch(b []byte) bool {
	return len(b) == batchHeaderLen || int64(int32(binary.BigEndian.Uint32(b[batchLengthOff:])))+12 == int64(len(b))
}

// begin counts a request whose header is known and returns its pending
// entry, with reqErr set when kmsg cannot decode the body.
func (d *Decoder) begin(cs *connState, h *reqHeader, t time.Time, size int) *pending {
	d.stats.Requests++
	if cs.frames == 0 {
		d.stats.KafkaConns++
	}
	cs.frames++
	cs.lastCorr = h.corr
	p := cs.get()
	p.key, p.version, p.corr = h.key, h.version, h.corr
	p.clientID = cs.intern(h.clientID)
	p.reqTime, p.reqSize = t, size
	if !h.known {
		p.reqErr = ErrUnsupportedVersion
		kind := AnomalyUnsupported
		if keyKnown(&d.protos, h.key) == nil {
			p.reqErr, kind = ErrUnknownAPI, AnomalyUnknownAPI
			d.stats.UnknownAPI++
		} else {
			d.stats.Unsupported++
		}
		if cs.once(kind) {
			d.an = Anomaly{Kind: kind, Conn: cs.conn, Dir: capture.ToServer, Time: t, Key: h.key, Version: h.version, CorrelationID: h.corr,
				Detail: fmt.Sprintf("key %d version %d: header only (reported once per connection)", h.key, h.version)}
			d.h.Anomaly(&d.an)
		}
	}
	return p
}

// enqueue adds p to the requests awaiting a response.
func (d *Decoder) enqueue(cs *connState, p *pending, t time.Time) {
	if len(cs.pending) >= d.opts.MaxPending {
		d.stats.PendingOverflow++
		if cs.once(AnomalyPendingOverflow) {
			d.anomaly(cs, capture.ToServer, t, AnomalyPendingOverflow, 0, -1,
				fmt.Sprintf("more than %d requests awaiting responses: oldest reported missing", d.opts.MaxPending))
		}
		old := cs.pending[0]
		cs.pending[0] = nil // the backing array must not keep it (nor its body)
		cs.pending = cs.pending[1:]
		cs.pendingBytes -= int64(len(old.buf))
		d.emit(cs, old, nil, ResponseMissing, time.Time{}, 0, nil)
		d.release(cs, old)
	}
	cs.pending = append(cs.pending, p)
	cs.pendingBytes += int64(len(p.buf))
	if len(cs.early) > 0 {
		d.pairEarly(cs, p.corr)
	}
}

// response handles one complete response frame.
func (d *Decoder) response(cs *connState, frame []byte, t time.Time) {
	if len(frame) < 4 || cs.saslTokens > 0 && cs.find(int32(binary.BigEndian.Uint32(frame))) < 0 {
		cs.saslTokens-- // the broker's raw SASL token
		d.stats.SASLFrames++
		return
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	if len(d.holes) > 0 && d.holes[0].off < 8 {
		d.stats.NotCopiedFrames++ // the correlation id is not known
		return
	}
	if cs.find(corr) < 0 && !damagedCorr(cs, corr) {
		d.hold(cs, corr, frame, t)
		d.reframe(cs, corr, t) // lookahead.go
		return
	}
	d.complete(cs, d.match(cs, corr, 4+len(frame), t), frame, t)
}

// complete decodes p's response frame and reports the exchange. d.holes
// are the frame's zero-filled bytes.
func (d *Decoder) complete(cs *connState, p *pending, frame []byte, t time.Time) {
	if d.opts.DeferResponses && len(d.holes) == 0 && (p.key == 0 || p.key == 1) {
		d.deferred = frame[4:]
		d.emit(cs, p, nil, ResponseSeen, t, 4+len(frame), nil)
		d.deferred = nil
		d.release(cs, p)
		return
	}
	resp, err := d.decodeResponse(p, frame[4:])
	switch {
	case len(d.holes) > 0 && err == nil:
		var ok bool
		if d.respHoles, ok = d.notCopied(resp, frame, 4, 4+len(frame), d.holes, d.respHoles[:0]); !ok {
			resp, err = nil, ErrNotCopied
		}
	case len(d.holes) > 0 && !errors.Is(err, ErrUnknownAPI) && !errors.Is(err, ErrUnsupportedVersion):
		err = ErrNotCopied
	case err != nil && !errors.Is(err, ErrUnknownAPI) && !errors.Is(err, ErrUnsupportedVersion):
		d.decodeError(cs, capture.ToClient, t, &reqHeader{key: p.key, version: p.version, corr: p.corr}, err)
	}
	if err == ErrNotCopied {
		d.stats.NotCopiedFrames++
	}
	if r, ok := resp.(*kmsg.SASLHandshakeResponse); ok && p.version == 0 && r.ErrorCode == 0 {
		cs.saslRaw = true // KIP-43: v0 is followed by raw, unframed-by-header tokens
	}
	d.emit(cs, p, resp, ResponseSeen, t, 4+len(frame), err)
	d.release(cs, p)
}

// Limits on responses held for requests not yet seen, per connection.
const (
	maxEarly      = 64
	maxEarlyBytes = 8 << 20
)

// early is a response that arrived before its request.
type early struct {
	corr  int32
	frame []byte
	t     time.Time
	holes []hole
}

// hold keeps a response whose request has not been seen: when a segment is
// missing from the request direction, reassembly holds that direction's
// later bytes until it gives up on the segment, while responses flow on.
// The request may still come; if it does not, the response is reported
// unmatched (on overflow, when a later request is matched, or at close).
func (d *Decoder) hold(cs *connState, corr int32, frame []byte, t time.Time) {
	cs.kafkaish = true // a response frame: Kafka, whatever its requests look like
	for len(cs.early) > 0 && (len(cs.early) >= maxEarly || cs.earlyBytes+len(frame) > maxEarlyBytes) {
		d.unmatched(cs, 1)
	}
	if len(frame) > maxEarlyBytes {
		d.unmatchedFrame(cs, corr, 4+len(frame), nil, t)
		return
	}
	var holes []hole
	if len(d.holes) > 0 {
		holes = append(holes, d.holes...)
	}
	cs.early = append(cs.early, early{corr: corr, frame: append([]byte(nil), frame...), t: t, holes: holes})
	cs.earlyBytes += len(frame)
}

// unmatched reports the n oldest held responses as unmatched.
func (d *Decoder) unmatched(cs *connState, n int) {
	for _, e := range cs.early[:n] {
		var body []byte
		if len(e.holes) == 0 { // else bytes of it were not copied (--snap)
			body = e.frame[4:]
		}
		d.unmatchedFrame(cs, e.corr, 4+len(e.frame), body, e.t)
		cs.earlyBytes -= len(e.frame)
	}
	cs.early = cs.early[:copy(cs.early, cs.early[n:])]
	clear(cs.early[len(cs.early) : len(cs.early)+n]) // drop the frames' last references
}

// unmatchedFrame reports a response of correlation id corr, size bytes
// with its length prefix, whose request was not seen. body is what
// follows its correlation id, nil if not kept: its API is inferred from
// it (infer.go) and, when inferred, the body decoded.
func (d *Decoder) unmatchedFrame(cs *connState, corr int32, size int, body []byte, t time.Time) {
	d.stats.Unmatched++
	inf := d.infer(cs, body)
	d.an = Anomaly{Kind: AnomalyUnmatchedResponse, Conn: cs.conn, Dir: capture.ToClient, Time: t, Bytes: int64(size),
		Key: inf.key, Version: inf.version, CorrelationID: corr, Resp: inf.resp,
		Detail: "response whose request was not seen; " + inf.how}
	d.h.Anomaly(&d.an)
}

// early pairs a request just enqueued with a response held for it. Held
// responses older than it can no longer be matched: brokers answer in order.
func (d *Decoder) pairEarly(cs *connState, corr int32) {
	for i, e := range cs.early {
		if e.corr != corr {
			continue
		}
		d.unmatched(cs, i)
		e = cs.early[0]
		cs.earlyBytes -= len(e.frame)
		cs.early = cs.early[:copy(cs.early, cs.early[1:])]
		clear(cs.early[len(cs.early) : len(cs.early)+1])
		saved := d.holes
		d.holes = e.holes
		d.complete(cs, d.match(cs, corr, 4+len(e.frame), e.t), e.frame, e.t)
		d.holes = saved
		return
	}
}

// match finds and removes the pending request that a response with
// correlation id corr answers. Older requests still pending lost their
// responses (brokers answer in order). It returns nil, after counting,
// for a response with no request.
func (d *Decoder) match(cs *connState, corr int32, size int, t time.Time) *pending {
	i := cs.find(corr)
	if i < 0 && damagedCorr(cs, corr) {
		i = 0 // answered in order, a byte of one id damaged
		d.stats.Resyncs++
		d.anomaly(cs, capture.ToClient, t, AnomalyResync, 0, -1, fmt.Sprintf(
			"a response's correlation id %d is one byte off the oldest request's %d, which it answers in turn: a damaged byte", corr, cs.pending[0].corr))
	}
	if i < 0 {
		d.unmatchedFrame(cs, corr, size, nil, t)
		return nil
	}
	for _, old := range cs.pending[:i] {
		cs.pendingBytes -= int64(len(old.buf))
		d.emit(cs, old, nil, ResponseLost, time.Time{}, 0, nil)
		d.release(cs, old)
	}
	p := cs.pending[i]
	cs.pendingBytes -= int64(len(p.buf))
	n := copy(cs.pending, cs.pending[i+1:])
	clear(cs.pending[n : n+i+1]) // entries gone to the free list or dropped
	cs.pending = cs.pending[:n]
	d.stats.Responses++
	return p
}

// damagedCorr reports whether a response's correlation id, of no awaiting
// request, is the oldest awaiting request's with a byte damaged: one byte
// off it, and not an id the client may have given a request the capture
// lost (from the oldest awaiting one to a little past the latest read).
func damagedCorr(cs *connState, corr int32) bool {
	if len(cs.pending) == 0 {
		return false
	}
	oldest := cs.pending[0].corr
	return oneByteOff(corr, oldest) && (corr < oldest || corr > cs.lastCorr+lostCorrs)
}

// lostCorrs is how far past the latest request read a response's id may
// be its answer to a request the capture lost.
const lostCorrs = 1024

// oneByteOff reports whether two correlation ids differ in one byte, by
// more than a client's numbering would make them: what a flipped byte of
// a damaged capture file does to one.
func oneByteOff(a, b int32) bool {
	x := uint32(a ^ b)
	n := 0
	for i := range 4 {
		if x>>(8*i)&0xff != 0 {
			n++
		}
	}
	return n == 1 && x > 0x3f
}

// decodeResponse decodes a response body (after the correlation id) for p.
func (d *Decoder) decodeResponse(p *pending, body []byte) (kmsg.Response, error) {
	return readResponse(&d.protos, &d.tags, &d.spares, p.key, p.version, body)
}

// readResponse decodes the body of a response to a request of key and
// version (after the correlation id), into a recycled message when spares
// has one. protos and tags are the caller's: SetVersion changes protos.
func readResponse(protos *[maxKey]kmsg.Request, tags *kbin.Reader, sp *spares, key, version int16, body []byte) (kmsg.Response, error) {
	proto := keyKnown(protos, key)
	if proto == nil {
		return nil, ErrUnknownAPI
	}
	if version > proto.MaxVersion() {
		return nil, ErrUnsupportedVersion
	}
	if isFlexibleResponse(proto, key, version) {
		*tags = kbin.Reader{Src: body}
		kmsg.SkipTags(tags)
		if !tags.Ok() {
			return nil, errors.New("response header tags truncated")
		}
		body = tags.Src
	}
	resp := sp.response(key)
	resp.SetVersion(version)
	err := readBody(resp, body, &sp.in, sp.ref)
	if key == 18 && version > 0 && (err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode == 35) {
		// A broker that does not support the ApiVersions version asked
		// for answers UNSUPPORTED_VERSION in a v0 body.
		v0 := kmsg.NewPtrApiVersionsResponse()
		v0.SetVersion(0)
		if v0.ReadFrom(body) == nil {
			return v0, nil
		}
	}
	if err != nil {
		return nil, err
	}
	redactResponse(resp)
	return resp, nil
}

// emit reports an exchange to the handler.
func (d *Decoder) emit(cs *connState, p *pending, resp kmsg.Response, state ResponseState, rt time.Time, size int, respErr error) {
	d.stats.Exchanges++
	if p.key >= 0 && int(p.key) < maxKey {
		d.stats.ByKey[p.key]++
	}
	switch state {
	case ResponseMissing:
		d.stats.Missing++
		if p.key >= 0 && int(p.key) < maxKey {
			d.stats.MissingByKey[p.key]++
		}
	case ResponseLost:
		d.stats.Lost++
	}
	d.ex = Exchange{
		Conn: cs.conn, Key: p.key, Version: p.version, CorrelationID: p.corr, ClientID: p.clientID,
		ReqTime: p.reqTime, RespTime: rt, ReqSize: p.reqSize, RespSize: size,
		Req: p.req, Resp: resp, Response: state, ReqErr: p.reqErr, RespErr: respErr, RespBody: d.deferred,
	}
	switch {
	case len(p.uncopied) > 0 && p.req != nil:
		d.ex.RecordsNotCopied = p.uncopied
	case len(d.respHoles) > 0 && resp != nil:
		d.ex.RecordsNotCopied = d.respHoles
	}
	d.h.Exchange(&d.ex)
	d.respHoles = d.respHoles[:0]
}

func (d *Decoder) decodeError(cs *connState, dir capture.Dir, t time.Time, h *reqHeader, err error) {
	d.stats.DecodeErrors++
	d.an = decodeErrorAnomaly(cs.conn, dir, t, h, err)
	d.h.Anomaly(&d.an)
}

// decodeErrorAnomaly is the anomaly of a body of frame h that kmsg could
// not decode (also reported by ResponseDecoder).
func decodeErrorAnomaly(conn *capture.Conn, dir capture.Dir, t time.Time, h *reqHeader, err error) Anomaly {
	return Anomaly{Kind: AnomalyDecodeError, Conn: conn, Dir: dir, Time: t, Key: h.key, Version: h.version, CorrelationID: h.corr,
		Detail: fmt.Sprintf("%s v%d: %v", kmsg.NameForKey(h.key), h.version, err)}
}
