package aggregate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
)

// The handover point of a partition of the routed topic (docs/aggregate.md,
// "Several aggregators"). The owner of a partition re-reads it from its
// start on every assignment, so that its groups are correlated from their
// whole history; what it writes is decided against the handover record the
// previous owner committed, as the metadata of its offset commit of that
// partition in the owner group NAME (Kafka keeps it; nothing else does):
//
//   - pos: how far (merge position: the capture time of the latest item
//     released to the correlator) the previous owner had correlated;
//   - from <= pos, and the fingerprints of every line of the partition it
//     accounted for (wrote, or left out as written before it) while at a
//     position at or after from.
//
// The new owner leaves out a line of the partition emitted while its own
// position is before from (its predecessor passed there and wrote it),
// and, at or after from, a line whose fingerprint the record holds (once
// per copy held); it writes the rest. Emission positions differ between
// instances only by what else they correlate (sweeps, withheld events):
// from is handoverWindow before pos, so a line emitted on both sides of
// from in the two instances needs a drift that large. The lines written
// at or after from whose capture time is before from are counted
// (handover_uncertain): they are the ones such a drift would duplicate.
//
// A record is clean when its owner gave the partition up (revoked, or
// stopping) after writing and flushing everything up to pos. Owners also
// commit unclean records: a claim on taking the partition over (before
// writing anything) and one after every poll that wrote lines. A new owner
// that finds an unclean record (its predecessor was killed, or lost the
// partition without committing) cannot know how far beyond pos its
// predecessor wrote: it counts the lines it writes past pos until it has
// caught up with the partition (handover_maybe_duplicate): at least once,
// never silently twice.

// handoverWindow is how far before the handover position the record's
// fingerprints reach (less when they would not fit, below).
const handoverWindow = 30 * time.Second

// handoverMaxLines bounds the fingerprints of a record: 8 bytes each, the
// record base64 encoded, under Kafka's default offset.metadata.max.bytes
// (4096).
const handoverMaxLines = 350

// handoverPrefix starts a handover record in commit metadata.
const handoverPrefix = "kwire-handover/1 "

// handover is one partition's handover record.
type handover struct {
	clean bool
	pos   time.Time
	from  time.Time
	lines map[uint64]int // fingerprint -> copies
}

