package correlate

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// abortTracker tells, batch by batch through one Fetch response partition,
// which transactional batches a read_committed consumer drops, as the Java
// consumer decides it (KIP-98): a batch of producer P is aborted once an
// AbortedTransactions entry of P starts at or before its last offset, until
// P's next control batch (its abort marker). It is reused; reset it per
// partition.
type abortTracker struct {
	entries []kmsg.FetchResponseTopicPartitionAbortedTransaction // by FirstOffset
	next    int
	open    []int64 // producers inside an aborted transaction
}

// reset starts a partition whose response listed ab.
func (a *abortTracker) reset(ab []kmsg.FetchResponseTopicPartitionAbortedTransaction) {
	a.entries = append(a.entries[:0], ab...)
	slices.SortStableFunc(a.entries, func(x, y kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return cmp.Compare(x.FirstOffset, y.FirstOffset)
	})
	a.next, a.open = 0, a.open[:0]
}

// aborted reports whether a batch ending at last, of producer pid, is data
// of an aborted transaction; a control batch closes its producer's.
func (a *abortTracker) aborted(last, pid int64, control, txn bool) bool {
	for a.next < len(a.entries) && a.entries[a.next].FirstOffset <= last {
		if id := a.entries[a.next].ProducerID; !slices.Contains(a.open, id) && len(a.open) < 64 {
			a.open = append(a.open, id)
		}
		a.next++
	}
	if control {
		if i := slices.Index(a.open, pid); i >= 0 {
			a.open = slices.Delete(a.open, i, i+1)
		}
		return false
	}
	return txn && slices.Contains(a.open, pid)
}

// txnCounts is what one Fetch response partition delivered besides data.
type txnCounts struct {
	readCommitted bool
	// control counts control records (transaction markers: each takes an
	// offset and is never given to the application); aborted the records
	// of aborted transactions a read_committed consumer drops.
	control, aborted int64
	// lastControl is the offset of the last control batch (-1 none).
	lastControl int64
}

// batchHeader is the part of a v2 record batch header (KIP-98) kwire reads.
type batchHeader struct {
	base, next     int64 // first offset, offset after the last
	pid            int64
	records        int64
	control, txn   bool
	complete, ok   bool // a whole v2 batch; a legacy message when !ok && complete
	legacyCompress bool
}

// nextBatch reads the header of the batch at the start of b and returns
// the rest; ok false when b holds no complete batch.
func nextBatch(b []byte) (h batchHeader, rest []byte, ok bool) {
	if len(b) < 17 {
		return h, nil, false
	}
	h.base = int64(binary.BigEndian.Uint64(b))
	size := int64(int32(binary.BigEndian.Uint32(b[8:]))) + 12
	if size < 17 || size > int64(len(b)) {
		return h, nil, false
	}
	batch := b[:size]
	switch magic := batch[16]; {
	case magic == 2 && size >= 61:
		attrs := binary.BigEndian.Uint16(batch[21:])
		delta := int64(int32(binary.BigEndian.Uint32(batch[23:])))
		h.next = h.base + delta + 1
		h.pid = int64(binary.BigEndian.Uint64(batch[43:]))
		h.records = int64(int32(binary.BigEndian.Uint32(batch[57:])))
		h.control, h.txn = attrs&0x20 != 0, attrs&0x10 != 0
		h.complete, h.ok = true, true
	case magic < 2 && size >= 18:
		h.next, h.records, h.complete = h.base+1, 1, true
		h.legacyCompress = batch[17]&0x07 != 0
	default:
		return h, nil, false
	}
	return h, b[size:], true
}

// countTxn counts the control records and, for a read_committed response
// (rc), the aborted records of one partition's record batches.
func (a *abortTracker) countTxn(b []byte, ab []kmsg.FetchResponseTopicPartitionAbortedTransaction, rc bool) txnCounts {
	n := txnCounts{readCommitted: rc, lastControl: -1}
	a.reset(ab)
	for {
		h, rest, ok := nextBatch(b)
		if !ok {
			return n
		}
		b = rest
		if !h.ok {
			continue
		}
		switch {
		case h.control:
			n.control += max(h.records, 0)
			n.lastControl = h.base
			a.aborted(h.next-1, h.pid, true, h.txn)
		case rc && a.aborted(h.next-1, h.pid, false, h.txn):
			n.aborted += max(h.records, 0)
		}
	}
}
