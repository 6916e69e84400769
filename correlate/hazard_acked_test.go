package correlate

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAckedRecordsLost: acknowledgements that only grow (the usual case,
// many producers interleaved, more runs than maxAckedRuns) tell nothing;
// a new leader answering
// offsets another broker acknowledged takes them over: one
// acked_records_lost per client that had them, for exactly its records.
func TestAckedRecordsLost(t *testing.T) {
	h := newHarness(t, nil)
	produce := func(at time.Duration, client, broker string, base int64, n int) {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, 1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewProduceRequestTopicPartition()
		for i := range n { // a plain producer's: no producer id
			b := kmsg.RecordBatch{FirstOffset: int64(i), Magic: 2, NumRecords: 1, Records: []byte{0}, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
			b.Length = int32(len(b.AppendTo(nil)) - 12)
			rp.Records = b.AppendTo(rp.Records)
		}
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrProduceResponse()
		st := kmsg.NewProduceResponseTopic()
		st.Topic = "orders"
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.BaseOffset, sp.LogAppendTime = base, -1
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		h.ex(at, h.conn("10.0.0.1:"+fmt.Sprint(5000+len(client)), broker), client, req, resp)
	}
	// 100 producers, one record each, in turn: more runs than kept.
	for i := range 100 {
		produce(time.Duration(i)*time.Millisecond, fmt.Sprintf("p%d", i), "10.0.0.9:9092", int64(i), 1)
	}
	lost := func() map[string]string {
		got := map[string]string{}
		for _, ev := range h.hazards() {
			if ev.Kind == HazardAckedRecordsLost {
				got[ev.ClientID] = fmt.Sprintf("%d..%d %d", *ev.FromOffset, *ev.ToOffset, *ev.Skipped)
			}
		}
		return got
	}
	if got := lost(); len(got) != 0 {
		t.Fatalf("acked_records_lost %v while the log only grew on one broker", got)
	}
	// The new leader gives 95.. on: p95..p99's records are gone.
	produce(time.Second, "next", "10.0.0.8:9092", 95, 3)
	got := lost()
	want := map[string]string{}
	for i := 95; i < 100; i++ {
		want[fmt.Sprintf("p%d", i)] = fmt.Sprintf("%d..%d 1", i, i)
	}
	if d := diff(want, got); d != "" {
		t.Errorf("acked_records_lost by client (-want +got):\n%s", d)
	}
}
