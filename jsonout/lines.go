package jsonout

import (
	"bytes"
	"encoding/json"

	"github.com/kwire/kwire/decode"
)

// Lines formats exchange lines, apart from writing them: kwire read builds
// them, from exchanges handed over by the decoding goroutine, on the one
// that correlates and writes (cmd/kwire's handoff). A Writer holds one for
// its Exchange.
//
// Lines is not safe for concurrent use.
type Lines struct {
	opts  Options
	names decode.Topics

	// The reference: encoding/json into buf, for the text form, for
	// Options.Reference and for the exchanges fast.go does not write.
	buf bytes.Buffer
	enc *json.Encoder

	fast exchangeCache // what the last fast line wrote (exchange_fast.go)
	err  error
}

// NewLines returns a Lines formatting as opts says. opts may be nil.
func NewLines(opts *Options) *Lines {
	l := &Lines{}
	if opts != nil {
		l.opts = *opts
	}
	l.enc = json.NewEncoder(&l.buf)
	l.enc.SetEscapeHTML(false)
	return l
}

// Append appends e's whole line, its newline included, to b (or nothing,
// after an error: see Err). It learns
// the topic names of Metadata responses, for the lines after it.
func (l *Lines) Append(b []byte, e *decode.Exchange) []byte {
	return l.append(b, e, nil)
}

// AppendScanned is Append for an exchange whose Produce request records
// are gone (dropped once their batches were summarised, as a handoff to
// another goroutine does): produce has the summaries of its partitions,
// decode.ScanProduce of the request as it was.
func (l *Lines) AppendScanned(b []byte, e *decode.Exchange, produce []decode.Batches) []byte {
	return l.append(b, e, &scanned{pre: produce})
}

func (l *Lines) append(b []byte, e *decode.Exchange, pre *scanned) []byte {
	l.names.Learn(e)
	if !l.opts.Text && !l.opts.Reference {
		if out, ok := appendExchange(b, e, &l.names, &l.fast, pre); ok {
			return append(out, '\n')
		} // else it has not used pre
	}
	line := l.line(e, pre)
	if l.opts.Text {
		b = append(b, l.opts.ids(textExchange(&line))...)
		return append(b, '\n')
	}
	l.buf.Reset()
	if err := l.enc.Encode(&line); err != nil {
		if l.err == nil {
			l.err = err
		}
		return b
	}
	return append(b, l.buf.Bytes()...)
}

// Err returns the first error of encoding a line (of which Append then
// appended nothing); a Writer stops at it, as at a write error.
func (l *Lines) Err() error { return l.err }

// line is the exchange line of e, the reference form.
func (l *Lines) line(e *decode.Exchange, pre *scanned) exchangeLine {
	code := decode.ErrorCode(e.Resp)
	x := exchangeLine{
		V: SchemaVersion, Type: "exchange", TS: Time(e.ReqTime), TSMillis: e.ReqTime.UnixMilli(), Conn: ConnOf(e.Conn),
		APIKey: e.Key, API: APIName(e.Key), APIVersion: e.Version, CorrelationID: e.CorrelationID,
		ClientID: e.ClientID, Response: e.Response.String(), ResponseSeen: e.Response == decode.ResponseSeen,
		LatencyUS: e.Latency().Microseconds(), ErrorCode: code, ReqBytes: e.ReqSize, RespBytes: e.RespSize,
	}
	if code != 0 {
		x.Error = ErrorName(code)
	}
	if e.ReqErr != nil {
		x.ReqErr = e.ReqErr.Error()
	}
	if e.RespErr != nil {
		x.RespErr = e.RespErr.Error()
	}
	x.Req, x.Resp = summarize(e.Req, e.Resp, &l.names, pre)
	switch {
	case len(e.RecordsNotCopied) == 0:
	case e.Key == 0: // Produce: the request's records
		markNotCopied(x.Req, e.RecordsNotCopied)
	case e.Key == 1: // Fetch: the response's
		markNotCopied(x.Resp, e.RecordsNotCopied)
	}
	x.Req, x.Resp = nilIfEmpty(x.Req), nilIfEmpty(x.Resp)
	return x
}
