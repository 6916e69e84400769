package decode

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batches summarises the record batches of one partition in a Produce
// request or Fetch response, read from batch headers only: nothing is
// decompressed and no record is looked at.
type Batches struct {
	// Batches is the number of complete batches (or legacy messages).
	Batches int
	// Records is the number of records they hold. Legacy (magic 0/1)
	// compressed wrappers count as one record and set Inexact.
	Records int64
	// FirstOffset is the base offset of the first batch; NextOffset the
	// offset after the last record of the last complete batch. Both -1
	// when there is no complete batch.
	FirstOffset, NextOffset int64
	// Bytes is the size of the complete batches.
	Bytes int64
	// Codecs has bit 1<<c set for each compression codec c seen (0 none,
	// 1 gzip, 2 snappy, 3 lz4, 4 zstd).
	Codecs uint8
	// Control counts control batches (transaction markers).
	Control int
	// Partial is set when the bytes end inside a batch: normal in a Fetch
	// response, which may cut its last batch at the size limit.
	Partial bool
	// Inexact is set when Records is a lower bound (legacy compression).
	Inexact bool
}

// v2 record batch header layout (KIP-98).
const (
	batchLengthOff    = 8
	batchMagicOff     = 16
	batchAttrOff      = 21
	batchLastDeltaOff = 23
	batchFirstTsOff   = 27
	batchMaxTsOff     = 35
	batchProducerOff  = 43 // producer id (int64), then epoch (int16)
	batchNumRecsOff   = 57
	batchHeaderLen    = 61
	legacyHeaderLen   = 8 + 4 + 4 + 1 + 1 // offset, size, crc, magic, attributes
)

// ScanBatches reads the batch headers in b.
func ScanBatches(b []byte) Batches {
	r := Batches{FirstOffset: -1, NextOffset: -1}
	for len(b) > 0 {
		if len(b) < 12 {
			r.Partial = true
			break
		}
		base := int64(binary.BigEndian.Uint64(b))
		size := int64(int32(binary.BigEndian.Uint32(b[batchLengthOff:]))) + 12
		if size < legacyHeaderLen || size > int64(len(b)) || len(b) < batchMagicOff+1 {
			r.Partial = true
			break
		}
		batch := b[:size]
		b = b[size:]
		var next int64
		switch magic := batch[batchMagicOff]; {
		case magic == 2 && size >= batchHeaderLen:
			attrs := binary.BigEndian.Uint16(batch[batchAttrOff:])
			r.Codecs |= 1 << (attrs & 0x07)
			if attrs&0x20 != 0 {
				r.Control++
			}
			r.Records += int64(int32(binary.BigEndian.Uint32(batch[batchNumRecsOff:])))
			next = base + int64(int32(binary.BigEndian.Uint32(batch[batchLastDeltaOff:]))) + 1
		case magic < 2:
			codec := batch[legacyHeaderLen-1] & 0x07
			r.Codecs |= 1 << codec
			r.Records++
			if codec != 0 {
				r.Inexact = true // the wrapper's offset is its last inner record's
			}
			next = base + 1
		default:
			r.Partial = true
			return r
		}
		if r.FirstOffset < 0 {
			r.FirstOffset = base
		}
		r.NextOffset = next
		r.Batches++
		r.Bytes += size
	}
	return r
}

// BatchHeader is what a v2 record batch's header (KIP-98) says of it.
type BatchHeader struct {
	// Base is the batch's base offset (0 in a Produce request: the
	// broker assigns offsets); Last its last record's offset.
	Base, Last int64
	// FirstTimestamp and MaxTimestamp are Unix milliseconds: the first
	// record's and the largest of its records', or, with LogAppendTime
	// set, the broker's append time (MaxTimestamp).
	FirstTimestamp, MaxTimestamp int64
	LogAppendTime                bool
	Control                      bool
	Records                      int32
}

// ScanHeaders calls fn with the header of each v2 batch in b: complete
// batches, and a last one cut short after its header (a Fetch response's
// size limit, or DropRecords keeping a Produce request's only batch's
// header). It reads 61 bytes per batch; nothing is decompressed.
func ScanHeaders(b []byte, fn func(*BatchHeader)) {
	var h BatchHeader
	for len(b) >= batchHeaderLen && b[batchMagicOff] == 2 {
		size := int64(int32(binary.BigEndian.Uint32(b[batchLengthOff:]))) + 12
		if size < batchHeaderLen {
			return
		}
		attrs := binary.BigEndian.Uint16(b[batchAttrOff:])
		h = BatchHeader{
			Base:           int64(binary.BigEndian.Uint64(b)),
			FirstTimestamp: int64(binary.BigEndian.Uint64(b[batchFirstTsOff:])),
			MaxTimestamp:   int64(binary.BigEndian.Uint64(b[batchMaxTsOff:])),
			LogAppendTime:  attrs&0x08 != 0,
			Control:        attrs&0x20 != 0,
			Records:        int32(binary.BigEndian.Uint32(b[batchNumRecsOff:])),
		}
		h.Last = h.Base + int64(int32(binary.BigEndian.Uint32(b[batchLastDeltaOff:])))
		fn(&h)
		if size > int64(len(b)) {
			return
		}
		b = b[size:]
	}
}

// BatchProducer returns the producer id and epoch in the header of the
// first record batch of b (magic 2, KIP-98); ok is false when b does not
// start with one. Only the header's 61 bytes are read.
func BatchProducer(b []byte) (id int64, epoch int16, ok bool) {
	if len(b) < batchHeaderLen || b[batchMagicOff] != 2 {
		return -1, -1, false
	}
	return int64(binary.BigEndian.Uint64(b[batchProducerOff:])), int16(binary.BigEndian.Uint16(b[batchProducerOff+8:])), true
}

// ScanProduce appends ScanBatches of each partition's records in r to
// into, topic by topic, partition by partition, and returns it: the
// summaries an exchange line shows, taken while the records are still
// there (kwire read's handoff drops them before the line is written).
func ScanProduce(r *kmsg.ProduceRequest, into []Batches) []Batches {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			into = append(into, ScanBatches(r.Topics[i].Partitions[j].Records))
		}
	}
	return into
}

// BatchSequence returns the base sequence in the header of the first
// record batch of b (magic 2: an idempotent producer's number of its
// first record, KIP-98; -1 for others); ok is false when b does not
// start with one.
func BatchSequence(b []byte) (seq int32, ok bool) {
	if len(b) < batchHeaderLen || b[batchMagicOff] != 2 {
		return -1, false
	}
	return int32(binary.BigEndian.Uint32(b[batchProducerOff+10:])), true
}
