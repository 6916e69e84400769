package decode

import (
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fastKinds are the messages fastmsg.go reads, by the index a fuzz input
// chooses: a fresh one of the version asked for, and its versions.
var fastKinds = []struct {
	name     string
	new      func(v int16) message
	min, max int16
}{
	{"ProduceRequest", func(v int16) message { m := kmsg.NewPtrProduceRequest(); m.Version = v; return m }, 9, 13},
	{"ProduceResponse", func(v int16) message { m := kmsg.NewPtrProduceResponse(); m.Version = v; return m }, 9, 13},
	{"OffsetCommitRequest", func(v int16) message { m := kmsg.NewPtrOffsetCommitRequest(); m.Version = v; return m }, 8, 10},
	{"OffsetCommitResponse", func(v int16) message { m := kmsg.NewPtrOffsetCommitResponse(); m.Version = v; return m }, 8, 10},
	{"FetchRequest", func(v int16) message { m := kmsg.NewPtrFetchRequest(); m.Version = v; return m }, 12, 18},
	{"FetchResponse", func(v int16) message { m := kmsg.NewPtrFetchResponse(); m.Version = v; return m }, 12, 18},
}

// fastSeeds are bodies of every kind and version fastmsg.go reads, as kmsg
// writes them: the common shape, and shapes it leaves to kmsg (tags,
// per-record errors). kind indexes fastKinds; fast says whether fastBody
// must take it.
func fastSeeds() (out []struct {
	kind    int
	version int16
	body    []byte
	fast    bool
}) {
	add := func(kind int, v int16, fast bool, m interface{ AppendTo([]byte) []byte }) {
		out = append(out, struct {
			kind    int
			version int16
			body    []byte
			fast    bool
		}{kind, v, m.AppendTo(nil), fast})
	}
	str := func(s string) *string { return &s }
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	batch := make([]byte, 70)
	for i := range batch {
		batch[i] = byte(i)
	}
	for v := int16(9); v <= 13; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 30000
		for i, name := range []string{"orders", "payments"} {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = name, id
			t.TopicID[0] = byte(i)
			for p := range int32(3) {
				tp := kmsg.NewProduceRequestTopicPartition()
				tp.Partition = p
				switch p {
				case 0:
					tp.Records = batch
				case 1:
					tp.Records = []byte{} // empty, not null
				}
				t.Partitions = append(t.Partitions, tp)
			}
			req.Topics = append(req.Topics, t)
		}
		add(0, v, true, req)
		req.TransactionID = str("txn-1")
		add(0, v, true, req)
		req.Topics[1].Partitions = nil
		add(0, v, true, req)
		req.Topics[0].UnknownTags.Set(7, []byte("x"))
		add(0, v, false, req)

		resp := kmsg.NewPtrProduceResponse()
		resp.Version, resp.ThrottleMillis = v, 5
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = "orders", id
		for p := range int32(2) {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = p, 100+int64(p), -1, 7
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
		add(1, v, true, resp)
		resp.Topics[0].Partitions[1].ErrorCode = 6
		resp.Topics[0].Partitions[1].ErrorMessage = str("not leader")
		add(1, v, true, resp)
		resp.Topics[0].Partitions[1].ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 3, ErrorMessage: str("bad")}}
		add(1, v, false, resp)
		resp.Topics[0].Partitions[1].ErrorRecords = nil
		if v >= 10 {
			resp.Topics[0].Partitions[1].CurrentLeader.LeaderID = 2 // a tag
			add(1, v, false, resp)
		}
	}
	for v := int16(8); v <= 10; v++ {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation, req.MemberID = v, "group", 4, "member-1-abc"
		for i, name := range []string{"orders", "payments"} {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = name, id
			t.TopicID[0] = byte(i)
			for p := range int32(3) {
				tp := kmsg.NewOffsetCommitRequestTopicPartition()
				tp.Partition, tp.Offset, tp.LeaderEpoch = p, 1000+int64(p), 2
				if p != 1 {
					tp.Metadata = str("member-1-abc")
				}
				t.Partitions = append(t.Partitions, tp)
			}
			req.Topics = append(req.Topics, t)
		}
		add(2, v, true, req)
		req.InstanceID = str("instance-1")
		add(2, v, true, req)
		req.UnknownTags.Set(1, nil)
		add(2, v, false, req)

		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = v
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic, t.TopicID = "orders", id
		for p := range int32(3) {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p
			if p == 2 {
				rp.ErrorCode = 22
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
		add(3, v, true, resp)
		resp.Topics = nil
		add(3, v, true, resp)
	}
	for v := int16(12); v <= 18; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.IsolationLevel, req.SessionID, req.SessionEpoch = v, 500, 1, 1, 77, 3
		req.Rack = "rack-a"
		for i, name := range []string{"orders", "payments"} {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = name, id
			t.TopicID[0] = byte(i)
			for p := range int32(3) {
				tp := kmsg.NewFetchRequestTopicPartition()
				tp.Partition, tp.FetchOffset, tp.CurrentLeaderEpoch, tp.PartitionMaxBytes = p, 500+int64(p), 1, 1<<20
				t.Partitions = append(t.Partitions, tp)
			}
			req.Topics = append(req.Topics, t)
		}
		add(4, v, true, req)
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = "gone", id, []int32{4, 5}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
		add(4, v, true, req)
		req.ClusterID = str("cluster") // a tag
		add(4, v, false, req)

		resp := kmsg.NewPtrFetchResponse()
		resp.Version, resp.SessionID = v, 77
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = "orders", id
		for p := range int32(3) {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p, 900, 900, 3
			switch p {
			case 0:
				rp.RecordBatches = batch
			case 1:
				rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{} // empty, not null
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
		add(5, v, true, resp)
		resp.Topics[0].Partitions[2].AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 9, FirstOffset: 10}}
		add(5, v, false, resp)
		resp.Topics[0].Partitions[2].AbortedTransactions = nil
		resp.Topics[0].Partitions[2].DivergingEpoch.Epoch = 4 // a tag
		add(5, v, false, resp)
	}
	return out
}

