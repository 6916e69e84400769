package decode

import (
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// Holes: bytes a source chose not to copy (eBPF --snap: the tail of a large
// read or write) arrive as a Gap marked NotCopied, of known length. When
// such a gap falls inside a frame whose length is known, its bytes are
// zero-filled and the frame decoded anyway. The decode is kept only when
// every zero-filled byte was read as record data (a Produce request's
// Records, a Fetch response's RecordBatches): the structure of the frame
// was then read from real bytes alone, and is what the real bytes say.
// The partitions whose record bytes were not all copied are listed in
// Exchange.RecordsNotCopied, their records set to nil, and the bytes
// counted (Stats.RecordsNotCopiedBytes). A hole anywhere else
// (in a header, a length, another field) loses the frame's body, as a gap
// does.

// hole is a run of zero-filled bytes in a stream's buffer, at off from the
// start of the frame's length prefix.
type hole struct{ off, n int }

// maxHoles bounds the holes filled in one frame; a frame with more is cut
// as by a gap.
const maxHoles = 64

// PartitionIndex names one partition of a Produce request or Fetch
// response by position: Topics[Topic].Partitions[Partition].
type PartitionIndex struct{ Topic, Partition int }

// fillHole zero-fills a NotCopied gap of n bytes in dir's partial frame of
// total bytes (length prefix included), when it ends inside that frame.
// It reports whether it did; a frame completed by the fill is decoded.
func (d *Decoder) fillHole(cs *connState, dir capture.Dir, n, total int64, t time.Time) bool {
	s := &cs.dir[dir]
	have := int64(len(s.buf))
	if n <= 0 || have+n > total || len(s.holes) >= maxHoles {
		return false
	}
	s.holes = append(s.holes, hole{off: int(have), n: int(n)})
	s.buf = append(s.buf, make([]byte, n)...)
	if have+n == total {
		d.drain(cs, dir, int(have), t)
	}
	return true
}

// recordSpan is one record-data field of a decoded message: its bytes, and
// the partition it belongs to.
type recordSpan struct {
	b   *[]byte
	idx PartitionIndex
}

// recordSpans lists the record-data fields of m: a Produce request's
// Records, a Fetch response's RecordBatches. Other messages have none.
func recordSpans(m any, out []recordSpan) []recordSpan {
	switch m := m.(type) {
	case *kmsg.ProduceRequest:
		for ti := range m.Topics {
			for pi := range m.Topics[ti].Partitions {
				out = append(out, recordSpan{&m.Topics[ti].Partitions[pi].Records, PartitionIndex{ti, pi}})
			}
		}
	case *kmsg.FetchResponse:
		for ti := range m.Topics {
			for pi := range m.Topics[ti].Partitions {
				out = append(out, recordSpan{&m.Topics[ti].Partitions[pi].RecordBatches, PartitionIndex{ti, pi}})
			}
		}
	}
	return out
}

// notCopied checks a message m decoded from base, a buffer holding a frame
// of end bytes with holes (offsets from the frame's length prefix; base
// starts at frame offset at). Every hole must lie within one record-data
// field, or run from inside the message's last one to the frame's end when
// only the closing tag sections follow it: one byte each of partition,
// topic and message tags (flexible versions), which are then empty, since
// three sections fit in three bytes only as three zero counts. It reports
// whether the holes pass; it then empties the fields they cut and appends
// their partitions to out.
func (d *Decoder) notCopied(m any, base []byte, at, end int, holes []hole, out []PartitionIndex) ([]PartitionIndex, bool) {
	d.spans = recordSpans(m, d.spans[:0])
	if len(d.spans) == 0 {
		return out, false
	}
	trailing := 0
	if f, ok := m.(interface{ IsFlexible() bool }); ok && f.IsFlexible() {
		trailing = 3
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(base)))
	// offset returns where b starts in the frame: kmsg's byte fields
	// alias the buffer decoded. Empty fields have no place.
	offset := func(b []byte) int {
		if len(b) == 0 {
			return -1
		}
		return int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))-start) + at
	}
	last := len(d.spans) - 1 // the last partition of the last topic
	hit := make([]bool, len(d.spans))
	records := 0 // hole bytes in record data (not the closing tags)
	for _, h := range holes {
		found := false
		for i, sp := range d.spans {
			off := offset(*sp.b)
			if off < at || h.off < off {
				continue
			}
			e := off + len(*sp.b)
			if h.off < e && (h.off+h.n <= e || i == last && h.off+h.n == end && e+trailing == end) {
				hit[i], found = true, true
				records += min(h.off+h.n, e) - h.off
				break
			}
		}
		if !found {
			return out, false
		}
	}
	for i, sp := range d.spans {
		if hit[i] {
			*sp.b = nil
			out = append(out, sp.idx)
		}
	}
	d.stats.RecordsNotCopiedBytes += int64(records)
	return out, true
}
