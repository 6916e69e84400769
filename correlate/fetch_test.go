package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

var ordersID = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// metadataResp names topic id ordersID "orders" (Metadata v12).
func metadataExchange(h *harness, at time.Duration) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 0, "10.0.0.8", 9092
	resp.Brokers = append(resp.Brokers, b)
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr("orders"), ordersID
	resp.Topics = append(resp.Topics, mt)
	h.ex(at, h.conn("10.0.0.1:5009", "10.0.0.8:9092"), "c-m1", req, resp)
}

func TestTopicIDFetch(t *testing.T) {
	tests := []struct {
		name          string
		metadataFirst bool
	}{
		{"metadata before fetches", true},
		{"metadata between fetches", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"orders": {0}}})
			if tt.metadataFirst {
				metadataExchange(h, 50*ms)
			}
			fc := h.conn("10.0.0.1:5001", "10.0.0.8:9092")
			f := fetchReqID(13, "", ordersID, map[int32]int64{0: 0})
			h.ex(time.Second, fc, "c-m1", f, fetchResp(f, 10, map[int32][]byte{0: batches(0, 3)}))
			if !tt.metadataFirst {
				if p := findPartition(h.c.Snapshot(), "g", idKey(ordersID), 0); p == nil || p.Records != 3 {
					t.Fatalf("before Metadata, partition %s/0 = %+v, want 3 records", idKey(ordersID), p)
				}
				metadataExchange(h, 2*time.Second)
			}
			f = fetchReqID(13, "", ordersID, map[int32]int64{0: 3})
			h.ex(3*time.Second, fc, "c-m1", f, fetchResp(f, 10, map[int32][]byte{0: batches(3, 2)}))

			s := h.c.Snapshot()
			g := findGroup(s, "g")
			if len(g.Partitions) != 1 {
				t.Fatalf("partitions = %+v, want orders/0 only", g.Partitions)
			}
			p := g.Partitions[0]
			got := []any{p.Topic, *p.Position, p.Records, *p.HighWatermark, *p.EndOffset, *p.PositionLag, *p.DeliveredTo, p.Owner}
			want := []any{"orders", 5, 5, 10, 10, 5, 5, "m1"}
			if d := diff(want, got); d != "" {
				t.Errorf("topic, position, records, hwm, end, position lag, delivered, owner (-want +got):\n%s", d)
			}
			if n := s.Stats.UnresolvedTopicIDs; n != 0 {
				t.Errorf("UnresolvedTopicIDs = %d, want 0", n)
			}
			m := s.Groups[0].Members[0]
			if len(m.Fetched) != 1 || m.Fetched[0].Topic != "orders" || m.Fetched[0].Records != 5 {
				t.Errorf("member fetched = %+v, want orders/0 with 5 records", m.Fetched)
			}
		})
	}
}

// TestFetchSession: an incremental fetch (KIP-227) omits the partitions
// whose offset did not change, but its response may carry them.
func TestFetchSession(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0, 1}}})
	fc := h.conn("10.0.0.1:5001", "10.0.0.8:9092")
	full := fetchReq(12, "t", map[int32]int64{0: 0, 1: 0})
	full.SessionID, full.SessionEpoch = 0, 0
	resp := fetchResp(full, 2, map[int32][]byte{0: batches(0, 2), 1: nil})
	resp.SessionID = 77
	h.ex(time.Second, fc, "c-m1", full, resp)

	inc := fetchReq(12, "t", map[int32]int64{0: 2})
	inc.SessionID, inc.SessionEpoch = 77, 1
	resp = fetchResp(inc, 3, map[int32][]byte{1: batches(0, 3)})
	resp.SessionID = 77
	h.ex(2*time.Second, fc, "c-m1", inc, resp)

	// Partition 1 is forgotten; a later response without it changes nothing.
	inc = fetchReq(12, "t", map[int32]int64{0: 2})
	inc.SessionID, inc.SessionEpoch = 77, 2
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "t", []int32{1}
	inc.ForgottenTopics = append(inc.ForgottenTopics, ft)
	h.ex(3*time.Second, fc, "c-m1", inc, fetchResp(inc, 2, map[int32][]byte{0: nil}))

	s := h.c.Snapshot()
	type row struct {
		P                 int32
		Position, Records int64
		Fetches           int64
	}
	var got []row
	for _, p := range findGroup(s, "g").Partitions {
		got = append(got, row{p.Partition, *p.Position, p.Records, p.Fetches})
	}
	want := []row{{0, 2, 2, 2}, {1, 3, 3, 2}} // partition 1: its 3 records delivered at epoch 1
	if d := diff(want, got); d != "" {
		t.Errorf("partitions (-want +got):\n%s", d)
	}
	if n := s.Stats.UnknownFetchSessions; n != 0 {
		t.Errorf("UnknownFetchSessions = %d, want 0", n)
	}
}

