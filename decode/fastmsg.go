package decode

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fast paths for the bodies a busy capture is made of: Produce, Fetch and
// OffsetCommit requests and responses in their flexible versions (Produce
// v9-v13, Fetch v12-v18, OffsetCommit v8-v10, what current clients send).
// kmsg reads them through helpers it keeps out of line and copies every
// string; these read
// the same fields into the same kmsg messages with the reads inlined, and
// share the strings that repeat from frame to frame (topic names, group and
// member ids, the commit metadata every partition carries): see interner.
//
// kmsg stays the reference and the fallback. A body is read here only when
// it has the common shape: no tagged fields anywhere (every tag section is
// the single byte 0), no per-record errors in a Produce response, no
// aborted transactions in a Fetch response. Anything else (another
// version, a tag, a length that does not fit, any byte short) gives up, and the caller reads the body with kmsg from the start:
// what is decoded, and whether it fails, is kmsg's. A body read here gives
// exactly the message kmsg gives (FuzzFastMessages holds them together);
// Options.ReferenceKmsg turns this off.

// message is a kmsg request or response.
type message interface{ ReadFrom([]byte) error }

// fastBody reads src, the body of a request or response of m's kind and
// version, into m when it can; it reports whether it did. m is a fresh or
// recycled message (its defaults set, its topics slice empty).
func fastBody(m message, src []byte, in *interner) bool {
	switch m := m.(type) {
	case *kmsg.ProduceRequest:
		return fastProduceRequest(m, src, in)
	case *kmsg.ProduceResponse:
		return fastProduceResponse(m, src, in)
	case *kmsg.OffsetCommitRequest:
		return fastCommitRequest(m, src, in)
	case *kmsg.OffsetCommitResponse:
		return fastCommitResponse(m, src, in)
	case *kmsg.FetchRequest:
		return fastFetchRequest(m, src, in)
	case *kmsg.FetchResponse:
		return fastFetchResponse(m, src, in)
	}
	return false
}

// readBody reads src into m: the fast way when it can (unless ref), else
// with kmsg.
func readBody(m message, src []byte, in *interner, ref bool) error {
	if !ref && fastBody(m, src, in) {
		return nil
	}
	return m.ReadFrom(src)
}

// flex is kbin.Reader (the primitives kmsg reads with, which inline)
// with what the fast readers add: arrays checked against the bytes left,
// interned strings, and empty tag sections. Once bad, every read gives
// zero and Src is nil.
type flex struct{ kbin.Reader }

// fail marks r bad: kbin keeps its flag unexported, and a Span of a
// negative length sets it.
func (r *flex) fail()     { r.Span(-1) }
func (r *flex) bad() bool { return !r.Ok() }

// uvarint is kbin.Reader.Uvarint with its one-byte case inlined (the
// whole does not inline): lengths and tags are almost always one byte.
func (r *flex) uvarint() uint32 {
	if len(r.Src) > 0 && r.Src[0] < 0x80 {
		v := uint32(r.Src[0])
		r.Src = r.Src[1:]
		return v
	}
	return r.Uvarint()
}

// arrayLen is a compact array length (negative: none), which must not
// exceed the bytes left, and whose items of min bytes each must fit.
func (r *flex) arrayLen(min int64) int32 {
	n := int32(r.uvarint()) - 1
	if r.bad() || len(r.Src) < int(n) || int64(n)*min > int64(len(r.Src)) {
		r.fail()
		return 0
	}
	return n
}

func (r *flex) str(in *interner) string {
	return in.str(r.Span(int(r.uvarint()) - 1))
}

func (r *flex) nullableStr(in *interner) *string {
	l := int(r.uvarint()) - 1
	if l < 0 || r.bad() {
		return nil
	}
	b := r.Span(l)
	if r.bad() {
		return nil
	}
	return in.ptr(b)
}

// noTags consumes an empty tag section; anything else is left to kmsg.
func (r *flex) noTags() bool {
	if len(r.Src) == 0 || r.Src[0] != 0 {
		r.fail()
		return false
	}
	r.Src = r.Src[1:]
	return true
}

// list reads a compact array of items of at least min bytes into s,
// reusing its items (each as it was: item sets every field), and reports
// whether it and every item read. An empty or null array leaves s empty.
func list[T any](r *flex, s []T, min int64, item func(*T) bool) ([]T, bool) {
	n := r.arrayLen(min)
	if r.bad() {
		return s, false
	}
	s = reuse(s[:0], int(max(n, 0)))
	for i := range s {
		if !item(&s[i]) {
			return s, false
		}
	}
	return s, true
}

