package jsonout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// SchemaVersion is the "v" of every NDJSON line.
const SchemaVersion = 3

// TimeFormat is how capture times are written: RFC 3339, UTC, exactly
// six fractional digits (correlate.TimeFormat, which every time field of
// the events and the summary has too).
const TimeFormat = correlate.TimeFormat

// Options tune a Writer. nil means NDJSON.
type Options struct {
	// Text writes a human-readable line per item instead of NDJSON.
	Text bool
	// Report, with Text, is kwire analyze's report: events and anomalies
	// are held instead of written as they come, and the summary writes
	// the verdict, what to do, the timeline of what was held in capture
	// time order, each group, and the hazards (report.go).
	Report bool
	// FullIDs, with Text, writes member ids whole; otherwise generated
	// ids are shortened (correlate.ShortIDs). NDJSON has them whole.
	FullIDs bool
	// LineFlush flushes after every line (live use: a consumer like jq sees
	// each event at once). Offline output is buffered.
	LineFlush bool
	// Reference writes exchange and commit lines only the reference way
	// (through encoding/json), never exchange_fast.go's or fast.go's: to
	// check that the two give the same bytes.
	Reference bool
}

// Writer writes output lines. It implements decode.Handler.
type Writer struct {
	bw   *bufio.Writer
	enc  *json.Encoder
	opts Options
	err  error

	scratch  []byte      // a line being built (fast.go)
	timeline *timeline   // Options.Report: what the report's timeline holds
	latest   time.Time   // the latest event written as text (markLate)
	commits  commitCache // what the last commit line wrote
	lines    *Lines      // exchange lines
}

// New returns a Writer on w. opts may be nil.
func New(w io.Writer, opts *Options) *Writer {
	bw := bufio.NewWriterSize(w, 256<<10)
	o := Options{}
	if opts != nil {
		o = *opts
	}
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	out := &Writer{bw: bw, enc: enc, opts: o, lines: NewLines(&o)}
	if o.Text && o.Report {
		out.timeline = &timeline{}
	}
	return out
}

// ids shortens the member ids in text s unless o asks for them whole.
func (o *Options) ids(s string) string {
	if o.FullIDs {
		return s
	}
	return correlate.ShortIDs(s)
}

// Conn is how a connection appears in output.
type Conn struct {
	ID     uint64 `json:"id"`
	Client string `json:"client"`
	Broker string `json:"broker"`
	PID    uint32 `json:"pid,omitempty"`
	Comm   string `json:"comm,omitempty"`
}

// ConnOf returns the output form of c; a nil c (no connection: nothing
// kwire's own stages make, but an item from elsewhere, an agent record,
// may lack one) is the zero Conn, never a crash.
func ConnOf(c *capture.Conn) Conn {
	if c == nil {
		return Conn{}
	}
	o := Conn{ID: c.ID, Client: c.Client.String(), Broker: c.Server.String()}
	if c.Process != nil {
		o.PID, o.Comm = c.Process.PID, c.Process.Comm
	}
	return o
}

// Time formats a capture time.
func Time(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ErrorName returns Kafka's name for an error code ("NONE" for 0), the
// name correlate gives it (UNKNOWN_<code> for a code Kafka does not define).
func ErrorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return correlate.ErrorName(code)
}

type exchangeLine struct {
	V             int      `json:"v"`
	Type          string   `json:"type"`
	TS            string   `json:"ts"`
	TSMillis      int64    `json:"ts_ms"`
	Conn          Conn     `json:"conn"`
	APIKey        int16    `json:"api_key"`
	API           string   `json:"api"`
	APIVersion    int16    `json:"api_version"`
	CorrelationID int32    `json:"correlation_id"`
	ClientID      string   `json:"client_id"`
	Response      string   `json:"response"`
	ResponseSeen  bool     `json:"response_seen"`
	LatencyUS     int64    `json:"latency_us"`
	ErrorCode     int16    `json:"error_code"`
	Error         string   `json:"error,omitempty"`
	ReqBytes      int      `json:"req_bytes"`
	RespBytes     int      `json:"resp_bytes,omitempty"`
	ReqErr        string   `json:"req_decode_error,omitempty"`
	RespErr       string   `json:"resp_decode_error,omitempty"`
	Req           *Summary `json:"req,omitempty"`
	Resp          *Summary `json:"resp,omitempty"`
}

// APIName is kmsg's name for key, or "Unknown(key)".
func APIName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", key)
}

// Exchange writes an exchange line. It implements decode.Handler.
func (w *Writer) Exchange(e *decode.Exchange) {
	w.scratch = w.lines.Append(w.scratch[:0], e)
	if err := w.lines.Err(); err != nil && w.err == nil {
		w.err = err
	}
	w.write(w.scratch)
}

// WriteLines writes lines made by a Lines (whole lines, newlines
// included).
func (w *Writer) WriteLines(b []byte) { w.write(b) }

