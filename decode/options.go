package decode

// Options tune a Decoder. A nil *Options means defaults.
type Options struct {
	// MaxFrame is the largest frame decoded, in bytes (default 100 MiB,
	// Kafka's socket.request.max.bytes). Larger frames whose header is
	// plausible are skipped and reported as oversize; the stream stays in
	// sync. It also bounds the bytes buffered per stream direction.
	MaxFrame int
	// MaxPending caps requests awaiting a response per connection
	// (default 1024). Beyond it the oldest is reported missing.
	MaxPending int
	// MaxBuffered caps the bytes held across all connections (default
	// 256 MiB): partial frames, bodies of requests awaiting a response,
	// responses held for requests not yet seen. A connection that would
	// exceed it gives up what it holds, counted in BufferLimit: its partial
	// frame (the rest skipped in sync), its requests' bodies (their
	// exchanges keep the header, ErrBufferLimit), its held responses
	// (unmatched).
	MaxBuffered int
	// SniffBytes is how many bytes of a connection are searched for a
	// Kafka frame before it is declared not Kafka (default 64 KiB).
	SniffBytes int
	// DropProduceRecords decodes Produce requests without their record
	// bytes (every partition's Records is nil), which spares a copy of
	// each request body while it waits for its response: for a Handler
	// that never reads them, like the correlator. Produce requests with
	// bytes the source did not copy (eBPF --snap) keep them as usual.
	DropProduceRecords bool
	// DeferResponses leaves Produce and Fetch responses undecoded, for a
	// Handler that decodes them later, on another goroutine, with a
	// ResponseDecoder: their Exchange has Resp nil and the body in
	// RespBody. Responses with bytes the source did not copy (eBPF --snap)
	// are decoded as usual.
	DeferResponses bool
	// ReferenceKmsg reads every body with kmsg alone, without the fast
	// paths of fastmsg.go: for the tests that hold them to kmsg.
	ReferenceKmsg bool
}

const (
	defaultMaxFrame   = 100 << 20
	defaultMaxPending = 1024
	defaultSniffBytes = 64 << 10
	defaultMaxBuffer  = 256 << 20
)

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.MaxFrame <= 0 {
		r.MaxFrame = defaultMaxFrame
	}
	if r.MaxPending <= 0 {
		r.MaxPending = defaultMaxPending
	}
	if r.MaxBuffered <= 0 {
		r.MaxBuffered = defaultMaxBuffer
	}
	if r.SniffBytes <= 0 {
		r.SniffBytes = defaultSniffBytes
	}
	return r
}

// maxKey bounds the per-API counters; kmsg knows keys well below it.
const maxKey = 128

// Stats are a Decoder's counters. Every byte or frame the decoder could not
// decode is counted somewhere here.
type Stats struct {
	KafkaConns    int64 `json:"kafka_connections"`
	NonKafkaConns int64 `json:"non_kafka_connections"`
	TLSConns      int64 `json:"tls_connections"`
	Requests      int64 `json:"requests"`
	Responses     int64 `json:"responses"`
	Exchanges     int64 `json:"exchanges"`
	Unmatched     int64 `json:"unmatched_responses"`
	Missing       int64 `json:"responses_missing"`
	Lost          int64 `json:"responses_lost"`
	NoResponse    int64 `json:"acks0_produce"`
	Gaps          int64 `json:"gaps"`
	GapBytes      int64 `json:"gap_bytes"`
	// NotCopiedBytes are bytes a source chose not to copy (eBPF --snap).
	NotCopiedBytes int64 `json:"not_copied_bytes"`
	// RecordsNotCopiedBytes are those of them that were record data (a
	// Produce request's records, a Fetch response's record batches) in
	// frames decoded around them: the bytes of the records
	// Exchange.RecordsNotCopied names. A broker's sendfile (Fetch record
	// data, never seen by a system-call probe) lands here whole.
	RecordsNotCopiedBytes int64 `json:"records_not_copied_bytes,omitempty"`
	// NotCopiedFrames are frames whose body was not decoded because
	// bytes outside their record data were not copied.
	NotCopiedFrames int64 `json:"not_copied_frames,omitempty"`
	Resyncs         int64 `json:"resyncs"`
	SkippedBytes    int64 `json:"skipped_bytes"`
	DecodeErrors    int64 `json:"decode_errors"`
	UnknownAPI      int64 `json:"unknown_api"`
	Unsupported     int64 `json:"unsupported_versions"`
	Oversize        int64 `json:"oversize_frames"`
	PendingOverflow int64 `json:"pending_overflow"`
	SASLFrames      int64 `json:"sasl_frames"`
	BufferLimit     int64 `json:"buffer_limit_frames"`

	// ByKey counts exchanges per API key (index = key); MissingByKey
	// those of them whose response is missing.
	ByKey        [maxKey]int64 `json:"-"`
	MissingByKey [maxKey]int64 `json:"-"`
}
