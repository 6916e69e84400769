package decode

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fast paths for the bodies a busy capture is made of: Produce, Fetch and
// OffsetCommit requests and responses in their flexible versions (Produce
// v9-v13, Fetch v12-v18, OffsetCommit v8-v10, what current clients send). kmsg reads them
// through helpers it keeps out of line and copies every string; these read
// the same fields into the same kmsg messages with the reads inlined, and
// share the strings that repeat from frame to frame (topic names, group and
// member ids, the commit metadata every partition carries): see interner.
//
// kmsg stays the reference and the fallback. A body is read here only when
// it has the common shape: no tagged fields anywhere (every tag section is
// the single byte 0), no per-record errors in a Produce response, no
// aborted transactions in a Fetch response. Anything
// else (another version, a tag, a length that does not fit, any byte
// short) gives up, and the caller reads the body with kmsg from the start:
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

// flex reads the flexible encoding the way kbin.Reader does, inlined:
// once bad, every read gives zero and src is nil.
type flex struct {
	src []byte
	bad bool
}

func (r *flex) fail() { r.bad, r.src = true, nil }

func (r *flex) i16() int16 {
	if len(r.src) < 2 {
		r.fail()
		return 0
	}
	v := int16(uint16(r.src[0])<<8 | uint16(r.src[1]))
	r.src = r.src[2:]
	return v
}

func (r *flex) i8() int8 {
	if len(r.src) < 1 {
		r.fail()
		return 0
	}
	v := int8(r.src[0])
	r.src = r.src[1:]
	return v
}

func (r *flex) i32() int32 {
	if len(r.src) < 4 {
		r.fail()
		return 0
	}
	s := r.src[:4]
	v := int32(uint32(s[0])<<24 | uint32(s[1])<<16 | uint32(s[2])<<8 | uint32(s[3]))
	r.src = r.src[4:]
	return v
}

func (r *flex) i64() int64 {
	if len(r.src) < 8 {
		r.fail()
		return 0
	}
	s := r.src[:8]
	v := uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
	r.src = r.src[8:]
	return int64(v)
}

func (r *flex) uuid() (u [16]byte) {
	if len(r.src) < 16 {
		r.fail()
		return u
	}
	copy(u[:], r.src)
	r.src = r.src[16:]
	return u
}

func (r *flex) uvarint() uint32 {
	if len(r.src) > 0 && r.src[0] < 0x80 {
		v := uint32(r.src[0])
		r.src = r.src[1:]
		return v
	}
	v, n := kbin.Uvarint(r.src)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.src = r.src[n:]
	return v
}

// span is kbin.Reader.Span: the next l bytes, aliasing src.
func (r *flex) span(l int) []byte {
	if l < 0 || len(r.src) < l {
		r.fail()
		return nil
	}
	s := r.src[:l:l]
	r.src = r.src[l:]
	return s
}

// arrayLen is a compact array length (negative: none), which must not
// exceed the bytes left, and whose items of min bytes each must fit.
func (r *flex) arrayLen(min int64) int32 {
	n := int32(r.uvarint()) - 1
	if r.bad || len(r.src) < int(n) || int64(n)*min > int64(len(r.src)) {
		r.fail()
		return 0
	}
	return n
}

func (r *flex) str(in *interner) string {
	return in.str(r.span(int(r.uvarint()) - 1))
}

func (r *flex) nullableStr(in *interner) *string {
	l := int(r.uvarint()) - 1
	if l < 0 || r.bad {
		return nil
	}
	b := r.span(l)
	if r.bad {
		return nil
	}
	return in.ptr(b)
}

func (r *flex) nullableBytes() []byte {
	l := int(r.uvarint()) - 1
	if l < 0 || r.bad {
		return nil
	}
	return r.span(l)
}

// noTags consumes an empty tag section; anything else is left to kmsg.
func (r *flex) noTags() bool {
	if len(r.src) == 0 || r.src[0] != 0 {
		r.fail()
		return false
	}
	r.src = r.src[1:]
	return true
}

func fastProduceRequest(m *kmsg.ProduceRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 9 || v > 13 {
		return false
	}
	r := flex{src: src}
	m.TransactionID = r.nullableStr(in)
	m.Acks = r.i16()
	m.TimeoutMillis = r.i32()
	min := int64(2)
	if v >= 13 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = reuse(ts, int(n))
	}
	for i := range ts {
		t := &ts[i]
		*t = kmsg.ProduceRequestTopic{Partitions: t.Partitions[:0]} // reused, or new
		if v <= 12 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(6)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = reuse(t.Partitions, int(pn))
		} else {
			t.Partitions = nil // as kmsg leaves it
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.ProduceRequestTopicPartition{}
			p.Partition = r.i32()
			p.Records = r.nullableBytes()
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	if !r.noTags() {
		return false
	}
	m.Topics = ts // only now: given up, m's topics are as they came
	return true
}

func fastProduceResponse(m *kmsg.ProduceResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 9 || v > 13 {
		return false
	}
	r := flex{src: src}
	min := int64(2)
	if v >= 13 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = reuse(ts, int(n))
	}
	for i := range ts {
		t := &ts[i]
		*t = kmsg.ProduceResponseTopic{Partitions: t.Partitions[:0]} // reused, or new
		if v <= 12 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(33)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = reuse(t.Partitions, int(pn))
		} else {
			t.Partitions = nil // as kmsg leaves it
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.ProduceResponseTopicPartition{}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1 // kmsg's defaults: no tag
			p.Partition = r.i32()
			p.ErrorCode = r.i16()
			p.BaseOffset = r.i64()
			p.LogAppendTime = r.i64()
			p.LogStartOffset = r.i64()
			if r.arrayLen(6) > 0 || r.bad {
				return false // per-record errors: kmsg's
			}
			p.ErrorMessage = r.nullableStr(in)
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	m.ThrottleMillis = r.i32()
	if !r.noTags() {
		return false
	}
	m.Topics = ts
	return true
}

