package wire

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch response's record batches are published as segments: per batch
// its size and the header fields the correlator reads of it (the base
// offset, attributes, last offset delta and record count of a v2 batch;
// the offset and attributes of a v0/v1 message: what decode.ScanBatches
// and the hazard spans read), not its bytes. A cut last batch, or bytes
// that are no batch the readers read, keep at most their first 18 bytes,
// enough for the readers to stop where they stopped. No record key or
// value is in them: a v2 header ends before the first record, a v0/v1
// one before the key.
//
//	batches  = 0 (nil) | 1 segment* 3
//	segment  = 2 base:varint size:uvarint attrs:uvarint last_delta:varint
//	           records:varint [producer_id:varint]  (a v2 batch, format 2/3)
//	         | 4 base:varint size:uvarint attrs:uvarint last_delta:varint
//	           records:varint [producer_id:varint]
//	           first_ts:varint max_ts_delta:varint  (a v2 batch, format 4/5)
//	         | 1 magic:byte base:varint size:uvarint attrs:byte
//	                                                (a v0/v1 message)
//	         | 0 size:uvarint head:string           (anything else)
//
// (no count first: the batches are walked once, their bytes are cold).
//
// base is the batch's base offset minus the previous segment's next offset
// (0 for the first): 0 for batches that follow each other. records is the
// record count minus (last_delta + 1): 0 but for compacted batches.
// producer_id follows only for a transactional batch (attrs 0x10): the
// correlator follows a read_committed response's aborted transactions by
// it.
// Decode rebuilds each batch as its header (the fields above, the rest of
// the header zero) and zeros, at its size.
const (
	v2HeaderLen     = 61
	v2ProducerOff   = 43
	attrTxn         = 0x10
	legacyHeaderLen = 18
	tailKeep        = 18

	segRaw    = 0
	segLegacy = 1
	segV2     = 2
	segEnd    = 3
	// segV2Times (format 4 on) is segV2 followed by the batch's
	// timestamps: first_ts:varint (Unix ms) max_ts:varint (minus
	// first_ts), for lag in seconds.
	segV2Times = 4

	v2FirstTsOff = 27
	v2MaxTsOff   = 35
)

// segment is one batch (or the cut rest) of a partition's record bytes,
// as read.
type segment struct {
	size      int
	base      int64
	lastDelta int32
	records   int32
	pid       int64 // v2 transactional batches only
	first     int64 // v2 timestamps (segV2Times), Unix ms
	max       int64
	attrs     uint16
	magic     int8   // 2, 0 or 1; -1 for raw
	head      []byte // raw only
}

