package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// Version is the format version, the first byte of every unsigned batch
// this build writes (VersionSigned a signed one's). Format 6 (and 7,
// signed) adds the agent's kwire build to the batch header; format 4 (and
// 5) added record batch timestamps to Fetch responses' segments and a
// Produce request partition's batch header. An aggregator reads 2 to 7;
// an older one refuses what it does not know (ErrVersion: upgrade
// aggregators first).
const Version = 6

// The formats before: versionV4 without the agent's build, versionV2
// also without batch timestamps; and their signed forms.
const (
	versionV2       = 2
	versionV2Signed = 3
	versionV4       = 4
	versionV4Signed = 5
)

// Errors of Decode.
var (
	// ErrVersion: the batch is of a format version this build does not
	// know (a newer agent): upgrade the aggregator.
	ErrVersion = errors.New("wire: unknown format version")
	// ErrCorrupt: the batch does not parse.
	ErrCorrupt = errors.New("wire: corrupt batch")
)

// Agent identifies one run of one agent: its host name and a random
// number drawn at start, so that a restarted agent is a new one.
type Agent struct {
	Host string
	Run  uint64
}

func (a Agent) String() string { return a.Host + "/" + strconv.FormatUint(a.Run, 16) }

// Kind is what an Item carries.
type Kind uint8

// Item kinds (their wire values).
const (
	KindExchange Kind = 1
	KindAnomaly  Kind = 2
	KindCounters Kind = 3
	kindConn     Kind = 16
)

// Item is one exchange, anomaly or counters of a batch.
type Item struct {
	Kind Kind
	// At is the agent's capture clock when its decoder gave the item.
	At       time.Time
	Exchange *decode.Exchange // KindExchange
	Anomaly  *decode.Anomaly  // KindAnomaly
	Counters *Counters        // KindCounters
	records  []partSegments   // Options.DeferRecords: see ExpandRecords
}

// Batch is one record value: items of one agent, numbered per agent.
type Batch struct {
	Agent Agent
	// Seq numbers an agent's batches from 1 without gaps: a missing
	// number is a batch lost (dropped by the agent, or by the transport).
	Seq uint64
	// Kwire is the agent's build (format 6 on); zero for an older
	// agent's batch, which does not say.
	Kwire version.Build
	Items []Item
}

// Counters are an agent's totals so far, sent with its stats.
type Counters struct {
	Capture capture.Stats `json:"capture"`
	Decode  decode.Stats  `json:"decode"`
	// ByKey is Decode.ByKey (exchanges per API key), which encoding/json
	// skips.
	ByKey   []int64      `json:"by_key,omitempty"`
	Publish PublishStats `json:"publish"`
	// Final is set by an agent that is stopping (its last batch).
	Final bool `json:"final,omitempty"`
}

// PublishStats count what an agent published and dropped.
type PublishStats struct {
	Batches uint64 `json:"publish_batches"`
	Items   uint64 `json:"publish_items"`
	Bytes   uint64 `json:"publish_bytes"`
	// BatchesDropped are whole batches dropped because the transport was
	// slower than the capture and --publish-buffer-mb was full, or failed.
	BatchesDropped uint64 `json:"publish_batches_dropped"`
	ItemsDropped   uint64 `json:"publish_items_dropped"`
	ProduceErrors  uint64 `json:"publish_errors"`
}

// writer appends the format's primitives. skew is added to every
// non-zero time (Encoder.SetSkew). last and at are the previous and the
// current item's time (Unix nanoseconds; see itemAt and near), strs the
// batch's string table in index order (see str), indexed by strIndex once
// it holds more than strScan entries.
type writer struct {
	b        []byte
	skew     time.Duration
	last, at int64
	strs     []string
	strIndex map[string]int
	// segs are the record segments of the Fetch response partitions of
	// the item being encoded by Encoder.Item, as decoded (DeferRecords).
	segs map[*kmsg.FetchResponseTopicPartition][]byte
}

// strScan: up to this many strings, the string table is searched by
// comparing them in turn. A batch is one client's (a client id, its
// topics, a group and member): comparing a few short strings is cheaper
// than hashing one, and str is called several times per exchange.
const strScan = 8

// reset starts a batch: no time before, an empty string table.
func (w *writer) reset() {
	w.b = w.b[:0]
	w.last, w.at = 0, 0
	clear(w.strs) // the strings of the last batch's messages
	w.strs = w.strs[:0]
	clear(w.strIndex)
}

