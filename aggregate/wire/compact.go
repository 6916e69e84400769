package wire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Produce and Fetch are most of what an agent sees (87% of the items of
// the bulk capture), and re-encoding them with kmsg was most of an agent's
// publishing cost; OffsetCommit, one in eight, was a third of its bytes
// (fixed-width offsets of every partition a group commits). They go in a compact form instead (doc.go: "compact
// bodies"): the fields the correlator reads (and the exchange summaries of
// jsonout, and TUI error counts), written field by field, without the
// ones nothing downstream reads; Decode gives kmsg messages again, with
// kmsg's defaults in the fields left out. Topic names, groups and members
// are strings of the batch's table (writer.str).

// compactable reports whether m goes as a compact body.
func compactable(m message) bool {
	switch m.(type) {
	case *kmsg.ProduceRequest, *kmsg.ProduceResponse, *kmsg.FetchRequest, *kmsg.FetchResponse,
		*kmsg.OffsetCommitRequest, *kmsg.OffsetCommitResponse:
		return true
	}
	return false
}

// compact appends m's compact body (m is compactable).
func (w *writer) compact(m message) {
	switch m := m.(type) {
	case *kmsg.ProduceRequest:
		w.produceRequest(m)
	case *kmsg.ProduceResponse:
		w.produceResponse(m)
	case *kmsg.FetchRequest:
		w.fetchRequest(m)
	case *kmsg.FetchResponse:
		w.fetchResponse(m)
	case *kmsg.OffsetCommitRequest:
		w.offsetCommitRequest(m)
	case *kmsg.OffsetCommitResponse:
		w.offsetCommitResponse(m)
	}
}

// topicName writes a topic's name and id, both of the string table (the
// id as its 16 bytes, the zero id as the empty string).
func (w *writer) topicName(name string, id [16]byte) {
	w.str(name)
	if id == ([16]byte{}) {
		w.str("")
		return
	}
	w.strBytes(id[:])
}

func (r *reader) topicName() (name string, id [16]byte) {
	name = r.str()
	switch s := r.str(); len(s) {
	case 0:
	case 16:
		copy(id[:], s)
	default:
		r.fail("bad topic id length")
	}
	return
}

// nullString writes a nullable string: 0 for nil, else 1 + its length and
// the bytes.
func (w *writer) nullString(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(len(*s)) + 1)
	w.b = append(w.b, *s...)
}

func (r *reader) nullString() *string {
	n := r.uvarint()
	if n == 0 || r.err != nil {
		return nil
	}
	if n-1 > uint64(len(r.b)) {
		r.fail("length past the end")
		return nil
	}
	s := string(r.b[:n-1])
	r.b = r.b[n-1:]
	return &s
}

// produce_req = txn:nstring acks:varint timeout:varint
//
//	topics:uvarint (topic partitions:uvarint (partition:varint
//	[producer:varint epoch:varint])*)*
//
// producer and epoch (of the first record batch, -1 if none) only when
// txn is a transactional id: the correlator follows transactional
// producers by them (decode.BatchProducer).
func (w *writer) produceRequest(m *kmsg.ProduceRequest) {
	w.nullString(m.TransactionID)
	txn := m.TransactionID != nil && *m.TransactionID != ""
	w.varint(int64(m.Acks))
	w.varint(int64(m.TimeoutMillis))
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			w.varint(int64(t.Partitions[j].Partition))
			if txn {
				id, epoch, ok := decode.BatchProducer(t.Partitions[j].Records)
				if !ok {
					id, epoch = -1, -1
				}
				w.varint(id)
				w.varint(int64(epoch))
			}
			w.produceHeader(t.Partitions[j].Records)
		}
	}
}

func (d *batchDecoder) produceRequest(m *kmsg.ProduceRequest) {
	r := &d.r
	m.TransactionID = r.nullString()
	txn := m.TransactionID != nil && *m.TransactionID != ""
	m.Acks, m.TimeoutMillis = r.int16(), r.int32()
	m.Topics = make([]kmsg.ProduceRequestTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		t.Partitions = make([]kmsg.ProduceRequestTopicPartition, r.count(1))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition = r.int32()
			rb := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1}
			keep := false
			if txn {
				// The first batch's header, records left out, as
				// analyze keeps it.
				if id, epoch := r.varint(), r.int16(); id >= 0 {
					rb.ProducerID, rb.ProducerEpoch, keep = id, epoch, true
				}
			}
			if d.times && r.byte() == 1 {
				rb.LastOffsetDelta = r.int32()
				rb.NumRecords = rb.LastOffsetDelta + 1
				rb.FirstTimestamp = r.varint()
				rb.MaxTimestamp = rb.FirstTimestamp + r.varint()
				keep = true
			}
			if keep {
				if d.total < v2HeaderLen { // headers count against the expansion budget too
					r.fail("record bytes above the expansion budget")
					return
				}
				d.total -= v2HeaderLen
				rb.Length = v2HeaderLen - 12 // a batch without its records, as DropRecords keeps it
				p.Records = rb.AppendTo(nil)
			}
		}
	}
}

