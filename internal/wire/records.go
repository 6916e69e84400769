package wire

import "encoding/binary"

// Record batches are published as segments: per batch its size and its
// header, the bytes the correlator reads of it (decode.ScanBatches and the
// hazard spans read a v2 batch's first 61 bytes, a v0/v1 message's first
// 18); a cut last batch keeps at most its first 18 bytes, enough for the
// readers to stop where they stopped. No record key or value is in them:
// a v2 header ends before the first record, a v0/v1 one before the key.
const (
	v2HeaderLen     = 61
	legacyHeaderLen = 18
	tailKeep        = 18
	maxSegments     = 1 << 20
)

// segment is one batch (or the cut rest) of a partition's record bytes.
type segment struct {
	size int
	head []byte
}

// appendSegments writes b as segments, walking it as decode.ScanBatches
// does.
func appendSegments(w *writer, b []byte) {
	n := 0
	for rest := b; len(rest) > 0; n++ {
		rest = rest[segmentLen(rest):]
	}
	w.uvarint(uint64(n))
	for len(b) > 0 {
		size := segmentLen(b)
		keep := min(size, tailKeep)
		if size >= 17 && size <= len(b) {
			switch magic := b[16]; {
			case magic == 2 && size >= v2HeaderLen:
				keep = v2HeaderLen
			case magic < 2 && size >= legacyHeaderLen:
				keep = legacyHeaderLen
			}
		}
		w.uvarint(uint64(size))
		w.bytes(b[:keep])
		b = b[size:]
	}
}

// segmentLen is the length of b's first batch, or of all of b when the
// readers stop there (too short, cut, or not a batch they read).
func segmentLen(b []byte) int {
	if len(b) < 17 {
		return len(b)
	}
	size := int64(int32(binary.BigEndian.Uint32(b[8:]))) + 12
	if size < legacyHeaderLen || size > int64(len(b)) {
		return len(b)
	}
	switch magic := b[16]; {
	case magic == 2 && size >= v2HeaderLen, magic < 2:
		return int(size)
	}
	return len(b)
}

// readSegments reads what appendSegments wrote and puts the bytes back:
// each head at its place, zeros after it. budget is what may still be
// allocated; it shrinks by the bytes returned.
func readSegments(r *reader, budget *int) []byte {
	segs := readSegmentList(r, budget)
	if r.err != nil {
		return nil
	}
	total := 0
	for _, s := range segs {
		total += s.size
	}
	out := make([]byte, total)
	at := 0
	for _, s := range segs {
		copy(out[at:], s.head)
		at += s.size
	}
	return out
}

// readSegmentList reads what appendSegments wrote; budget shrinks by the
// bytes they stand for.
func readSegmentList(r *reader, budget *int) []segment {
	n := r.count(2)
	segs := make([]segment, 0, min(n, maxSegments))
	total := 0
	for range n {
		s := segment{size: int(min(r.uvarint(), 1<<31)), head: r.bytes()}
		if len(s.head) > s.size {
			r.fail("segment head longer than the segment")
		}
		if r.err != nil {
			return nil
		}
		total += s.size
		if total > *budget {
			r.fail("record bytes above the expansion budget")
			return nil
		}
		segs = append(segs, s)
	}
	*budget -= total
	return segs
}
