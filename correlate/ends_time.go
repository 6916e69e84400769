package correlate

import (
	"slices"
	"strconv"
	"time"

	"github.com/kwire/kwire/decode"
)

// Lag in seconds.
//
// How long ago the record at a group's committed offset was made is read
// from the record batches that cross the wire: a Produce request's
// batches (offsets from its response), any client's Fetch response's.
// A batch header gives its first record's timestamp and the largest of
// its records' (CreateTime, the producer's clock; or LogAppendTime, the
// broker's), so the record at an offset inside a batch is placed between
// the two. Where no batch holding it was seen (its Produce and every
// Fetch of it before the capture began), its time is estimated from the
// (offset, time) points seen, batches and the end offsets seen at capture
// times, as kafka-lag-exporter does from its polls, and marked estimated.
//
// Per partition a few batches and end marks are kept, thinned as they
// age (the newest half dense, every other one of the older half dropped
// when full), and a group's committed offset is pinned to its time as
// soon as a batch holding it is seen (wantTime): a consumer stuck for an
// hour is still measured from the batch that held its offset.

// recordTime is when the record at off was made.
type recordTime struct {
	off       int64
	ms        int64 // Unix milliseconds
	logAppend bool  // the broker's append time (else the producer's)
}

// batchTime is a record batch's offsets and timestamps.
type batchTime struct {
	base, last int64
	first, max int64 // Unix milliseconds
	logAppend  bool
}

// endMark is an end offset seen at a capture time (Unix milliseconds):
// the records before end were appended by then.
type endMark struct{ end, ms int64 }

// At most this many batches and end marks per partition, and groups'
// partitions waiting for a batch that holds their committed offset.
const (
	maxBatchTimes     = 32
	maxEndMarks       = 16
	maxWaiting        = 8
	maxFetchedBatches = 16
)

// at returns when the record at off, which b holds, was made: its first
// record's time for the first, its largest for the last, in between for
// the others.
func (b *batchTime) at(off int64) recordTime {
	ms := b.first
	if b.last > b.base && b.max > b.first {
		ms = b.first + (b.max-b.first)*(off-b.base)/(b.last-b.base)
	}
	if b.logAppend {
		ms = b.max // one append time for the whole batch
	}
	return recordTime{off: off, ms: ms, logAppend: b.logAppend}
}

// addBatch records a batch seen on the wire, and pins the committed
// offsets waiting for it.
func (s *endState) addBatch(b batchTime) {
	if b.last < b.base || b.first <= 0 && b.max <= 0 {
		return
	}
	for i := 0; i < len(s.waiting); {
		ps := s.waiting[i]
		switch {
		case ps.pinned || !ps.hasCommitted:
			s.waiting = slices.Delete(s.waiting, i, i+1)
		case ps.committed >= b.base && ps.committed <= b.last:
			ps.pin, ps.pinned = b.at(ps.committed), true
			s.waiting = slices.Delete(s.waiting, i, i+1)
		default:
			i++
		}
	}
	i, found := slices.BinarySearchFunc(s.batches, b.base, func(x batchTime, base int64) int { return cmpInt64(x.base, base) })
	if found {
		return
	}
	if len(s.batches) >= maxBatchTimes {
		s.batches = thin(s.batches)
		i, _ = slices.BinarySearchFunc(s.batches, b.base, func(x batchTime, base int64) int { return cmpInt64(x.base, base) })
	}
	s.batches = slices.Insert(s.batches, i, b)
}

// addMark records that the partition ended at end at capture time ms,
// when that moves it on.
func (s *endState) addMark(end, ms int64) {
	if n := len(s.marks); n > 0 && s.marks[n-1].end >= end {
		return
	}
	if len(s.marks) >= maxEndMarks {
		s.marks = thin(s.marks)
	}
	s.marks = append(s.marks, endMark{end, ms})
}

