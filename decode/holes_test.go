package decode

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

func fetchReq() *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.ReplicaID, r.MaxWaitMillis, r.MaxBytes = -1, 500, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "orders"
	for i := range int32(2) {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset = i, 100*int64(i)
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// fetchResp answers fetchReq: records bytes per partition (opaque to the
// decoder), high watermarks 1000 and 2000.
func fetchResp(records ...int) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "orders"
	for i, n := range records {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.HighWatermark, p.LastStableOffset = int32(i), 1000*int64(i+1), 1000*int64(i+1)
		p.RecordBatches = bytes.Repeat([]byte{byte(0x41 + i)}, n)
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// TestHoleInRecords checks that bytes not copied inside record data leave
// every other field decoded: a Fetch response's high watermarks and the
// other partition's records, a Produce request's acks. The partitions
// concerned are listed, their records nil.
func TestHoleInRecords(t *testing.T) {
	const v = 11
	fr := respFrame(fetchResp(6000, 300), v, 2)
	// The first partition's records start where its 'A's do.
	at := bytes.IndexByte(fr, 'A')
	pr := reqFrame(produceReq(-1, 5000), 9, 3, "p")
	pat := len(pr) - 5000
	cases := []struct {
		name  string
		steps []step
		// records: the hole bytes in record data (Stats.RecordsNotCopiedBytes).
		records int64
	}{
		{"fetch, hole inside the records", []step{
			req(reqFrame(fetchReq(), v, 2, "c")),
			resp(fr[:at+100]), uncopied(capture.ToClient, 4000), resp(fr[at+4100:]),
			req(reqFrame(produceReq(-1, 5000), 9, 3, "p")), resp(respFrame(produceResp(), 9, 3)),
		}, 4000},
		// The produce hole runs over the request's three closing tag
		// sections (v9 is flexible), which are not record data.
		{"fetch, two holes; produce, hole to the end", []step{
			req(reqFrame(fetchReq(), v, 2, "c")),
			resp(fr[:at+10]), uncopied(capture.ToClient, 10), resp(fr[at+20 : at+30]), uncopied(capture.ToClient, 5000), resp(fr[at+5030:]),
			req(pr[:pat+1]), uncopied(capture.ToServer, len(pr)-pat-1), resp(respFrame(produceResp(), 9, 3)),
		}, 5010 + int64(len(pr)-pat-1-3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, d, _ := feed(nil, newConn(capture.RolePort, true), 1000, tc.steps...)
			diff(t, "exchanges", []string{"Fetch v11 #2 seen", "Produce v9 #3 seen"}, summary(r))
			diff(t, "anomalies", []AnomalyKind(nil), r.kinds())
			f := r.ex[0].resp.(*kmsg.FetchResponse)
			ps := f.Topics[0].Partitions
			if ps[0].RecordBatches != nil || ps[0].HighWatermark != 1000 || ps[1].HighWatermark != 2000 || len(ps[1].RecordBatches) != 300 {
				t.Errorf("partitions: records %d/%d bytes, hwm %d/%d", len(ps[0].RecordBatches), len(ps[1].RecordBatches), ps[0].HighWatermark, ps[1].HighWatermark)
			}
			diff(t, "fetch not copied", []PartitionIndex{{0, 0}}, r.ex[0].NotCopied)
			if tc.name != "fetch, hole inside the records" {
				diff(t, "produce not copied", []PartitionIndex{{0, 0}}, r.ex[1].NotCopied)
			} else {
				diff(t, "produce not copied", []PartitionIndex(nil), r.ex[1].NotCopied)
			}
			if p := r.ex[1].req.(*kmsg.ProduceRequest); p.Acks != -1 {
				t.Errorf("produce acks %d", p.Acks)
			}
			if st := d.Stats(); st.NotCopiedFrames != 0 || st.Gaps != 0 || st.NotCopiedBytes == 0 || st.RecordsNotCopiedBytes != tc.records {
				t.Errorf("stats: %+v; want %d record bytes not copied", st, tc.records)
			}
		})
	}
}

// TestHoleOutsideRecords checks that bytes not copied outside record data
// (here: the second partition's header fields) lose the body, not the
// exchange nor the stream's sync; and that a hole in a header loses the
// frame but keeps the stream in sync.
func TestHoleOutsideRecords(t *testing.T) {
	const v = 11
	fr := respFrame(fetchResp(300, 300), v, 2)
	second := bytes.IndexByte(fr, 'B') - 60 // inside partition 1's fields
	steps := []step{
		req(reqFrame(fetchReq(), v, 2, "c")),
		resp(fr[:second]), uncopied(capture.ToClient, 40), resp(fr[second+40:]),
		req(reqFrame(heartbeatReq(1), 4, 3, "c")), resp(respFrame(heartbeatResp(0), 4, 3)),
	}
	hb := reqFrame(heartbeatReq(1), 4, 4, "c")
	steps = append(steps, req(hb[:6]), uncopied(capture.ToServer, len(hb)-6),
		req(reqFrame(heartbeatReq(1), 4, 5, "c")), resp(respFrame(heartbeatResp(0), 4, 4)), resp(respFrame(heartbeatResp(0), 4, 5)))
	r, d, _ := feed(nil, newConn(capture.RolePort, true), 0, steps...)
	diff(t, "exchanges", []string{"Fetch v11 #2 seen noresp", "Heartbeat v4 #3 seen", "Heartbeat v4 #5 seen"}, summary(r))
	if r.ex[0].RespErr != ErrNotCopied.Error() {
		t.Errorf("fetch response error %q", r.ex[0].RespErr)
	}
	diff(t, "anomalies", []AnomalyKind{AnomalyUnmatchedResponse}, r.kinds())
	if st := d.Stats(); st.NotCopiedFrames != 2 || st.Resyncs != 0 || st.Gaps != 0 || st.RecordsNotCopiedBytes != 0 {
		t.Errorf("stats: not copied frames %d, record bytes not copied %d, resyncs %d, gaps %d", st.NotCopiedFrames, st.RecordsNotCopiedBytes, st.Resyncs, st.Gaps)
	}
}

// TestHoleOverTags checks the closing tag sections: a hole from the last
// records to the frame's end passes when they are empty (three bytes), not
// when the partition carries a tagged field.
func TestHoleOverTags(t *testing.T) {
	const v = 12 // flexible
	for _, tagged := range []bool{false, true} {
		f := fetchResp(300, 3000)
		if tagged {
			f.Topics[0].Partitions[1].UnknownTags.Set(7, []byte{1, 2, 3})
		}
		fr := respFrame(f, v, 2)
		at := bytes.IndexByte(fr, 'B') + 100
		r, d, _ := feed(nil, newConn(capture.RolePort, true), 0,
			req(reqFrame(fetchReq(), v, 2, "c")), resp(fr[:at]), uncopied(capture.ToClient, len(fr)-at),
			req(reqFrame(heartbeatReq(1), 4, 3, "c")), resp(respFrame(heartbeatResp(0), 4, 3)))
		want := []string{"Fetch v12 #2 seen", "Heartbeat v4 #3 seen"}
		if tagged {
			want[0] += " noresp"
		}
		diff(t, "exchanges", want, summary(r))
		if !tagged {
			diff(t, "not copied", []PartitionIndex{{0, 1}}, r.ex[0].NotCopied)
			if got, want := d.Stats().RecordsNotCopiedBytes, int64(len(fr)-at-3); got != want {
				t.Errorf("record bytes not copied %d, want %d (the hole less the three closing tag sections)", got, want)
			}
		} else if d.Stats().NotCopiedFrames != 1 {
			t.Errorf("not copied frames %d", d.Stats().NotCopiedFrames)
		}
	}
}

// TestDropProduceRecords: with DropProduceRecords, Produce requests come
// without record bytes and hold no body while they wait, everything else
// as usual; with bytes not copied they are decoded as without the option.
func TestDropProduceRecords(t *testing.T) {
	pr := reqFrame(produceReq(-1, 5000), 9, 3, "p")
	pat := len(pr) - 5000
	steps := []step{
		req(pr), req(reqFrame(produceReq(1, 300), 9, 4, "p")),
		resp(respFrame(produceResp(), 9, 3)), resp(respFrame(produceResp(), 9, 4)),
		req(pr[:pat+1]), uncopied(capture.ToServer, len(pr)-pat-1), resp(respFrame(produceResp(), 9, 3)),
	}
	r, d, _ := feed(&Options{DropProduceRecords: true}, newConn(capture.RolePort, true), 1000, steps...)
	diff(t, "exchanges", []string{"Produce v9 #3 seen", "Produce v9 #4 seen", "Produce v9 #3 seen"}, summary(r))
	diff(t, "anomalies", []AnomalyKind(nil), r.kinds())
	for i, want := range []int16{-1, 1} {
		p := r.ex[i].req.(*kmsg.ProduceRequest)
		if p.Acks != want || p.Topics[0].Topic != "orders" || p.Topics[0].Partitions[0].Records != nil {
			t.Errorf("exchange %d: acks %d, topic %q, %d record bytes; want acks %d, orders, none",
				i, p.Acks, p.Topics[0].Topic, len(p.Topics[0].Partitions[0].Records), want)
		}
	}
	diff(t, "not copied", []PartitionIndex{{0, 0}}, r.ex[2].NotCopied)
	if st := d.Stats(); st.Exchanges != 3 || st.NotCopiedFrames != 0 {
		t.Errorf("stats: %+v", st)
	}
}

// TestHoleMidStream: an eBPF source attached to a broker whose
// connections are open already (a follower's, its Fetch parked before the
// probes came) delivers a response whose request it never saw, then a
// request and its response with the record data not copied (sendfile).
// The holed response is decoded once the stream's frames are found again:
// the unanswered one before it leads, length by length, to the response
// whose correlation id a request awaits.
func TestHoleMidStream(t *testing.T) {
	const v = 12
	first := respFrame(fetchResp(0), v, 0)
	fr := respFrame(fetchResp(357), v, 1)
	at := bytes.IndexByte(fr, 'A')
	r, d, _ := feed(nil, newConn(capture.RolePort, false), 0,
		resp(first), req(reqFrame(fetchReq(), v, 1, "broker-1-fetcher-0")),
		resp(fr[:at]), uncopied(capture.ToClient, 357), resp(fr[at+357:]),
		req(reqFrame(heartbeatReq(1), 4, 2, "c")), resp(respFrame(heartbeatResp(0), 4, 2)))
	diff(t, "exchanges", []string{"Fetch v12 #1 seen", "Heartbeat v4 #2 seen"}, summary(r))
	if len(r.ex) > 0 {
		diff(t, "not copied", []PartitionIndex{{0, 0}}, r.ex[0].NotCopied)
	}
	if st := d.Stats(); st.RecordsNotCopiedBytes != 357 || st.NotCopiedFrames != 0 {
		t.Errorf("record bytes not copied %d, frames cut %d; want 357, 0", st.RecordsNotCopiedBytes, st.NotCopiedFrames)
	}
}