// produce_resp = throttle:varint topics:uvarint (topic partitions:uvarint
//
//	(partition:varint error:varint base_offset:varint
//	log_append_time:varint log_start:varint message:nstring)*)*
func (w *writer) produceResponse(m *kmsg.ProduceResponse) {
	w.varint(int64(m.ThrottleMillis))
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			w.varint(int64(p.Partition))
			w.varint(int64(p.ErrorCode))
			w.varint(p.BaseOffset)
			w.varint(p.LogAppendTime)
			w.varint(p.LogStartOffset)
			w.nullString(p.ErrorMessage)
		}
	}
}

func (d *batchDecoder) produceResponse(m *kmsg.ProduceResponse) {
	r := &d.r
	m.ThrottleMillis = r.int32()
	m.Topics = make([]kmsg.ProduceResponseTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, r.count(6))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition, p.ErrorCode, p.BaseOffset = r.int32(), r.int16(), r.varint()
			p.LogAppendTime, p.LogStartOffset, p.ErrorMessage = r.varint(), r.varint(), r.nullString()
		}
	}
}

// fetch_req = replica:varint replica_state:varint max_wait:varint
//
//	min_bytes:varint max_bytes:varint isolation:varint
//	session:varint epoch:varint
//	topics:uvarint (topic partitions:uvarint
//	(partition:varint fetch_offset:varint)*)*
//	forgotten:uvarint (topic partitions:uvarint partition:varint*)*
func (w *writer) fetchRequest(m *kmsg.FetchRequest) {
	w.varint(int64(m.ReplicaID))
	w.varint(int64(m.ReplicaState.ID))
	w.varint(int64(m.MaxWaitMillis))
	w.varint(int64(m.MinBytes))
	w.varint(int64(m.MaxBytes))
	w.varint(int64(m.IsolationLevel))
	w.varint(int64(m.SessionID))
	w.varint(int64(m.SessionEpoch))
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			w.varint(int64(t.Partitions[j].Partition))
			w.varint(t.Partitions[j].FetchOffset)
		}
	}
	w.uvarint(uint64(len(m.ForgottenTopics)))
	for i := range m.ForgottenTopics {
		t := &m.ForgottenTopics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			w.varint(int64(p))
		}
	}
}

func (d *batchDecoder) fetchRequest(m *kmsg.FetchRequest) {
	r := &d.r
	m.ReplicaID, m.ReplicaState.ID = r.int32(), r.int32()
	m.MaxWaitMillis, m.MinBytes, m.MaxBytes = r.int32(), r.int32(), r.int32()
	m.IsolationLevel = int8(r.int16())
	m.SessionID, m.SessionEpoch = r.int32(), r.int32()
	m.Topics = make([]kmsg.FetchRequestTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		t.Partitions = make([]kmsg.FetchRequestTopicPartition, r.count(2))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition, p.FetchOffset = r.int32(), r.varint()
		}
	}
	if n := r.count(2); n > 0 {
		m.ForgottenTopics = make([]kmsg.FetchRequestForgottenTopic, n)
		for i := range m.ForgottenTopics {
			t := &m.ForgottenTopics[i]
			t.Default()
			t.Topic, t.TopicID = r.topicName()
			t.Partitions = make([]int32, r.count(1))
			for j := range t.Partitions {
				t.Partitions[j] = r.int32()
			}
		}
	}
}

//	fetch_resp = throttle:varint error:varint session:varint
//	             topics:uvarint (topic partitions:uvarint part*)*
//	part       = partition:varint error:varint high_watermark:varint
//	             last_stable:varint log_start:varint preferred_replica:varint
//	             aborted:uvarint (producer:varint first_offset:varint)*
//	             batches
//
// aborted is 0 for none (nil), else 1 + the count. batches: records.go.
func (w *writer) fetchResponse(m *kmsg.FetchResponse) {
	w.varint(int64(m.ThrottleMillis))
	w.varint(int64(m.ErrorCode))
	w.varint(int64(m.SessionID))
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			w.varint(int64(p.Partition))
			w.varint(int64(p.ErrorCode))
			w.varint(p.HighWatermark)
			w.varint(p.LastStableOffset)
			w.varint(p.LogStartOffset)
			w.varint(int64(p.PreferredReadReplica))
			if p.AbortedTransactions == nil {
				w.uvarint(0)
			} else {
				w.uvarint(uint64(len(p.AbortedTransactions)) + 1)
				for _, a := range p.AbortedTransactions {
					w.varint(a.ProducerID)
					w.varint(a.FirstOffset)
				}
			}
			if enc, ok := w.segs[p]; ok && p.RecordBatches == nil {
				w.byte(1) // the segments as they were read (Encoder.Item)
				w.b = append(w.b, enc...)
			} else {
				w.batches(p.RecordBatches)
			}
		}
	}
}