// parts is list for a topic's partitions, which kmsg leaves nil when
// there are none (it reads them into a zeroed topic).
func parts[P any](r *flex, s []P, min int64, item func(*P) bool) ([]P, bool) {
	s, ok := list(r, s, min, item)
	if len(s) == 0 {
		s = nil
	}
	return s, ok
}

// topic reads a topic's name, or from version byID on its id.
func (r *flex) topic(in *interner, v, byID int16) (name string, id [16]byte) {
	if v < byID {
		return r.str(in), id
	}
	return "", r.Uuid()
}

// topicsMin is the least bytes of a topic: by id, 16 and two more.
func topicsMin(v, byID int16) int64 {
	if v >= byID {
		return 18
	}
	return 2
}

// done reads the message's closing tags, and only then sets its topics:
// given up, m's topics are as they came, for kmsg.
func done[T any](r *flex, ok bool, dst *[]T, ts []T) bool {
	if !ok || !r.noTags() {
		return false
	}
	*dst = ts
	return true
}

func fastProduceRequest(m *kmsg.ProduceRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 9 || v > 13 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	m.TransactionID = r.nullableStr(in)
	m.Acks = r.Int16()
	m.TimeoutMillis = r.Int32()
	ts, ok := list(&r, m.Topics, topicsMin(v, 13), func(t *kmsg.ProduceRequestTopic) (ok bool) {
		*t = kmsg.ProduceRequestTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 13)
		t.Partitions, ok = parts(&r, t.Partitions, 6, func(p *kmsg.ProduceRequestTopicPartition) bool {
			*p = kmsg.ProduceRequestTopicPartition{Partition: r.Int32(), Records: r.CompactNullableBytes()}
			return r.noTags()
		})
		return ok && r.noTags()
	})
	return done(&r, ok, &m.Topics, ts)
}

func fastProduceResponse(m *kmsg.ProduceResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 9 || v > 13 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	ts, ok := list(&r, m.Topics, topicsMin(v, 13), func(t *kmsg.ProduceResponseTopic) (ok bool) {
		*t = kmsg.ProduceResponseTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 13)
		t.Partitions, ok = parts(&r, t.Partitions, 33, func(p *kmsg.ProduceResponseTopicPartition) bool {
			*p = kmsg.ProduceResponseTopicPartition{Partition: r.Int32(), ErrorCode: r.Int16(), BaseOffset: r.Int64(),
				LogAppendTime: r.Int64(), LogStartOffset: r.Int64()}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1 // kmsg's defaults: no tag
			if r.arrayLen(6) > 0 || r.bad() {
				return false // per-record errors: kmsg's
			}
			p.ErrorMessage = r.nullableStr(in)
			return r.noTags()
		})
		return ok && r.noTags()
	})
	m.ThrottleMillis = r.Int32()
	return done(&r, ok, &m.Topics, ts)
}

func fastCommitRequest(m *kmsg.OffsetCommitRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 8 || v > 10 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	m.Group = r.str(in)
	m.Generation = r.Int32()
	m.MemberID = r.str(in)
	m.InstanceID = r.nullableStr(in)
	ts, ok := list(&r, m.Topics, topicsMin(v, 10), func(t *kmsg.OffsetCommitRequestTopic) (ok bool) {
		*t = kmsg.OffsetCommitRequestTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 10)
		t.Partitions, ok = parts(&r, t.Partitions, 18, func(p *kmsg.OffsetCommitRequestTopicPartition) bool {
			*p = kmsg.OffsetCommitRequestTopicPartition{Partition: r.Int32(), Offset: r.Int64(),
				Timestamp: -1, LeaderEpoch: r.Int32(), Metadata: r.nullableStr(in)} // Timestamp: kmsg's default (v1 only)
			return r.noTags()
		})
		return ok && r.noTags()
	})
	return done(&r, ok, &m.Topics, ts)
}

func fastCommitResponse(m *kmsg.OffsetCommitResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 8 || v > 10 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	m.ThrottleMillis = r.Int32()
	ts, ok := list(&r, m.Topics, topicsMin(v, 10), func(t *kmsg.OffsetCommitResponseTopic) (ok bool) {
		*t = kmsg.OffsetCommitResponseTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 10)
		t.Partitions, ok = parts(&r, t.Partitions, 6, func(p *kmsg.OffsetCommitResponseTopicPartition) bool {
			*p = kmsg.OffsetCommitResponseTopicPartition{Partition: r.Int32(), ErrorCode: r.Int16()}
			return r.noTags()
		})
		return ok && r.noTags()
	})
	return done(&r, ok, &m.Topics, ts)
}