func nilIfEmpty(s *Summary) *Summary {
	if s == nil || reflect.ValueOf(*s).IsZero() {
		return nil
	}
	return s
}

type anomalyLine struct {
	V             int    `json:"v"`
	Type          string `json:"type"`
	TS            string `json:"ts"`
	TSMillis      int64  `json:"ts_ms"`
	Kind          string `json:"kind"`
	Conn          Conn   `json:"conn"`
	Dir           string `json:"dir"`
	Bytes         int64  `json:"bytes,omitempty"`
	APIKey        *int16 `json:"api_key,omitempty"`
	CorrelationID *int32 `json:"correlation_id,omitempty"`
	Detail        string `json:"detail"`
	// An unmatched response whose API was inferred: its API, version,
	// error code and decoded body.
	API        string   `json:"api,omitempty"`
	APIVersion *int16   `json:"api_version,omitempty"`
	ErrorCode  *int16   `json:"error_code,omitempty"`
	Error      string   `json:"error,omitempty"`
	Resp       *Summary `json:"resp,omitempty"`
}

// Anomaly writes an anomaly line. It implements decode.Handler.
func (w *Writer) Anomaly(a *decode.Anomaly) {
	l := anomalyLine{V: SchemaVersion, Type: "anomaly", TS: Time(a.Time), TSMillis: a.Time.UnixMilli(), Kind: string(a.Kind), Conn: ConnOf(a.Conn),
		Dir: a.Dir.String(), Bytes: a.Bytes, Detail: a.Detail}
	if a.Key >= 0 {
		l.APIKey = &a.Key
	}
	if a.CorrelationID >= 0 {
		l.CorrelationID = &a.CorrelationID
	}
	if a.Resp != nil {
		code := decode.ErrorCode(a.Resp)
		l.API, l.APIVersion, l.ErrorCode = APIName(a.Key), &a.Version, &code
		if code != 0 {
			l.Error = ErrorName(code)
		}
		l.Resp = nilIfEmpty(summarizeResponse(a.Resp, &w.lines.names))
	}
	if w.opts.Text {
		var b strings.Builder
		fmt.Fprintf(&b, "%s ANOMALY %s c%d %s>%s %s: %s", Time(a.Time), l.Kind, a.Conn.ID, l.Conn.Client, l.Conn.Broker, l.Dir, l.Detail)
		if a.Kind == decode.AnomalyUnmatchedResponse {
			fmt.Fprintf(&b, " #%d", a.CorrelationID) // the detail names the API, when inferred
			if l.Error != "" {
				b.WriteString(" " + l.Error)
			}
			if l.Resp != nil {
				b.WriteString(" =>")
				textSummary(&b, l.Resp)
			}
		}
		if w.timeline != nil {
			w.timeline.add(a.Time, b.String())
			return
		}
		w.line(b.String())
		return
	}
	w.json(&l)
}

type statsLine struct {
	V        int           `json:"v"`
	Type     string        `json:"type"`
	TS       string        `json:"ts"`
	TSMillis int64         `json:"ts_ms"`
	Capture  capture.Stats `json:"capture"`
	Decode   decodeStats   `json:"decode"`
	// Kwire is the build that wrote the line, for bug reports.
	Kwire version.Build `json:"kwire"`
}

type decodeStats struct {
	decode.Stats
	ByAPI map[string]int64 `json:"exchanges_by_api"`
}

// Stats writes the final (or periodic) counters line.
func (w *Writer) Stats(ts time.Time, cs capture.Stats, ds decode.Stats) {
	l := statsLine{V: SchemaVersion, Type: "stats", TS: Time(ts), TSMillis: ts.UnixMilli(), Capture: cs, Decode: decodeStats{Stats: ds, ByAPI: map[string]int64{}},
		Kwire: version.Get().Build()}
	for k, n := range ds.ByKey {
		if n > 0 {
			l.Decode.ByAPI[APIName(int16(k))] = n
		}
	}
	if w.opts.Text {
		w.line(textStats(&l))
		return
	}
	w.json(&l) // encoding/json sorts map keys: deterministic
}

func (w *Writer) json(v any) {
	if w.err != nil {
		return
	}
	w.err = w.enc.Encode(v)
	if w.opts.LineFlush && w.err == nil {
		w.err = w.bw.Flush()
	}
}

func (w *Writer) line(s string) {
	if w.err != nil {
		return
	}
	_, w.err = w.bw.WriteString(s + "\n")
	if w.opts.LineFlush && w.err == nil {
		w.err = w.bw.Flush()
	}
}

// write writes b, a whole line with its newline.
func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	_, w.err = w.bw.Write(b)
	if w.opts.LineFlush && w.err == nil {
		w.err = w.bw.Flush()
	}
}

// Flush writes what is buffered and returns the first write error.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	return w.err
}
