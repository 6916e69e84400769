package jsonout

import (
	"net/netip"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// Exchange lines are most of kwire read's output (one per request: 89,583
// lines, 100 MB, for a 300 MB capture), and building a Summary for each,
// then writing it with encoding/json's reflection, was half of kwire
// read's time. The exchanges of the APIs that fill a busy capture
// (Produce, Fetch, OffsetCommit, Heartbeat, ListOffsets) are written here
// straight from their kmsg messages, byte for byte as Lines.line and
// encoding/json write them: field order, omitempty, null against [] and
// escaping (SetEscapeHTML(false)) included. Any other exchange goes the
// reference way. TestFastExchange and FuzzFastExchange hold the two to
// the same bytes; Options.Reference turns this off.

// exchangeCache keeps text that repeats from line to line.
type exchangeCache struct {
	ts     tsCache
	client escapedNoHTML
	conns  [64]connText // direct-mapped by connection ID
	api    [64][]byte   // "api_key":K,"api":"Name","api_version": by key
}

// connText is a connection's "conn" object as last written.
type connText struct {
	id             uint64
	client, server netip.AddrPort
	proc           capture.Process
	text           []byte
}

// appendExchange appends e's line without its newline, or returns b and
// false when e is not one it writes. pre, if not nil, has the batch
// summaries of a Produce request's records.
func appendExchange(b []byte, e *decode.Exchange, names *decode.Topics, c *exchangeCache, pre *scanned) ([]byte, bool) {
	if len(e.RecordsNotCopied) > 0 || !fastRequest(e.Req) || !fastResponse(e.Resp) {
		return b, false
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	b = append(b, `,"type":"exchange","ts":"`...)
	b = c.ts.append(b, e.ReqTime)
	b = append(b, `","ts_ms":`...)
	b = strconv.AppendInt(b, e.ReqTime.UnixMilli(), 10)
	b = append(b, `,"conn":`...)
	b = c.conn(b, e.Conn)
	b = c.apiText(b, e.Key)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"correlation_id":`...)
	b = strconv.AppendInt(b, int64(e.CorrelationID), 10)
	b = append(b, `,"client_id":`...)
	b = c.client.append(b, e.ClientID)
	b = append(b, `,"response":"`...)
	b = append(b, e.Response.String()...)
	if e.Response == decode.ResponseSeen {
		b = append(b, `","response_seen":true,"latency_us":`...)
	} else {
		b = append(b, `","response_seen":false,"latency_us":`...)
	}
	b = strconv.AppendInt(b, e.Latency().Microseconds(), 10)
	code := decode.ErrorCode(e.Resp)
	b = append(b, `,"error_code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	if code != 0 {
		b = append(b, `,"error":`...)
		b = appendStringNoHTML(b, ErrorName(code))
	}
	b = append(b, `,"req_bytes":`...)
	b = strconv.AppendInt(b, int64(e.ReqSize), 10)
	if e.RespSize != 0 {
		b = append(b, `,"resp_bytes":`...)
		b = strconv.AppendInt(b, int64(e.RespSize), 10)
	}
	if e.ReqErr != nil {
		if s := e.ReqErr.Error(); s != "" {
			b = append(b, `,"req_decode_error":`...)
			b = appendStringNoHTML(b, s)
		}
	}
	if e.RespErr != nil {
		if s := e.RespErr.Error(); s != "" {
			b = append(b, `,"resp_decode_error":`...)
			b = appendStringNoHTML(b, s)
		}
	}
	b = appendRequest(b, e.Req, names, pre)
	b = appendResponse(b, e.Resp, names)
	return append(b, '}'), true
}

// conn appends the "conn" object of c.
func (x *exchangeCache) conn(b []byte, c *capture.Conn) []byte {
	var proc capture.Process
	if c.Process != nil {
		proc = capture.Process{PID: c.Process.PID, Comm: c.Process.Comm}
	}
	t := &x.conns[c.ID%uint64(len(x.conns))]
	if t.text == nil || t.id != c.ID || t.client != c.Client || t.server != c.Server || t.proc != proc {
		o := ConnOf(c)
		t.id, t.client, t.server, t.proc = c.ID, c.Client, c.Server, proc
		s := append(t.text[:0], `{"id":`...)
		s = strconv.AppendUint(s, o.ID, 10)
		s = append(s, `,"client":`...)
		s = appendStringNoHTML(s, o.Client)
		s = append(s, `,"broker":`...)
		s = appendStringNoHTML(s, o.Broker)
		if o.PID != 0 {
			s = append(s, `,"pid":`...)
			s = strconv.AppendUint(s, uint64(o.PID), 10)
		}
		if o.Comm != "" {
			s = append(s, `,"comm":`...)
			s = appendStringNoHTML(s, o.Comm)
		}
		t.text = append(s, '}')
	}
	return append(b, t.text...)
}

// apiText appends `,"api_key":K,"api":"Name","api_version":`.
func (x *exchangeCache) apiText(b []byte, key int16) []byte {
	if key < 0 || int(key) >= len(x.api) {
		return appendAPI(b, key)
	}
	if x.api[key] == nil {
		x.api[key] = appendAPI(nil, key)
	}
	return append(b, x.api[key]...)
}

func appendAPI(b []byte, key int16) []byte {
	b = append(b, `,"api_key":`...)
	b = strconv.AppendInt(b, int64(key), 10)
	b = append(b, `,"api":`...)
	b = appendStringNoHTML(b, APIName(key))
	return append(b, `,"api_version":`...)
}

// escapedNoHTML is a string and its JSON text (appendStringNoHTML).
type escapedNoHTML struct {
	s    string
	text []byte
}

func (c *escapedNoHTML) append(b []byte, s string) []byte {
	if c.text == nil || s != c.s {
		c.s, c.text = s, appendStringNoHTML(c.text[:0], s)
	}
	return append(b, c.text...)
}

// fastRequest reports whether appendRequest writes req.
func fastRequest(req kmsg.Request) bool {
	switch req.(type) {
	case nil, *kmsg.ProduceRequest, *kmsg.FetchRequest, *kmsg.OffsetCommitRequest,
		*kmsg.HeartbeatRequest, *kmsg.ListOffsetsRequest:
		return true
	}
	return false
}

// fastResponse reports whether appendResponse writes resp.
func fastResponse(resp kmsg.Response) bool {
	switch resp.(type) {
	case nil, *kmsg.ProduceResponse, *kmsg.FetchResponse, *kmsg.OffsetCommitResponse,
		*kmsg.HeartbeatResponse, *kmsg.ListOffsetsResponse:
		return true
	}
	return false
}