func (w *writer) byte(v byte)      { w.b = append(w.b, v) }
func (w *writer) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *writer) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *writer) string(s string)  { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *writer) bytes(s []byte)   { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *writer) time(t time.Time) {
	if !t.IsZero() {
		t = t.Add(w.skew)
	}
	w.varint(timeNanos(t))
}
func (w *writer) errText(err error) { w.string(errString(err)) }

func (w *writer) nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Add(w.skew).UnixNano()
}

// itemAt writes an item's time as the difference from the previous item's
// (from 0 for the batch's first).
func (w *writer) itemAt(t time.Time) {
	n := w.nanos(t)
	w.varint(n - w.last)
	w.last, w.at = n, n
}

// near writes a time close to the current item's: 0 for the zero time,
// else 1 + the zig-zag difference from the item's time, as a uvarint.
func (w *writer) near(t time.Time) {
	n := w.nanos(t)
	if n == 0 {
		w.uvarint(0)
		return
	}
	d := n - w.at
	w.uvarint((uint64(d<<1) ^ uint64(d>>63)) + 1)
}

// str writes a string of the batch's string table (client ids, topic
// names, groups, members): 0 and the string the first time (it gets the
// next index), 1 + its index after.
func (w *writer) str(s string) {
	if i := w.strFind(s); i >= 0 {
		w.uvarint(uint64(i) + 1)
		return
	}
	w.strAdd(s)
}

// strBytes is str of string(b), which it copies only the first time.
func (w *writer) strBytes(b []byte) {
	i := -1
	if len(w.strs) <= strScan {
		for j, t := range w.strs {
			if t == string(b) {
				i = j
				break
			}
		}
	} else if j, ok := w.strIndex[string(b)]; ok {
		i = j
	}
	if i >= 0 {
		w.uvarint(uint64(i) + 1)
		return
	}
	w.strAdd(string(b))
}

// strFind returns s's index in the string table, or -1.
func (w *writer) strFind(s string) int {
	if len(w.strs) <= strScan {
		for i, t := range w.strs {
			if t == s {
				return i
			}
		}
		return -1
	}
	if i, ok := w.strIndex[s]; ok {
		return i
	}
	return -1
}

// strAdd writes s as the string table's next entry.
func (w *writer) strAdd(s string) {
	w.strs = append(w.strs, s)
	if n := len(w.strs); n > strScan {
		if w.strIndex == nil {
			w.strIndex = make(map[string]int)
		}
		if n == strScan+1 {
			for i, t := range w.strs[:strScan] {
				w.strIndex[t] = i
			}
		}
		w.strIndex[s] = n - 1
	}
	w.uvarint(0)
	w.string(s)
}

func timeNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// reader reads the format's primitives; the first error sticks and every
// later read returns zero values.
type reader struct {
	b        []byte
	err      error
	last, at int64    // writer's
	strs     []string // writer's
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("short")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int16 and int32 read varints that must fit.
func (r *reader) int16() int16 {
	v := r.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		r.fail("int16 out of range")
		return 0
	}
	return int16(v)
}

func (r *reader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("int32 out of range")
		return 0
	}
	return int32(v)
}

// index reads a uvarint that must fit an int32.
func (r *reader) index() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail("index out of range")
		return 0
	}
	return int(v)
}

// bytes returns the next byte string, pointing into the batch.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length past the end")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) time() time.Time {
	n := r.varint()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nanosTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (r *reader) itemAt() time.Time {
	r.last += r.varint()
	r.at = r.last
	return nanosTime(r.last)
}

func (r *reader) near() time.Time {
	v := r.uvarint()
	if v == 0 {
		return time.Time{}
	}
	v--
	return nanosTime(r.at + (int64(v>>1) ^ -int64(v&1)))
}

func (r *reader) str() string {
	i := r.uvarint()
	if i == 0 {
		s := r.string()
		if r.err == nil {
			r.strs = append(r.strs, s)
		}
		return s
	}
	if i > uint64(len(r.strs)) {
		r.fail("string of no table entry")
		return ""
	}
	return r.strs[i-1]
}

// count reads a uvarint count of things of at least min bytes each.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/max(min, 1)) {
		r.fail("count past the end")
		return 0
	}
	return int(n)
}

func (r *reader) errText() error {
	if s := r.string(); s != "" {
		return errors.New(s)
	}
	return nil
}