// batches writes b as segments, walking it as decode.ScanBatches does.
func (w *writer) batches(b []byte) {
	if b == nil {
		w.uvarint(0)
		return
	}
	w.byte(1)
	var next int64
	for len(b) > 0 {
		size := segmentLen(b)
		seg := b[:size]
		b = b[size:]
		magic := int8(-1)
		// A batch whose length field is not its size is cut: the readers
		// stop at it, and so must its rebuilt copy.
		if size >= legacyHeaderLen && int64(size) == int64(int32(binary.BigEndian.Uint32(seg[8:])))+12 {
			switch m := seg[16]; {
			case m == 2 && size >= v2HeaderLen:
				magic = 2
			case m < 2:
				magic = int8(m)
			}
		}
		switch magic {
		case 2:
			base := int64(binary.BigEndian.Uint64(seg))
			delta := int32(binary.BigEndian.Uint32(seg[23:]))
			recs := int32(binary.BigEndian.Uint32(seg[57:]))
			w.byte(segV2Times)
			w.varint(base - next)
			w.uvarint(uint64(size))
			w.uvarint(uint64(binary.BigEndian.Uint16(seg[21:])))
			w.varint(int64(delta))
			w.varint(int64(recs) - int64(delta) - 1)
			if binary.BigEndian.Uint16(seg[21:])&attrTxn != 0 {
				w.varint(int64(binary.BigEndian.Uint64(seg[v2ProducerOff:])))
			}
			first := int64(binary.BigEndian.Uint64(seg[v2FirstTsOff:]))
			w.varint(first)
			w.varint(int64(binary.BigEndian.Uint64(seg[v2MaxTsOff:])) - first)
			next = base + int64(delta) + 1
		case 0, 1:
			base := int64(binary.BigEndian.Uint64(seg))
			w.byte(segLegacy)
			w.byte(byte(magic))
			w.varint(base - next)
			w.uvarint(uint64(size))
			w.byte(seg[17])
			next = base + 1
		default:
			w.byte(segRaw)
			w.uvarint(uint64(size))
			w.bytes(seg[:min(size, tailKeep)])
		}
	}
	w.byte(segEnd)
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

// batches reads a partition's segments: into p.RecordBatches, or, with
// Options.DeferRecords, kept as they are encoded (they point into the
// batch) for Item.ExpandRecords, which reads them again.
func (d *batchDecoder) batches(p *kmsg.FetchResponseTopicPartition) {
	r := &d.r
	switch r.byte() {
	case 0:
		return
	case 1:
	default:
		r.fail("bad batches marker")
		return
	}
	start := r.b
	size := readSegments(r, nil, d.budget)
	if r.err != nil {
		return
	}
	d.budget -= size
	d.total -= size
	if d.deferRecords {
		d.deferred = append(d.deferred, partSegments{p: p, enc: start[:len(start)-len(r.b)], size: size})
		return
	}
	p.RecordBatches = make([]byte, size)
	readSegments(&reader{b: start}, p.RecordBatches, size)
}

// readSegments reads segments up to their end and returns the bytes they
// stand for, at most budget. With out (zero, and that long), it writes
// each batch's header at its place.
func readSegments(r *reader, out []byte, budget int) int {
	total := 0
	var next int64
	for {
		tag := r.byte()
		if tag == segEnd || r.err != nil {
			return total
		}
		var s segment
		switch tag {
		case segV2, segV2Times:
			s.magic = 2
			s.base = next + r.varint()
			s.size = int(min(r.uvarint(), 1<<31))
			attrs := r.uvarint()
			s.lastDelta = r.int32()
			recs := int64(s.lastDelta) + 1 + r.varint()
			if attrs > 0xffff || recs != int64(int32(recs)) || s.size < v2HeaderLen {
				r.fail("bad v2 batch segment")
			}
			s.attrs, s.records = uint16(attrs), int32(recs)
			if s.attrs&attrTxn != 0 {
				s.pid = r.varint()
			}
			if tag == segV2Times {
				s.first = r.varint()
				s.max = s.first + r.varint()
			}
			next = s.base + int64(s.lastDelta) + 1
		case segLegacy:
			s.magic = int8(r.byte())
			s.base = next + r.varint()
			s.size = int(min(r.uvarint(), 1<<31))
			s.attrs = uint16(r.byte())
			if s.magic > 1 || s.size < legacyHeaderLen {
				r.fail("bad v0/v1 message segment")
			}
			next = s.base + 1
		case segRaw:
			s.magic = -1
			s.size = int(min(r.uvarint(), 1<<31))
			s.head = r.bytes()
			if len(s.head) > s.size {
				r.fail("segment head longer than the segment")
			}
		default:
			r.fail("bad segment tag")
		}
		if r.err != nil {
			return 0
		}
		if s.size > budget-total {
			r.fail("record bytes above the expansion budget")
			return 0
		}
		if out != nil {
			s.put(out[total : total+s.size])
		}
		total += s.size
	}
}

// put writes s's header into b (zero, s.size long).
func (s *segment) put(b []byte) {
	switch s.magic {
	case 2:
		binary.BigEndian.PutUint64(b, uint64(s.base))
		binary.BigEndian.PutUint32(b[8:], uint32(s.size-12))
		b[16] = 2
		binary.BigEndian.PutUint16(b[21:], s.attrs)
		binary.BigEndian.PutUint32(b[23:], uint32(s.lastDelta))
		binary.BigEndian.PutUint64(b[v2FirstTsOff:], uint64(s.first))
		binary.BigEndian.PutUint64(b[v2MaxTsOff:], uint64(s.max))
		binary.BigEndian.PutUint64(b[v2ProducerOff:], uint64(s.pid))
		binary.BigEndian.PutUint32(b[57:], uint32(s.records))
	case 0, 1:
		binary.BigEndian.PutUint64(b, uint64(s.base))
		binary.BigEndian.PutUint32(b[8:], uint32(s.size-12))
		b[16] = byte(s.magic)
		b[17] = byte(s.attrs)
	default:
		copy(b, s.head)
	}
}
