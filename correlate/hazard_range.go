package correlate

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
)

// What a hazard says happens to records (Impact.What, RecordRange.What).
const (
	ImpactLost        = "lost"        // never processed
	ImpactNotRead     = "not_read"    // a new group started at the log's end
	ImpactReplayed    = "replayed"    // processed again
	ImpactRedelivered = "redelivered" // a share group's records delivered again
)

// Impact is what a hazard says happens to records: What (ImpactLost...),
// and, when Ranged, which: offsets First..Last of Topic/Partition; N
// counts them (also when the hazard names no range).
type Impact struct {
	What        string
	Topic       string
	Partition   int32
	First, Last int64
	N           int64
	Ranged      bool
}

// Impact reads what h says happens to records from its fields; ok is
// false when h says nothing of records. Each kind names its range its own
// way (docs/schema.md): this is the one place that reads them.
func (h *HazardEvent) Impact() (im Impact, ok bool) {
	set := func(p ...*int64) bool { return !slices.Contains(p, nil) }
	from, to := h.FromOffset, h.ToOffset
	switch {
	case positive(h.Skipped):
		im.What, im.N = ImpactLost, *h.Skipped
		switch {
		case h.Kind == HazardOffsetReset && from == nil && set(to, h.LogStartOffset):
			im.What, im.First, im.Last = ImpactNotRead, *h.LogStartOffset, *to-1
		case h.Kind == HazardOffsetReset && set(from, to):
			im.First, im.Last = *from, *to-1
		case h.Kind == HazardCommitGap && len(h.MissingOffsets) > 0 && int64(len(h.MissingOffsets)) == im.N:
			// Every missing record is listed (out of order, the commit
			// before the stride need not be the first of them).
			im.First, im.Last = h.MissingOffsets[0], h.MissingOffsets[len(h.MissingOffsets)-1]
		case h.Kind == HazardCommitGap && set(h.PreviousOffset, h.Offset):
			im.First, im.Last = *h.PreviousOffset, *h.Offset-2
		case h.Kind == HazardCommitBeyondFetch && h.Offset != nil:
			im.First, im.Last = *h.Offset-im.N, *h.Offset-1
		case set(from, to):
			im.First, im.Last = *from, *to
		default:
			im.First, im.Last = 0, -1
		}
	case positive(h.Replayed):
		im.What, im.N = ImpactReplayed, *h.Replayed
		switch {
		case h.Kind == HazardOffsetReset && to != nil:
			im.First, im.Last = *to, *to+im.N-1
		case set(from, to):
			im.First, im.Last = *from, *to
		default:
			im.First, im.Last = 0, -1
		}
	case (h.Kind == HazardShareRedelivery || h.Kind == HazardShareAckLost || h.Kind == HazardShareMemberDied) && set(from, to):
		im.What, im.First, im.Last, im.N = ImpactRedelivered, *from, *to, *to-*from+1
	case h.Kind == HazardTxnOffsetsAborted && set(from, to):
		im.What, im.First, im.Last, im.N = ImpactReplayed, *from, *to, *to-*from+1
	default:
		return im, false
	}
	im.Ranged = im.Last >= im.First && h.Topic != "" && h.Partition != nil
	if im.Ranged {
		im.Topic, im.Partition = h.Topic, *h.Partition
	}
	return im, true
}

func positive(n *int64) bool { return n != nil && *n > 0 }

