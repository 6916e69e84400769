package decode

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// ResponseDecoder decodes the responses a Decoder with
// Options.DeferResponses passed on undecoded, on a goroutine other than
// the Decoder's: the Produce and Fetch responses of a busy capture are
// much of its decoding work, which can then run beside reassembly. It
// decodes exactly as the Decoder would have, and reports what the Decoder
// would have: a decode error's anomaly, and its count.
type ResponseDecoder struct {
	protos [maxKey]kmsg.Request
	tags   kbin.Reader
	spares spares
	an     Anomaly
	// DecodeErrors counts the responses that failed to decode: add it to
	// the Decoder's Stats.DecodeErrors.
	DecodeErrors int64
}

// NewResponseDecoder returns a ResponseDecoder; each goroutine needs its own.
func NewResponseDecoder() *ResponseDecoder {
	rd := &ResponseDecoder{}
	for k := range rd.protos {
		rd.protos[k] = kmsg.RequestForKey(int16(k))
	}
	return rd
}

// ReferenceKmsg has Decode read every body with kmsg alone, like
// Options.ReferenceKmsg.
func (rd *ResponseDecoder) ReferenceKmsg(on bool) { rd.spares.ref = on }

// Decode decodes e.RespBody, if e has one, into e.Resp or sets e.RespErr,
// and clears RespBody. When the body does not decode it returns the
// anomaly the Decoder reports just before such an exchange (valid until
// the next call), else nil.
func (rd *ResponseDecoder) Decode(e *Exchange) *Anomaly {
	if e.RespBody == nil {
		return nil
	}
	body := e.RespBody
	e.RespBody = nil
	e.Resp, e.RespErr = readResponse(&rd.protos, &rd.tags, &rd.spares, e.Key, e.Version, body)
	if e.RespErr == nil || errors.Is(e.RespErr, ErrUnknownAPI) || errors.Is(e.RespErr, ErrUnsupportedVersion) {
		return nil
	}
	rd.DecodeErrors++
	rd.an = decodeErrorAnomaly(e.Conn, capture.ToClient, e.RespTime, &reqHeader{key: e.Key, version: e.Version, corr: e.CorrelationID}, e.RespErr)
	return &rd.an
}

// Recycle gives back an exchange's response for a later Decode, like
// Decoder.Recycle.
func (rd *ResponseDecoder) Recycle(resp kmsg.Response) { rd.spares.recycle(nil, resp) }