// encode renders h as commit metadata.
func (h *handover) encode() string {
	b := []byte{0}
	if h.clean {
		b[0] = 1
	}
	b = binary.AppendVarint(b, unixNanos(h.pos))
	b = binary.AppendVarint(b, unixNanos(h.from))
	n := 0
	for _, c := range h.lines {
		n += c
	}
	b = binary.AppendUvarint(b, uint64(n))
	for fp, c := range h.lines {
		for range c {
			b = binary.BigEndian.AppendUint64(b, fp)
		}
	}
	return handoverPrefix + base64.RawStdEncoding.EncodeToString(b)
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

var errHandover = errors.New("not a kwire handover record")

// parseHandover reads commit metadata; ok is false when there is none.
func parseHandover(meta string) (*handover, error) {
	s, ok := strings.CutPrefix(meta, handoverPrefix)
	if !ok {
		return nil, errHandover
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(b) < 1 {
		return nil, errHandover
	}
	h := &handover{clean: b[0] == 1, lines: map[uint64]int{}}
	b = b[1:]
	var vs [2]int64
	for i := range vs {
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, errHandover
		}
		vs[i], b = v, b[k:]
	}
	h.pos, h.from = fromNanos(vs[0]), fromNanos(vs[1])
	// The count is checked against the bytes that hold the fingerprints,
	// not multiplied (n*8 wraps: a count of 2^61 passed for none).
	n, k := binary.Uvarint(b)
	if k <= 0 || (len(b)-k)%8 != 0 || n != uint64((len(b)-k)/8) {
		return nil, errHandover
	}
	b = b[k:]
	for range n {
		h.lines[binary.BigEndian.Uint64(b)]++
		b = b[8:]
	}
	return h, nil
}

// accounted is one line an owner accounted for: its emission position
// and fingerprint.
type accounted struct {
	pos time.Time
	fp  uint64
}

// partState is what an owner keeps of one partition of the routed topic
// it owns.
type partState struct {
	prev    *handover // the record found on taking it over (nil: none)
	prevRaw string    // prev as committed
	claimed bool      // a claim (unclean record) is committed
	// unclean: prev was unclean; lines written past prev.pos are counted
	// until the owner catches up.
	unclean bool
	dirty   bool        // lines accounted since the last commit
	ring    []accounted // the latest accounted lines, oldest first
	floor   time.Time   // the position of the latest line forgotten
	offset  int64       // the next offset to read (committed with the record)
	hwm     int64       // the partition's high watermark, last fetched
	readMax time.Time   // the latest merge key of its items read
}

// at is how far the partition has been correlated: its latest item read,
// unless later than what was released.
func (ps *partState) at(released time.Time) time.Time {
	if ps.readMax.Before(released) {
		return ps.readMax
	}
	return released
}

// account decides on one line of the partition, emitted at position pos:
// true writes it. Every line is accounted for, written or not.
func (g *groupAgg) account(ps *partState, pos, ts time.Time, fp uint64) bool {
	ps.ring = append(ps.ring, accounted{pos, fp})
	if len(ps.ring) > 4*handoverMaxLines {
		cut := len(ps.ring) - handoverMaxLines
		ps.floor = ps.ring[cut-1].pos
		ps.ring = append(ps.ring[:0], ps.ring[cut:]...)
	}
	ps.dirty = true
	h := ps.prev
	if h == nil {
		return true
	}
	if pos.Before(h.from) {
		g.suppressed++
		return false
	}
	if h.lines[fp] > 0 {
		h.lines[fp]--
		g.suppressed++
		return false
	}
	if ts.Before(h.from) {
		g.uncertain++
	}
	if ps.unclean && pos.After(h.pos) {
		g.maybeDup++
	}
	return true
}

// record builds the handover record of ps at position pos.
func (ps *partState) record(pos time.Time, clean bool) string {
	if h := ps.prev; h != nil && pos.Before(h.pos) {
		// Not yet past its predecessor's point: what that one wrote is
		// still the partition's story.
		r, _ := parseHandover(ps.prevRaw)
		r.clean = clean && h.clean
		return r.encode()
	}
	h := &handover{clean: clean, pos: pos, from: pos.Add(-handoverWindow), lines: map[uint64]int{}}
	if !ps.floor.IsZero() && !h.from.After(ps.floor) {
		h.from = ps.floor.Add(time.Nanosecond) // lines at or before floor were forgotten
	}
	i := len(ps.ring)
	for i > 0 && !ps.ring[i-1].pos.Before(h.from) {
		i--
	}
	if len(ps.ring)-i > handoverMaxLines {
		i = len(ps.ring) - handoverMaxLines
		h.from = ps.ring[i].pos
		if ps.ring[i-1].pos.Equal(h.from) {
			// Cut among lines of one position: start after it.
			h.from = h.from.Add(time.Nanosecond)
			for i < len(ps.ring) && ps.ring[i].pos.Before(h.from) {
				i++
			}
		}
	}
	for _, a := range ps.ring[i:] {
		h.lines[a.fp]++
	}
	return h.encode()
}

// fingerprinter renders a line as the JSON writer would and returns its
// capture time and a fingerprint of it without connection ids (each
// instance numbers connections in order of arrival).
type fingerprinter struct {
	buf bytes.Buffer
	w   *jsonout.Writer
}

func newFingerprinter() *fingerprinter {
	f := &fingerprinter{}
	f.w = jsonout.New(&f.buf, &jsonout.Options{})
	return f
}

func (f *fingerprinter) event(ev correlate.Event) (time.Time, uint64) {
	f.buf.Reset()
	f.w.Event(ev)
	return f.sum()
}

func (f *fingerprinter) anomaly(a *decode.Anomaly) (time.Time, uint64) {
	f.buf.Reset()
	f.w.Anomaly(a)
	return f.sum()
}

func (f *fingerprinter) sum() (time.Time, uint64) {
	f.w.Flush()
	var v map[string]any
	if err := json.Unmarshal(f.buf.Bytes(), &v); err != nil {
		h := fnv.New64a()
		h.Write(f.buf.Bytes())
		return time.Time{}, h.Sum64()
	}
	WithoutConnIDs(v)
	b, _ := json.Marshal(v) // map keys sorted
	h := fnv.New64a()
	h.Write(b)
	ts, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(v["ts"]))
	return ts, h.Sum64()
}

// WithoutConnIDs drops connection ids from a decoded NDJSON line (a map
// from encoding/json): an endpoint's "id" (beside "broker" and "client"),
// "conn_id" and "learned_on_conn". Agents number their connections each
// on its own, so lines about the same traffic differ only there; the
// handover's fingerprints, and tests comparing runs, leave them out.
func WithoutConnIDs(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["broker"]; ok {
			if _, ok := v["client"]; ok {
				delete(v, "id")
			}
		}
		delete(v, "learned_on_conn")
		delete(v, "conn_id")
		for _, x := range v {
			WithoutConnIDs(x)
		}
	case []any:
		for _, x := range v {
			WithoutConnIDs(x)
		}
	}
}