// RecordRange is a hazard's records as Impact reads them, in the NDJSON:
// offsets FirstOffset..LastOffset (inclusive) of its partition, What
// happens to them.
type RecordRange struct {
	What        string `json:"what"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
}

// Span is an inclusive offset range; ID names it (Spans.Add).
type Span struct {
	First, Last int64
	ID          string
	seq         uint64 // order of its first Add (rangeTracker)
}

// Spans are sorted, disjoint offset ranges.
type Spans []Span

// Add adds s, merging it with the spans it overlaps or touches into one,
// so that records two hazards name are counted once. The merged span
// keeps the ID of the earliest added of them (seq; the lowest offsets
// among equals); kept is that ID, absorbed the IDs of the others.
func (ss *Spans) Add(s Span) (kept string, absorbed []string) {
	old := *ss
	lo := sort.Search(len(old), func(i int) bool { return old[i].Last+1 >= s.First })
	hi := lo
	for hi < len(old) && old[hi].First <= s.Last+1 {
		hi++
	}
	if lo == hi {
		*ss = slices.Insert(old, lo, s)
		return s.ID, nil
	}
	first := lo
	for i := lo + 1; i < hi; i++ {
		if old[i].seq < old[first].seq {
			first = i
		}
	}
	m := old[first]
	m.First, m.Last = min(s.First, old[lo].First), max(s.Last, old[hi-1].Last)
	for i := lo; i < hi; i++ {
		if i != first && old[i].ID != m.ID {
			absorbed = append(absorbed, old[i].ID)
		}
	}
	if s.ID != m.ID && s.ID != "" {
		absorbed = append(absorbed, s.ID)
	}
	*ss = slices.Replace(old, lo, hi, m)
	return m.ID, absorbed
}

// Count is how many offsets ss covers.
func (ss Spans) Count() int64 {
	var n int64
	for _, s := range ss {
		n += s.Last - s.First + 1
	}
	return n
}

// rangeKey is one group partition's records of one Impact.What.
type rangeKey struct {
	what, group string
	p           tp
}

// rangeTracker gives hazards over the same records one range id
// (HazardEvent.RangeID): the ranged Impact of each hazard published is
// merged into its group partition's Spans.
type rangeTracker struct {
	spans map[rangeKey]*Spans
	n     int               // spans kept, at most Options.Hazards.MaxHazards
	seq   uint64            // hazards added
	alias map[string]string // a range id merged into another -> that one
}

// add sets ev's Range and RangeID when it names a range of records.
// Past limit spans kept, a range apart from all kept has its hazard's own
// id and is not remembered.
func (r *rangeTracker) add(ev *HazardEvent, limit int) {
	im, ok := ev.Impact()
	if !ok || !im.Ranged || ev.Group == "" {
		return
	}
	ev.Range = &RecordRange{What: im.What, FirstOffset: im.First, LastOffset: im.Last}
	if r.spans == nil {
		r.spans, r.alias = map[rangeKey]*Spans{}, map[string]string{}
	}
	k := rangeKey{im.What, ev.Group, tp{im.Topic, im.Partition}}
	ss := r.spans[k]
	if ss == nil {
		ss = &Spans{}
	}
	before := len(*ss)
	r.seq++
	kept, absorbed := ss.Add(Span{First: im.First, Last: im.Last, ID: ev.ID, seq: r.seq})
	if len(*ss) > before && r.n >= limit {
		ss.remove(im.First) // apart from all kept, and no room: not remembered
		ev.RangeID = ev.ID
		return
	}
	r.n += len(*ss) - before
	r.spans[k] = ss
	for _, a := range absorbed {
		r.alias[a] = kept
	}
	ev.RangeID = kept
}

// remove drops the span that starts at first.
func (ss *Spans) remove(first int64) {
	*ss = slices.DeleteFunc(*ss, func(s Span) bool { return s.First == first })
}

// resolve is the range id that id was merged into, by now.
func (r *rangeTracker) resolve(id string) string {
	for i := 0; i < len(r.alias); i++ { // a chain is at most as long as the map
		to, ok := r.alias[id]
		if !ok {
			break
		}
		id = to
	}
	return id
}

// hazardID is ev's id: a hash of what tells it from every other hazard
// (kind, group, partition, member, client, transactional id, time,
// summary), so that a hazard has the same id in every run over the same
// traffic, however it is sharded, and connection numbers play no part.
func hazardID(ev *HazardEvent) string {
	h := fnv.New64a()
	for _, s := range []string{ev.Kind, ev.Group, ev.Topic, ev.MemberID, ev.ClientID, ev.ClientHost, ev.TransactionalID, ev.Summary} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var b [8]byte
	p := int64(-1)
	if ev.Partition != nil {
		p = int64(*ev.Partition)
	}
	for _, n := range []int64{p, ev.at.UnixNano()} {
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