func fastCommitRequest(m *kmsg.OffsetCommitRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 8 || v > 10 {
		return false
	}
	r := flex{src: src}
	m.Group = r.str(in)
	m.Generation = r.i32()
	m.MemberID = r.str(in)
	m.InstanceID = r.nullableStr(in)
	min := int64(2)
	if v >= 10 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = reuse(ts, int(n))
	}
	for i := range ts {
		t := &ts[i]
		*t = kmsg.OffsetCommitRequestTopic{Partitions: t.Partitions[:0]} // reused, or new
		if v <= 9 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(18)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = reuse(t.Partitions, int(pn))
		} else {
			t.Partitions = nil // as kmsg leaves it
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.OffsetCommitRequestTopicPartition{}
			p.Timestamp = -1 // kmsg's default: v1 only
			p.Partition = r.i32()
			p.Offset = r.i64()
			p.LeaderEpoch = r.i32()
			p.Metadata = r.nullableStr(in)
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	if !r.noTags() {
		return false
	}
	m.Topics = ts
	return true
}

func fastCommitResponse(m *kmsg.OffsetCommitResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 8 || v > 10 {
		return false
	}
	r := flex{src: src}
	m.ThrottleMillis = r.i32()
	min := int64(2)
	if v >= 10 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = reuse(ts, int(n))
	}
	for i := range ts {
		t := &ts[i]
		*t = kmsg.OffsetCommitResponseTopic{Partitions: t.Partitions[:0]} // reused, or new
		if v <= 9 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(6)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = reuse(t.Partitions, int(pn))
		} else {
			t.Partitions = nil // as kmsg leaves it
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.OffsetCommitResponseTopicPartition{}
			p.Partition = r.i32()
			p.ErrorCode = r.i16()
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	if !r.noTags() {
		return false
	}
	m.Topics = ts
	return true
}

func fastFetchRequest(m *kmsg.FetchRequest, src []byte, in *interner) bool {
	v := m.Version
	if v < 12 || v > 18 {
		return false
	}
	r := flex{src: src}
	if v <= 14 {
		m.ReplicaID = r.i32()
	}
	m.MaxWaitMillis = r.i32()
	m.MinBytes = r.i32()
	m.MaxBytes = r.i32()
	m.IsolationLevel = r.i8()
	m.SessionID = r.i32()
	m.SessionEpoch = r.i32()
	min := int64(2)
	if v >= 13 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = append(ts, make([]kmsg.FetchRequestTopic, n)...) // Fetch topics are not reused (recycle.go)
	}
	for i := range ts {
		t := &ts[i]
		if v <= 12 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(32)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = make([]kmsg.FetchRequestTopicPartition, pn)
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.HighWatermark = 1<<63 - 1 // kmsg's default: a tag
			p.Partition = r.i32()
			p.CurrentLeaderEpoch = r.i32()
			p.FetchOffset = r.i64()
			p.LastFetchedEpoch = r.i32()
			p.LogStartOffset = r.i64()
			p.PartitionMaxBytes = r.i32()
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	n = r.arrayLen(min)
	if r.bad {
		return false
	}
	fs := m.ForgottenTopics[:0]
	if n > 0 {
		fs = append(fs, make([]kmsg.FetchRequestForgottenTopic, n)...)
	}
	for i := range fs {
		f := &fs[i]
		if v <= 12 {
			f.Topic = r.str(in)
		} else {
			f.TopicID = r.uuid()
		}
		pn := r.arrayLen(4)
		if r.bad {
			return false
		}
		if pn > 0 {
			f.Partitions = make([]int32, pn)
		}
		for j := range f.Partitions {
			f.Partitions[j] = r.i32()
		}
		if !r.noTags() {
			return false
		}
	}
	m.Rack = r.str(in)
	if !r.noTags() {
		return false
	}
	m.Topics, m.ForgottenTopics = ts, fs
	return true
}

func fastFetchResponse(m *kmsg.FetchResponse, src []byte, in *interner) bool {
	v := m.Version
	if v < 12 || v > 18 {
		return false
	}
	r := flex{src: src}
	m.ThrottleMillis = r.i32()
	m.ErrorCode = r.i16()
	m.SessionID = r.i32()
	min := int64(2)
	if v >= 13 {
		min = 18
	}
	n := r.arrayLen(min)
	if r.bad {
		return false
	}
	ts := m.Topics[:0]
	if n > 0 {
		ts = append(ts, make([]kmsg.FetchResponseTopic, n)...)
	}
	for i := range ts {
		t := &ts[i]
		if v <= 12 {
			t.Topic = r.str(in)
		} else {
			t.TopicID = r.uuid()
		}
		pn := r.arrayLen(37)
		if r.bad {
			return false
		}
		if pn > 0 {
			t.Partitions = make([]kmsg.FetchResponseTopicPartition, pn)
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Default() // the tags' fields
			p.Partition = r.i32()
			p.ErrorCode = r.i16()
			p.HighWatermark = r.i64()
			p.LastStableOffset = r.i64()
			p.LogStartOffset = r.i64()
			switch an := r.arrayLen(16); {
			case r.bad || an > 0:
				return false // aborted transactions: kmsg's
			case an == 0:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{} // as kmsg has it
			}
			p.PreferredReadReplica = r.i32()
			p.RecordBatches = r.nullableBytes()
			if !r.noTags() {
				return false
			}
		}
		if !r.noTags() {
			return false
		}
	}
	if !r.noTags() {
		return false
	}
	m.Topics = ts
	return true
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
