package decode

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// ResponseState says what happened to an exchange's response.
type ResponseState uint8

const (
	// ResponseSeen: the response was seen and matched.
	ResponseSeen ResponseState = iota
	// ResponseNotExpected: Produce with acks=0, which gets no response.
	ResponseNotExpected
	// ResponseMissing: the connection closed or the capture ended first
	// (normal for long-poll Fetches at the end of a capture).
	ResponseMissing
	// ResponseLost: the response was lost in a gap or skipped while
	// resynchronising (a later response on the connection was matched).
	ResponseLost
)

func (s ResponseState) String() string {
	return [...]string{"seen", "not_expected", "missing", "lost"}[s]
}

// Exchange is one request and, when seen, its response.
//
// An Exchange and everything it points to (Req, Resp and their byte slices)
// is only valid during the Handler call: copy what you keep.
type Exchange struct {
	Conn          *capture.Conn
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is the header's client id; Kafka treats null as "".
	ClientID string

	// ReqTime is the capture time of the request's last byte; RespTime of
	// the response's first byte (zero when no response was seen).
	ReqTime, RespTime time.Time
	// ReqSize and RespSize are frame sizes including the length prefix.
	ReqSize, RespSize int

	// Req is the decoded request; nil when its body could not be decoded
	// (unknown key or version, bytes lost in a gap, decode error: see ReqErr).
	Req kmsg.Request
	// Resp is the decoded response; nil when none was seen or it could not
	// be decoded (see RespErr).
	Resp     kmsg.Response
	Response ResponseState

	// ReqErr and RespErr say why a body is missing, when it is.
	ReqErr, RespErr error

	// RespBody, with Options.DeferResponses, is the undecoded body of a
	// Produce or Fetch response (after the correlation id; Resp and
	// RespErr are nil), valid only during the Handler call.
	// ResponseDecoder.Decode decodes it.
	RespBody []byte

	// RecordsNotCopied lists the partitions of a Produce request or a
	// Fetch response whose record bytes the source did not copy (eBPF
	// --snap): their Records or RecordBatches are nil and unknown; every
	// other field was decoded.
	RecordsNotCopied []PartitionIndex
}

// Latency is the time from the request's last byte to the response's first,
// or 0 without a response.
func (e *Exchange) Latency() time.Duration {
	if e.Response != ResponseSeen || e.RespTime.IsZero() {
		return 0
	}
	return e.RespTime.Sub(e.ReqTime)
}

// AnomalyKind names a kind of anomaly; the names are part of the NDJSON schema.
type AnomalyKind string

// Anomaly kinds.
const (
	AnomalyGap               AnomalyKind = "gap"                 // bytes missing in a stream
	AnomalyResync            AnomalyKind = "resync"              // bytes skipped to find the next frame
	AnomalyUnknownAPI        AnomalyKind = "unknown_api"         // request key kmsg does not know
	AnomalyUnsupported       AnomalyKind = "unsupported_version" // version above what kmsg knows
	AnomalyOversize          AnomalyKind = "oversize_frame"      // frame above --max-frame, skipped
	AnomalyUnmatchedResponse AnomalyKind = "unmatched_response"  // response with no request seen
	AnomalyDecodeError       AnomalyKind = "decode_error"        // kmsg could not parse a body
	AnomalyTLS               AnomalyKind = "tls"                 // TLS on a Kafka connection
	AnomalyNotKafka          AnomalyKind = "not_kafka"           // non-Kafka bytes on a broker port
	AnomalyPendingOverflow   AnomalyKind = "pending_overflow"    // too many requests awaiting responses
	AnomalyBufferLimit       AnomalyKind = "buffer_limit"        // partial frames above --max-buffer, skipped
)

// Anomaly is something the decoder could not decode normally. Like an
// Exchange it is only valid during the Handler call.
type Anomaly struct {
	Kind AnomalyKind
	Conn *capture.Conn
	Dir  capture.Dir
	Time time.Time
	// Bytes is the number of bytes skipped or lost, when that applies.
	Bytes int64
	// Key, Version and CorrelationID describe the frame concerned; Key is
	// -1 when unknown.
	Key           int16
	Version       int16
	CorrelationID int32
	Detail        string
	// Resp is, for an unmatched response whose API was inferred (Key and
	// Version then say which), its decoded body; nil otherwise. It owns
	// its bytes (it is never recycled): a copy of the Anomaly may keep it.
	Resp kmsg.Response
}

// Handler receives a Decoder's output, synchronously and in capture order.
type Handler interface {
	Exchange(e *Exchange)
	Anomaly(a *Anomaly)
}

// CloseHandler is a Handler that is also told when a Kafka connection
// ended on the wire: a FIN from both sides, or a reset. It is called after
// the exchanges still awaiting a response were handed over (as
// ResponseMissing), at the capture time of the chunk that ended it. A
// connection that ended because the capture did, was idle or evicted is
// not reported: nothing on the wire closed it. Brokers tie state to a
// connection (a KIP-932 share session releases the records its member
// holds), so its end is evidence. c is only valid during the call.
type CloseHandler interface {
	ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason)
}
