package decode

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// fuzzSeeds are frames built with kmsg; seedFuzzers adds the real client
// bytes of the committed captures.
func fuzzSeeds() [][]byte {
	return [][]byte{
		reqFrame(apiVersionsReq(), 3, 1, "c"),
		reqFrame(metadataReq(), 12, 2, "c"),
		reqFrame(heartbeatReq(3), 4, 3, "c"),
		reqFrame(produceReq(-1, 200), 9, 4, "p"),
		respFrame(apiVersionsResp(), 3, 1),
		respFrame(heartbeatResp(27), 4, 3),
		respFrame(produceResp(), 9, 4),
	}
}

// counting is a Handler that checks what it is given is self-consistent.
type counting struct {
	t          *testing.T
	ex, an     int
	lastConnID uint64
	// With rd, responses are deferred: rd decodes them, and every message
	// goes back for recycling (d and rd), as in kwire analyze.
	rd *ResponseDecoder
	d  *Decoder
}

func (c *counting) Exchange(e *Exchange) {
	c.ex++
	if c.rd != nil {
		if e.RespBody != nil {
			if an := c.rd.Decode(e); an != nil {
				c.Anomaly(an)
			}
		}
		defer func() {
			c.d.Recycle(e.Req, nil)
			c.rd.Recycle(e.Resp)
		}()
	} else if e.RespBody != nil {
		c.t.Fatalf("a response deferred without DeferResponses: %+v", e)
	}
	if e.Conn == nil || e.Key < 0 {
		c.t.Fatalf("bad exchange %+v", e)
	}
	if e.Response == ResponseSeen && e.Resp == nil && e.RespErr == nil {
		c.t.Fatalf("response seen but neither decoded nor explained: %+v", e)
	}
	if e.Req == nil && e.ReqErr == nil {
		c.t.Fatalf("request neither decoded nor explained: %+v", e)
	}
	ErrorCode(e.Resp) // must not panic on any decoded response
	for _, ix := range e.RecordsNotCopied {
		var m any = e.Req
		if e.Key == 1 {
			m = e.Resp
		}
		spans := recordSpans(m, nil)
		k := slices.IndexFunc(spans, func(s recordSpan) bool { return s.idx == ix })
		if k < 0 || *spans[k].b != nil {
			c.t.Fatalf("key %d: records not copied at %+v, not a partition with nil records", e.Key, ix)
		}
	}
}

func (c *counting) Anomaly(a *Anomaly) {
	c.an++
	if a.Conn == nil || a.Kind == "" {
		c.t.Fatalf("bad anomaly %+v", a)
	}
}

// FuzzFramer feeds arbitrary bytes, split into arbitrary chunks and gaps, to
// both directions of a connection, mid-stream or from the start.
//
// Invariants: no panic; every exchange has a decoded request or a reason
// (ReqErr), and a seen response a decoded body or a reason; the decoder
// forgets the connection after its close, and what it counted as held
// (Options.MaxBuffered) with it; bytes skipped are counted.
func FuzzFramer(f *testing.F) {
	seeds := fuzzSeeds()
	f.Add(seeds[2], seeds[5], uint8(0), false)
	f.Add(cat(seeds[0], seeds[1], seeds[3]), cat(seeds[4], seeds[6]), uint8(7), true)
	f.Add(seeds[3][100:], seeds[6][3:], uint8(13), false)
	seedFuzzers(f, "framer")
	f.Fuzz(func(t *testing.T, reqs, resps []byte, split uint8, handshake bool) {
		h := &counting{t: t}
		// Small caps, so that the fuzzer reaches them: buffer shedding,
		// pending overflow. The split's high bit drops Produce records,
		// the next defers responses and recycles messages (kwire analyze),
		// the next puts the connection on a broker port.
		d := New(h, &Options{MaxFrame: 1 << 16, SniffBytes: 512, MaxBuffered: 1 << 12, MaxPending: 8,
			DropProduceRecords: split >= 128, DeferResponses: split&64 != 0})
		if split&64 != 0 {
			h.rd, h.d = NewResponseDecoder(), d
		}
		conn := &capture.Conn{ID: 1, Handshake: handshake, Role: capture.RoleGuess}
		if split&32 != 0 { // on a broker port: responses with no request are remembered (orphans, infer.go)
			conn.Role = capture.RolePort
		}
		n := int(split)%61 + 1
		for i := 0; i < len(reqs) || i < len(resps); i += n {
			for dir, b := range [][]byte{reqs, resps} {
				if i >= len(b) {
					continue
				}
				part := b[i:min(i+n, len(b))]
				switch part[0] { // let the input ask for a gap
				case 0xee:
					d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.Dir(dir), Kind: capture.Gap, Len: int(part[len(part)-1]) - 10})
				case 0xef: // bytes not copied (eBPF --snap): zero-filled in frames
					d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.Dir(dir), Kind: capture.Gap, Len: int(part[len(part)-1]) * 16, NotCopied: true})
				}
				d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.Dir(dir), Kind: capture.Data, Data: part})
			}
		}
		for dir := range 2 {
			d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.Dir(dir), Kind: capture.Close, Reason: capture.CloseEOF})
		}
		if len(d.conns) != 0 || d.buffered != 0 {
			t.Fatalf("connection state kept after close (%d bytes counted as held)", d.buffered)
		}
	})
}

// FuzzRequest decodes one arbitrary request frame followed by a response
// (built from the same bytes) on a connection seen from its start.
//
// Invariants: no panic; exactly one exchange or one anomaly-explained drop;
// never a response decoded for a frame whose header was not a request.
// A frame whose header is broken loses sync, and resynchronising may find
// whole requests inside it (validated by kmsg, as on any stream): more
// than one exchange is allowed only after a resync says so.
func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds()[:4] {
		f.Add(s[4:])
	}
	seedFuzzers(f, "request")
	f.Fuzz(func(t *testing.T, frame []byte) {
		h := &counting{t: t}
		d := New(h, nil)
		conn := &capture.Conn{ID: 1, Handshake: true}
		b := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Data: append(b, frame...)})
		d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Kind: capture.Close, Reason: capture.CloseRST})
		if st := d.Stats(); st.Exchanges > 1 && st.Resyncs == 0 {
			t.Fatalf("%d exchanges from one frame, without a resync", st.Exchanges)
		}
	})
}

// FuzzResponse decodes an arbitrary response body for every request key and
// version kmsg knows, as the decoder would after matching.
//
// Invariants: no panic; a body that decodes yields a response of the
// request's key; ErrorCode works on it.
func FuzzResponse(f *testing.F) {
	for _, s := range fuzzSeeds()[4:] {
		f.Add(int16(18), int16(3), s[8:])
	}
	f.Add(int16(12), int16(4), fuzzSeeds()[5][9:])
	seedFuzzers(f, "response")
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		d := New(&counting{t: t}, nil)
		r := kmsg.RequestForKey(key)
		if r == nil || version < 0 || version > r.MaxVersion() {
			return
		}
		resp, err := d.decodeResponse(&pending{key: key, version: version}, body)
		if err == nil && resp.Key() != key {
			t.Fatalf("response key %d for request key %d", resp.Key(), key)
		}
		ErrorCode(resp)
	})
}