// TestFastBodySeeds: every seed decodes the same with and without the
// fast path, and the fast path takes those it must (so that the fuzz
// target compares something).
func TestFastBodySeeds(t *testing.T) {
	for i, s := range fastSeeds() {
		k := fastKinds[s.kind]
		var in interner
		if got := fastBody(k.new(s.version), s.body, &in); got != s.fast {
			t.Errorf("seed %d (%s v%d): fast path took it: %v, want %v", i, k.name, s.version, got, s.fast)
		}
		checkFastBody(t, s.kind, s.version, s.body, &in)
	}
}

// FuzzFastMessages holds fastmsg.go to kmsg: an arbitrary body of one of
// its kinds and any version must decode with readBody exactly as with
// kmsg alone (the same error or none, the same message), both into a
// fresh message and into a recycled one, and the strings must not alias
// the body.
func FuzzFastMessages(f *testing.F) {
	for _, s := range fastSeeds() {
		f.Add(uint8(s.kind), s.version, s.body)
	}
	var in interner // shared, as a decoder's is
	f.Fuzz(func(t *testing.T, kind uint8, version int16, body []byte) {
		checkFastBody(t, int(kind)%len(fastKinds), version%16, slices.Clone(body), &in)
	})
}

func checkFastBody(t *testing.T, kind int, version int16, body []byte, in *interner) {
	t.Helper()
	k := fastKinds[kind]
	ref := k.new(version)
	refErr := ref.ReadFrom(body)
	fast := k.new(version)
	fastErr := readBody(fast, body, in, false)
	if (refErr == nil) != (fastErr == nil) {
		t.Fatalf("%s v%d: kmsg: %v, fast: %v", k.name, version, refErr, fastErr)
	}
	if refErr != nil {
		return
	}
	if !reflect.DeepEqual(ref, fast) {
		t.Fatalf("%s v%d: decoded differently:\nkmsg %+v\nfast %+v", k.name, version, ref, fast)
	}

	// Recycled: a message that held a larger one, given back and taken
	// again as the decoder does, then read both ways.
	var sp spares
	refR, fastR := recycled(&sp, kind, version), recycled(&sp, kind, version)
	refErr, fastErr = refR.ReadFrom(body), readBody(fastR, body, in, false)
	if refErr != nil || fastErr != nil {
		t.Fatalf("%s v%d recycled: kmsg: %v, fast: %v (fresh: no error)", k.name, version, refErr, fastErr)
	}
	if !reflect.DeepEqual(refR, fastR) {
		t.Fatalf("%s v%d recycled: decoded differently:\nkmsg %+v\nfast %+v", k.name, version, refR, fastR)
	}
	// And once more, into what these two were recycled to.
	spare(&sp, refR)
	spare(&sp, fastR)
	fastR, refR = recycled(&sp, kind, version), recycled(&sp, kind, version)
	refErr, fastErr = refR.ReadFrom(body), readBody(fastR, body, in, false)
	if refErr != nil || fastErr != nil || !reflect.DeepEqual(refR, fastR) {
		t.Fatalf("%s v%d recycled twice: kmsg %v %+v\nfast %v %+v", k.name, version, refErr, refR, fastErr, fastR)
	}

	// Strings are copies: overwriting the body changes only what aliases
	// it in both (records), so they stay equal.
	for i := range body {
		body[i] = 0xa5
	}
	if !reflect.DeepEqual(ref, fast) {
		t.Fatalf("%s v%d: a string aliases the body:\nkmsg %+v\nfast %+v", k.name, version, ref, fast)
	}
}