func fastFetchRequest(m *kmsg.FetchRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 12 || v > 18 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	if v <= 14 {
		m.ReplicaID = r.Int32()
	}
	m.MaxWaitMillis = r.Int32()
	m.MinBytes = r.Int32()
	m.MaxBytes = r.Int32()
	m.IsolationLevel = r.Int8()
	m.SessionID = r.Int32()
	m.SessionEpoch = r.Int32()
	ts, ok := list(&r, m.Topics, topicsMin(v, 13), func(t *kmsg.FetchRequestTopic) (ok bool) {
		*t = kmsg.FetchRequestTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 13)
		t.Partitions, ok = parts(&r, t.Partitions, 32, func(p *kmsg.FetchRequestTopicPartition) bool {
			*p = kmsg.FetchRequestTopicPartition{Partition: r.Int32(), CurrentLeaderEpoch: r.Int32(), FetchOffset: r.Int64(),
				LastFetchedEpoch: r.Int32(), LogStartOffset: r.Int64(), PartitionMaxBytes: r.Int32(),
				HighWatermark: 1<<63 - 1} // HighWatermark: kmsg's default (a tag)
			return r.noTags()
		})
		return ok && r.noTags()
	})
	if !ok {
		return false
	}
	fs, ok := list(&r, m.ForgottenTopics, topicsMin(v, 13), func(f *kmsg.FetchRequestForgottenTopic) (ok bool) {
		*f = kmsg.FetchRequestForgottenTopic{}
		f.Topic, f.TopicID = r.topic(in, v, 13)
		f.Partitions, ok = parts(&r, nil, 4, func(p *int32) bool {
			*p = r.Int32()
			return !r.bad()
		})
		return ok && r.noTags()
	})
	m.Rack = r.str(in)
	if !done(&r, ok, &m.Topics, ts) {
		return false
	}
	m.ForgottenTopics = fs
	return true
}

func fastFetchResponse(m *kmsg.FetchResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 12 || v > 18 {
		return false
	}
	r := flex{kbin.Reader{Src: src}}
	m.ThrottleMillis = r.Int32()
	m.ErrorCode = r.Int16()
	m.SessionID = r.Int32()
	ts, ok := list(&r, m.Topics, topicsMin(v, 13), func(t *kmsg.FetchResponseTopic) (ok bool) {
		*t = kmsg.FetchResponseTopic{Partitions: t.Partitions}
		t.Topic, t.TopicID = r.topic(in, v, 13)
		t.Partitions, ok = parts(&r, t.Partitions, 37, func(p *kmsg.FetchResponseTopicPartition) bool {
			*p = kmsg.FetchResponseTopicPartition{}
			p.Default() // the tags' fields
			p.Partition = r.Int32()
			p.ErrorCode = r.Int16()
			p.HighWatermark = r.Int64()
			p.LastStableOffset = r.Int64()
			p.LogStartOffset = r.Int64()
			switch an := r.arrayLen(16); {
			case r.bad() || an > 0:
				return false // aborted transactions: kmsg's
			case an == 0:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{} // as kmsg has it
			}
			p.PreferredReadReplica = r.Int32()
			p.RecordBatches = r.CompactNullableBytes()
			return r.noTags()
		})
		return ok && r.noTags()
	})
	return done(&r, ok, &m.Topics, ts)
}

// reuse returns s with n items: its own while it has the capacity (as they
// are: the caller sets each), new ones after.
func reuse[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, n-cap(s))...)
}

// interner hands out one copy of each short string it has seen, and one
// *string for each nullable one, so that the names and ids every frame
// repeats are not allocated for each. Nothing writes through a message's
// *string (kmsg does not, nor does kwire), so sharing them is safe. It
// keeps at most internMax of each, of at most internLen bytes: past that
// strings are copied as kmsg copies them.
type interner struct {
	strs map[string]string
	ptrs map[string]*string
}

const (
	internMax = 4096
	internLen = 256
)

func (in *interner) str(b []byte) string {
	if s, ok := in.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= internLen && len(in.strs) < internMax {
		if in.strs == nil {
			in.strs = make(map[string]string)
		}
		in.strs[s] = s
	}
	return s
}

func (in *interner) ptr(b []byte) *string {
	if p, ok := in.ptrs[string(b)]; ok {
		return p
	}
	s := in.str(b)
	p := &s
	if len(b) <= internLen && len(in.ptrs) < internMax {
		if in.ptrs == nil {
			in.ptrs = make(map[string]*string)
		}
		in.ptrs[s] = p
	}
	return p
}
