package decode

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// Helpers that build real Kafka frames with kmsg, never by hand.

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func reqFrame(r kmsg.Request, version int16, corr int32, clientID string) []byte {
	r.SetVersion(version)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	return f.AppendRequest(nil, r, corr)
}

// respFrame builds a response frame: length, correlation id, header tags
// when the version is flexible (never for ApiVersions), body.
func respFrame(r kmsg.Response, version int16, corr int32) []byte {
	r.SetVersion(version)
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if r.IsFlexible() && r.Key() != 18 {
		b = append(b, 0)
	}
	b = r.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// recorder is a Handler that keeps a copy of what it is given.
type recorder struct {
	ex []rec
	an []Anomaly
}

type rec struct {
	Key, Version int16
	Corr         int32
	ClientID     string
	Response     ResponseState
	HasReq       bool
	HasResp      bool
	ReqErr       string
	RespErr      string
	ErrorCode    int16
	NotCopied    []PartitionIndex
	req          kmsg.Request
	resp         kmsg.Response
}

func (r *recorder) Exchange(e *Exchange) {
	x := rec{Key: e.Key, Version: e.Version, Corr: e.CorrelationID, ClientID: e.ClientID, Response: e.Response,
		HasReq: e.Req != nil, HasResp: e.Resp != nil, ErrorCode: ErrorCode(e.Resp), req: e.Req, resp: e.Resp,
		NotCopied: append([]PartitionIndex(nil), e.RecordsNotCopied...)}
	if e.ReqErr != nil {
		x.ReqErr = e.ReqErr.Error()
	}
	if e.RespErr != nil {
		x.RespErr = e.RespErr.Error()
	}
	r.ex = append(r.ex, x)
}

func (r *recorder) Anomaly(a *Anomaly) { r.an = append(r.an, *a) }

func (r *recorder) kinds() []AnomalyKind {
	var k []AnomalyKind
	for _, a := range r.an {
		k = append(k, a.Kind)
	}
	return k
}

// step is one chunk fed to the decoder.
type step struct {
	dir  capture.Dir
	kind capture.Kind
	data []byte
	gap  int
	// notCopied: the gap is bytes the source chose not to copy.
	notCopied bool
}

func req(b []byte) step  { return step{dir: capture.ToServer, data: b} }
func resp(b []byte) step { return step{dir: capture.ToClient, data: b} }
func gap(dir capture.Dir, n int) step {
	return step{dir: dir, kind: capture.Gap, gap: n}
}
func uncopied(dir capture.Dir, n int) step {
	return step{dir: dir, kind: capture.Gap, gap: n, notCopied: true}
}

func newConn(role capture.Role, handshake bool) *capture.Conn {
	return &capture.Conn{ID: 1, Role: role, Handshake: handshake,
		Client: netip.MustParseAddrPort("10.0.0.1:40000"), Server: netip.MustParseAddrPort("10.0.0.2:9092")}
}

// feed runs steps through a new decoder, in chunks of at most split bytes
// (0: whole), then closes both directions.
func feed(opts *Options, conn *capture.Conn, split int, steps ...step) (*recorder, *Decoder, *capture.Conn) {
	r := &recorder{}
	_, d, conn := feedTo(r, opts, conn, split, steps...)
	return r, d, conn
}

// feedTo is feed with a Handler of the caller's.
func feedTo(r Handler, opts *Options, conn *capture.Conn, split int, steps ...step) (Handler, *Decoder, *capture.Conn) {
	d := New(r, opts)
	now := t0
	for _, s := range steps {
		now = now.Add(time.Millisecond)
		if s.kind == capture.Gap {
			d.Chunk(&capture.Chunk{Conn: conn, Dir: s.dir, Kind: capture.Gap, Len: s.gap, Time: now, NotCopied: s.notCopied})
			continue
		}
		for p := s.data; len(p) > 0; {
			n := len(p)
			if split > 0 && n > split {
				n = split
			}
			buf := append([]byte(nil), p[:n]...)
			d.Chunk(&capture.Chunk{Conn: conn, Dir: s.dir, Kind: capture.Data, Data: buf, Time: now})
			clear(buf) // the decoder must not keep chunk bytes
			p = p[n:]
		}
	}
	for dir := range 2 {
		d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.Dir(dir), Kind: capture.Close, Reason: capture.CloseEOF, Time: now})
	}
	return r, d, conn
}