// recycled returns a message of kind from sp, or else one that decoded a
// seed of its kind, recycled and taken back as spares does it.
func recycled(sp *spares, kind int, version int16) message {
	if m := takeKind(sp, kind); m != nil {
		m.(interface{ SetVersion(int16) }).SetVersion(version)
		return m
	}
	for _, s := range fastSeeds() {
		if s.kind != kind {
			continue
		}
		m := fastKinds[kind].new(s.version)
		if m.ReadFrom(s.body) != nil {
			continue
		}
		spare(sp, m)
		got := takeKind(sp, kind)
		got.(interface{ SetVersion(int16) }).SetVersion(version)
		return got
	}
	panic("no seed of kind")
}

// takeKind takes a spare message of kind from sp, or returns nil.
func takeKind(sp *spares, kind int) message {
	var n int
	switch kind {
	case 0:
		n = len(sp.produceReq)
	case 1:
		n = len(sp.produceResp)
	case 2:
		n = len(sp.commitReq)
	case 3:
		n = len(sp.commitResp)
	case 4:
		n = len(sp.fetchReq)
	case 5:
		n = len(sp.fetchResp)
	}
	if n == 0 {
		return nil
	}
	key := []int16{0, 0, 8, 8, 1, 1}[kind]
	if kind%2 == 0 {
		return sp.request(key)
	}
	return sp.response(key)
}

// BenchmarkBody reads the common-shape seeds with kmsg and with the fast
// path, into recycled messages as the decoder does.
func BenchmarkBody(b *testing.B) {
	for _, way := range []struct {
		name string
		ref  bool
	}{{"kmsg", true}, {"fast", false}} {
		for kind := range fastKinds {
			var body []byte
			var version int16
			for _, s := range fastSeeds() {
				if s.kind == kind && s.fast {
					body, version = s.body, s.version
				}
			}
			b.Run(way.name+"/"+fastKinds[kind].name, func(b *testing.B) {
				var sp spares
				sp.ref = way.ref
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					m := recycled(&sp, kind, version)
					if err := readBody(m, body, &sp.in, sp.ref); err != nil {
						b.Fatal(err)
					}
					spare(&sp, m)
				}
			})
		}
	}
}

// spare gives m back to sp.
func spare(sp *spares, m message) {
	if req, ok := m.(kmsg.Request); ok {
		sp.recycle(req, nil)
	} else {
		sp.recycle(nil, m.(kmsg.Response))
	}
}