// thin drops every other element of the older half of s.
func thin[T any](s []T) []T {
	half := len(s) / 2
	out := s[:0]
	for i := range s {
		if i >= half || i%2 == 1 {
			out = append(out, s[i])
		}
	}
	clear(s[len(out):])
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// find returns the time of the record at off from a batch holding it.
func (s *endState) find(off int64) (recordTime, bool) {
	i, found := slices.BinarySearchFunc(s.batches, off, func(x batchTime, o int64) int { return cmpInt64(x.base, o) })
	if !found {
		i--
	}
	if i >= 0 && i < len(s.batches) && s.batches[i].base <= off && off <= s.batches[i].last {
		return s.batches[i].at(off), true
	}
	return recordTime{}, false
}

// estimate returns the time of the record at off from the points around
// it (batches' first and last records; end marks, the capture's clock,
// only where batches leave a side open: the record before a mark's end
// was appended by the mark's time): linearly between the nearest on either
// side, or, for an offset older than every point, extrapolated back at
// the rate of the two oldest, as kafka-lag-exporter does. ok is false
// without a point after off.
func (s *endState) estimate(off int64, fetched []batchTime) (recordTime, bool) {
	var pts []recordTime
	for _, bs := range [][]batchTime{fetched, s.batches} {
		for i := range bs {
			b := &bs[i]
			pts = append(pts, b.at(b.base), b.at(b.last))
		}
	}
	lo, hi := nearest(pts, off)
	if lo < 0 || hi < 0 {
		for _, m := range s.marks {
			pts = append(pts, recordTime{off: m.end - 1, ms: m.ms})
		}
		lo, hi = nearest(pts, off)
	}
	if hi < 0 {
		return recordTime{}, false
	}
	h := pts[hi]
	if lo >= 0 {
		l := pts[lo]
		if h.ms <= l.ms {
			return recordTime{off: off, ms: h.ms, logAppend: h.logAppend}, true
		}
		return recordTime{off: off, ms: l.ms + (h.ms-l.ms)*(off-l.off)/(h.off-l.off), logAppend: h.logAppend}, true
	}
	// Older than every point: back from the oldest at the rate between it
	// and the next.
	next := -1
	for i, p := range pts {
		if p.off > h.off && (next < 0 || p.off < pts[next].off) {
			next = i
		}
	}
	if next < 0 || pts[next].ms <= h.ms {
		return recordTime{}, false // one point, or no rate: unknown, not a guess
	}
	n := pts[next]
	ms := h.ms - (h.off-off)*(n.ms-h.ms)/(n.off-h.off)
	return recordTime{off: off, ms: ms, logAppend: h.logAppend}, true
}

// nearest returns the indexes in pts of the point with the largest offset
// below off and of the one with the smallest above it, -1 for none.
func nearest(pts []recordTime, off int64) (lo, hi int) {
	lo, hi = -1, -1
	for i, p := range pts {
		switch {
		case p.off < off && (lo < 0 || p.off > pts[lo].off):
			lo = i
		case p.off > off && (hi < 0 || p.off < pts[hi].off):
			hi = i
		}
	}
	return lo, hi
}

// wantTime pins ps's committed offset to its record's time, now if a
// batch holding it is known, else when one comes (at most maxWaiting
// partitions wait per topic partition; the oldest gives way).
func (c *Correlator) wantTime(p tp, ps *partState) {
	if !ps.hasCommitted || ps.pinned && ps.pin.off == ps.committed {
		return
	}
	ps.pinned = false
	for i := range ps.fetched {
		if b := &ps.fetched[i]; b.base <= ps.committed && ps.committed <= b.last {
			ps.pin, ps.pinned = b.at(ps.committed), true
			return
		}
	}
	s := c.ends[p]
	if s == nil {
		if s = c.endOf(p); s == nil {
			return
		}
	}
	if t, ok := s.find(ps.committed); ok {
		ps.pin, ps.pinned = t, true
		return
	}
	if slices.Contains(s.waiting, ps) {
		return
	}
	if len(s.waiting) >= maxWaiting {
		s.waiting = slices.Delete(s.waiting, 0, 1)
	}
	s.waiting = append(s.waiting, ps)
}

// lagTime is a group partition's lag in seconds: how long before now the
// record at its committed offset was made; 0 when it has consumed to the
// end. ok is false when unknown.
type lagTime struct {
	seconds   float64
	estimated bool
	logAppend bool
}

func (c *Correlator) lagSeconds(p tp, ps *partState, end int64) (lagTime, bool) {
	if !ps.hasCommitted || end < 0 {
		return lagTime{}, false
	}
	if ps.committed >= end {
		return lagTime{}, true
	}
	var t recordTime
	var ok, estimated bool
	switch s := c.ends[p]; {
	case ps.pinned && ps.pin.off == ps.committed:
		t, ok = ps.pin, true
	case s == nil:
	default:
		if t, ok = s.find(ps.committed); !ok {
			t, ok = s.estimate(ps.committed, ps.fetched)
			estimated = true
		}
	}
	if !ok {
		return lagTime{}, false
	}
	d := c.now.Sub(time.UnixMilli(t.ms)).Seconds()
	return lagTime{seconds: max(d, 0), estimated: estimated, logAppend: t.logAppend}, true
}

// groupFetched keeps batches a group's Fetch delivered of a partition,
// those at or past its committed offset (where its next commit falls),
// sorted, dense near the committed offset and thinned further on; and
// pins its committed offset when one holds it.
func (ps *partState) groupFetched(records []byte) {
	if ps.hasCommitted {
		i := 0
		for i < len(ps.fetched) && ps.fetched[i].last < ps.committed {
			i++
		}
		ps.fetched = slices.Delete(ps.fetched, 0, i)
	}
	decode.ScanHeaders(records, func(h *decode.BatchHeader) {
		if h.Control || ps.hasCommitted && h.Last < ps.committed {
			return
		}
		b := batchTime{base: h.Base, last: h.Last, first: h.FirstTimestamp, max: h.MaxTimestamp, logAppend: h.LogAppendTime}
		if ps.hasCommitted && !(ps.pinned && ps.pin.off == ps.committed) && b.base <= ps.committed && ps.committed <= b.last {
			ps.pin, ps.pinned = b.at(ps.committed), true
		}
		i, found := slices.BinarySearchFunc(ps.fetched, b.base, func(x batchTime, base int64) int { return cmpInt64(x.base, base) })
		if found {
			return
		}
		if len(ps.fetched) >= maxFetchedBatches {
			if i >= len(ps.fetched) && i%2 == 1 {
				return // thinned: every other one of the newer half
			}
			ps.fetched = thinNewer(ps.fetched)
			i, _ = slices.BinarySearchFunc(ps.fetched, b.base, func(x batchTime, base int64) int { return cmpInt64(x.base, base) })
		}
		ps.fetched = slices.Insert(ps.fetched, i, b)
	})
}

// thinNewer drops every other element of the newer half of s.
func thinNewer[T any](s []T) []T {
	half := len(s) / 2
	out := s[:0]
	for i := range s {
		if i < half || (i-half)%2 == 1 {
			out = append(out, s[i])
		}
	}
	clear(s[len(out):])
	return out
}

// fetchBatches records the batches of a Fetch response's partition.
func (s *endState) fetchBatches(records []byte) {
	decode.ScanHeaders(records, func(h *decode.BatchHeader) {
		if !h.Control {
			s.addBatch(batchTime{base: h.Base, last: h.Last, first: h.FirstTimestamp, max: h.MaxTimestamp, logAppend: h.LogAppendTime})
		}
	})
}

// LagSecondsText is a lag in seconds as kwire's tables show it: "12.3",
// "~12.3" when estimated, "-" when unknown (nil).
func LagSecondsText(s *float64, estimated bool) string {
	if s == nil {
		return "-"
	}
	t := strconv.FormatFloat(*s, 'f', 1, 64)
	if estimated {
		t = "~" + t
	}
	return t
}