func TestReplicaFetchIgnored(t *testing.T) {
	h := newHarness(t, nil)
	f := fetchReq(11, "t", map[int32]int64{0: 0})
	f.ReplicaID = 2
	h.ex(0, h.conn("10.0.0.12:40000", "10.0.0.11:9092"), "broker-2", f, fetchResp(f, 1, map[int32][]byte{0: batches(0, 1)}))
	st := h.c.Stats()
	if st.ReplicaFetches != 1 || st.Fetches != 0 || len(h.c.Snapshot().Unattributed) != 0 {
		t.Errorf("stats = %+v, want one replica fetch and nothing else", st)
	}
}

// TestFetchRecordsNotCopied: a Fetch whose records an eBPF source did not
// copy (decode lists the partition, its RecordBatches nil) updates the high
// watermark and counts the response as not copied; what it delivered is
// unknown, so a commit above the fetch position is not judged a commit
// beyond what was fetched, as it is when the response is known empty.
func TestFetchRecordsNotCopied(t *testing.T) {
	for _, notCopied := range []bool{true, false} {
		h := newHarness(t, nil)
		stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
		c, cid := h.member1()
		if notCopied {
			h.notCopied = []decode.PartitionIndex{{Topic: 0, Partition: 0}}
		}
		h.fetch(100*ms, c, cid, 0, 0, 100, nil)
		h.commit(time.Second, c, cid, "m1", 1, 0, 100, 0)
		h.c.Close(base.Add(10 * time.Second))
		p := findPartition(h.c.Snapshot(), "g", "t", 0)
		hz := h.hazards(HazardCommitBeyondFetch)
		switch {
		case p == nil:
			t.Fatalf("not copied %v: no partition t/0", notCopied)
		case notCopied && (p.NotCopied != 1 || p.Records != 0 || *p.HighWatermark != 100 || len(hz) != 0):
			t.Errorf("not copied: fetch %+v, %d commit_beyond_fetch: want 1 not copied, hwm 100, no hazard", p.Fetch, len(hz))
		case !notCopied && (p.NotCopied != 0 || len(hz) != 1):
			t.Errorf("copied, empty: fetch %+v, %d commit_beyond_fetch: want 0 not copied, 1 hazard", p.Fetch, len(hz))
		}
	}
}

// TestFetchSessionClosedLate: a consumer closing cancels its in-flight
// incremental Fetch and closes the session (epoch -1) on another
// connection; the cancelled request, never answered, is handed over when
// its connection ends, after the close. It was sent while the session was
// open: not an unknown session (kgo against real Kafka 4.4 showed 2-3 per
// run). A request sent after the close is.
func TestFetchSessionClosedLate(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
	fc := h.conn("10.0.0.1:5001", "10.0.0.8:9092")
	full := fetchReq(12, "t", map[int32]int64{0: 0})
	full.SessionID, full.SessionEpoch = 0, 0
	resp := fetchResp(full, 2, map[int32][]byte{0: batches(0, 2)})
	resp.SessionID = 77
	h.ex(time.Second, fc, "c-m1", full, resp)

	closing := fetchReq(12, "t", nil)
	closing.SessionID, closing.SessionEpoch = 77, -1
	h.ex(3*time.Second, h.conn("10.0.0.1:5002", "10.0.0.8:9092"), "c-m1", closing, fetchResp(closing, 2, nil))

	cancelled := fetchReq(12, "t", map[int32]int64{0: 2})
	cancelled.SessionID, cancelled.SessionEpoch = 77, 1
	h.ex(2*time.Second, fc, "c-m1", cancelled, nil) // sent at 2 s, handed over after the close
	if n := h.c.Snapshot().Stats.UnknownFetchSessions; n != 0 {
		t.Errorf("after the cancelled Fetch: UnknownFetchSessions = %d, want 0", n)
	}

	late := fetchReq(12, "t", map[int32]int64{0: 2})
	late.SessionID, late.SessionEpoch = 77, 2
	h.ex(4*time.Second, fc, "c-m1", late, nil) // sent after the close
	if n := h.c.Snapshot().Stats.UnknownFetchSessions; n != 1 {
		t.Errorf("after a Fetch in the closed session: UnknownFetchSessions = %d, want 1", n)
	}
}