func (d *batchDecoder) fetchResponse(m *kmsg.FetchResponse) {
	r := &d.r
	m.ThrottleMillis, m.ErrorCode, m.SessionID = r.int32(), r.int16(), r.int32()
	m.Topics = make([]kmsg.FetchResponseTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		// The partitions are not reallocated after this: deferred record
		// batches point at them.
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, r.count(8))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition, p.ErrorCode = r.int32(), r.int16()
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = r.varint(), r.varint(), r.varint()
			p.PreferredReadReplica = r.int32()
			if n := r.uvarint(); n > 0 {
				if n-1 > uint64(len(r.b)/2) {
					r.fail("count past the end")
					return
				}
				p.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, n-1)
				for k := range p.AbortedTransactions {
					a := &p.AbortedTransactions[k]
					a.Default()
					a.ProducerID, a.FirstOffset = r.varint(), r.varint()
				}
			}
			d.batches(p)
			if r.err != nil {
				return
			}
		}
	}
}

// commit_req  = group:sref generation:varint member:sref instance:nstring
//
//	retention:varint topics:uvarint (topic partitions:uvarint
//	(partition:varint offset:varint timestamp:varint
//	leader_epoch:varint metadata:nstring)*)*
func (w *writer) offsetCommitRequest(m *kmsg.OffsetCommitRequest) {
	w.str(m.Group)
	w.varint(int64(m.Generation))
	w.str(m.MemberID)
	w.nullString(m.InstanceID)
	w.varint(m.RetentionTimeMillis)
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			w.varint(int64(p.Partition))
			w.varint(p.Offset)
			w.varint(p.Timestamp)
			w.varint(int64(p.LeaderEpoch))
			w.nullString(p.Metadata)
		}
	}
}

func (d *batchDecoder) offsetCommitRequest(m *kmsg.OffsetCommitRequest) {
	r := &d.r
	m.Group, m.Generation, m.MemberID, m.InstanceID = r.str(), r.int32(), r.str(), r.nullString()
	m.RetentionTimeMillis = r.varint()
	m.Topics = make([]kmsg.OffsetCommitRequestTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		t.Partitions = make([]kmsg.OffsetCommitRequestTopicPartition, r.count(5))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition, p.Offset, p.Timestamp = r.int32(), r.varint(), r.varint()
			p.LeaderEpoch, p.Metadata = r.int32(), r.nullString()
		}
	}
}

// commit_resp = throttle:varint topics:uvarint (topic partitions:uvarint
//
//	(partition:varint error:varint)*)*
func (w *writer) offsetCommitResponse(m *kmsg.OffsetCommitResponse) {
	w.varint(int64(m.ThrottleMillis))
	w.uvarint(uint64(len(m.Topics)))
	for i := range m.Topics {
		t := &m.Topics[i]
		w.topicName(t.Topic, t.TopicID)
		w.uvarint(uint64(len(t.Partitions)))
		for j := range t.Partitions {
			w.varint(int64(t.Partitions[j].Partition))
			w.varint(int64(t.Partitions[j].ErrorCode))
		}
	}
}

func (d *batchDecoder) offsetCommitResponse(m *kmsg.OffsetCommitResponse) {
	r := &d.r
	m.ThrottleMillis = r.int32()
	m.Topics = make([]kmsg.OffsetCommitResponseTopic, r.count(2))
	for i := range m.Topics {
		t := &m.Topics[i]
		t.Default()
		t.Topic, t.TopicID = r.topicName()
		t.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, r.count(2))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition, p.ErrorCode = r.int32(), r.int16()
		}
	}
}

// produceHeader writes, in format 4 on, what a Produce request partition's
// only batch header says of its records (decode.DropRecords keeps it):
//
//	header = 0 | 1 last_delta:varint first_ts:varint max_ts_delta:varint
//
// 0 when its records are not one v2 batch (or were dropped).
func (w *writer) produceHeader(records []byte) {
	var h decode.BatchHeader
	n := 0
	decode.ScanHeaders(records, func(x *decode.BatchHeader) { h, n = *x, n+1 })
	if n != 1 || h.Last < h.Base {
		w.byte(0)
		return
	}
	w.byte(1)
	w.varint(h.Last - h.Base)
	w.varint(h.FirstTimestamp)
	w.varint(h.MaxTimestamp - h.FirstTimestamp)
}
