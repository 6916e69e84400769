package correlate

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetFetchNone answers an OffsetFetch (v8) of g for t/p: no committed
// offset (-1).
func (h *harness) offsetFetchNone(at time.Duration, client, cid string, p int32) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	req.Groups = append(req.Groups, rg)
	resp := kmsg.NewPtrOffsetFetchResponse()
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = "g"
	rt := kmsg.NewOffsetFetchResponseGroupTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	rp.Partition, rp.Offset = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	g.Topics = append(g.Topics, rt)
	resp.Groups = append(resp.Groups, g)
	h.ex(at, h.conn(client, "10.0.0.9:9092"), cid, req, resp)
}

// listOffsets asks t/p's offset at ts (-1 latest, -2 earliest): off.
func (h *harness) listOffsets(at time.Duration, client, cid string, p int32, ts, off int64) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 4, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrListOffsetsResponse()
	st := kmsg.NewListOffsetsResponseTopic()
	st.Topic = "t"
	sp := kmsg.NewListOffsetsResponseTopicPartition()
	sp.Partition, sp.Offset = p, off
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	h.ex(at, h.conn(client, "10.0.0.8:9092"), cid, req, resp)
}

// outOfRange fetches t/p from off: OFFSET_OUT_OF_RANGE.
func (h *harness) outOfRange(at time.Duration, client, cid string, p int32, off, logStart, hwm int64) {
	req := fetchReq(12, "t", map[int32]int64{p: off})
	resp := fetchResp(req, hwm, map[int32][]byte{p: nil})
	resp.Topics[0].Partitions[0].ErrorCode = kerr.OffsetOutOfRange.Code
	resp.Topics[0].Partitions[0].LogStartOffset = logStart
	h.ex(at, h.conn(client, "10.0.0.8:9092"), cid, req, resp)
}

func TestHazardOffsetReset(t *testing.T) {
	tests := []struct {
		name string
		run  func(h *harness, c, cid string)
		want []hazardView
	}{
		{"no committed offset, latest", func(h *harness, c, cid string) {
			h.offsetFetchNone(100*ms, c, cid, 0)
			h.listOffsets(110*ms, c, cid, 0, -1, 200)
			req := fetchReq(12, "t", map[int32]int64{0: 200})
			resp := fetchResp(req, 200, map[int32][]byte{0: nil})
			resp.Topics[0].Partitions[0].LogStartOffset = 150
			h.ex(120*ms, h.conn(c, "10.0.0.8:9092"), cid, req, resp)
		}, []hazardView{{Kind: HazardOffsetReset, Severity: SeverityInfo, Group: "g", Topic: "t", Partition: 0,
			Member: "m1", Offset: -1, Previous: -1, From: -1, To: 200, Skipped: 50, Replayed: -1}}},
		{"deleted under a lagging group", func(h *harness, c, cid string) {
			h.outOfRange(100*ms, c, cid, 0, 50, 150, 200)
			h.outOfRange(150*ms, c, cid, 0, 50, 150, 200) // retried: the same reset
			h.listOffsets(200*ms, c, cid, 0, -2, 150)
			h.fetch(300*ms, c, cid, 0, 150, 200, batchOf(150, 50, false))
		}, []hazardView{{Kind: HazardOffsetReset, Severity: SeverityCritical, Group: "g", Topic: "t", Partition: 0,
			Member: "m1", Offset: -1, Previous: -1, From: 50, To: 150, Skipped: 100, Replayed: -1}}},
		{"past the high watermark, earliest", func(h *harness, c, cid string) {
			h.outOfRange(100*ms, c, cid, 0, 500, 0, 100)
			h.listOffsets(200*ms, c, cid, 0, -2, 0)
			h.fetch(300*ms, c, cid, 0, 0, 100, batchOf(0, 100, false))
		}, []hazardView{{Kind: HazardOffsetReset, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0,
			Member: "m1", Offset: -1, Previous: -1, From: 500, To: 0, Skipped: -1, Replayed: 100}}},
		{"past the high watermark, latest", func(h *harness, c, cid string) {
			h.outOfRange(100*ms, c, cid, 0, 500, 0, 100)
			h.listOffsets(200*ms, c, cid, 0, -1, 100)
			h.fetch(300*ms, c, cid, 0, 100, 100, nil)
		}, []hazardView{{Kind: HazardOffsetReset, Severity: SeverityInfo, Group: "g", Topic: "t", Partition: 0,
			Member: "m1", Offset: -1, Previous: -1, From: 500, To: 100, Skipped: -1, Replayed: -1}}},
		{"ListOffsets without a lost position", func(h *harness, c, cid string) {
			h.listOffsets(200*ms, c, cid, 0, -1, 100)
			h.fetch(300*ms, c, cid, 0, 100, 100, nil)
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
			c, cid := h.member1()
			tt.run(h, c, cid)
			if d := diff(tt.want, h.hazardViews(HazardOffsetReset)); d != "" {
				t.Errorf("offset_reset (-want +got):\n%s", d)
			}
		})
	}
}

func TestHazardNonOwnerFetch(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
	c1, c2 := "10.0.0.1:5000", "10.0.0.2:5000"
	h.fetch(100*ms, c2, "c-m2", 1, 0, 10, batchOf(0, 10, false))
	for s := time.Duration(3); s <= 15; s += 3 {
		h.ex(s*time.Second, h.conn(c1, "10.0.0.9:9092"), "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(0))
	}
	// m2 froze at 100ms; its session ran out at 10.1s. A Fetch it sent
	// before is answered late: in flight, not a hazard.
	h.fetch(50*ms, c2, "c-m2", 1, 10, 12, batchOf(10, 2, false))
	h.ex(16*time.Second, h.conn(c1, "10.0.0.9:9092"), "c-m1", joinReq(9, "g", "m1", consumerMeta(1, "t")),
		joinResp(0, 2, "m1", "m1", map[string][]byte{"m1": consumerMeta(1, "t")}))
	h.ex(16*time.Second+ms, h.conn(c1, "10.0.0.9:9092"), "c-m1", syncReq("g", "m1", 2, map[string]tps{"m1": {"t": {0, 1}}}),
		syncResp(0, tps{"t": {0, 1}}))
	// m1 consumes t/1 now; m2 wakes up and fetches it too.
	h.fetch(17*time.Second, c1, "c-m1", 1, 12, 30, batchOf(12, 18, false))
	h.fetch(20*time.Second, c2, "c-m2", 1, 12, 30, batchOf(12, 18, false))
	h.fetch(21*time.Second, c2, "c-m2", 1, 30, 32, batchOf(30, 2, false)) // the same episode
	h.close(22 * time.Second)                                             // hazards resting on absence wait for loss (LossSettle)
	want := []hazardView{{Kind: HazardNonOwnerFetch, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 1,
		Member: "m2", Offset: 12, Previous: -1, From: -1, To: -1, Skipped: -1, Replayed: -1}}
	if d := diff(want, h.hazardViews(HazardNonOwnerFetch)); d != "" {
		t.Errorf("non_owner_fetch (-want +got):\n%s", d)
	}
	if evs := h.hazards(HazardNonOwnerFetch); len(evs) == 1 && (evs[0].Owner != "m1" || *evs[0].OwnerGeneration != 2 || *evs[0].Records != 18) {
		t.Errorf("owner %s generation %d records %d, want m1 2 18", evs[0].Owner, *evs[0].OwnerGeneration, *evs[0].Records)
	}
	if evs := h.hazards(HazardMemberExpired); len(evs) != 1 || evs[0].MemberID != "m2" || evs[0].SilentMillis != 10000 {
		t.Errorf("member_expired = %v, want m2 silent 10s", h.hazardViews(HazardMemberExpired))
	}
}

// TestHazardNonOwnerFetchCooperative: a member keeps fetching a partition
// it just lost for a moment (in flight); later fetches would be a hazard.
func TestHazardNonOwnerFetchCooperative(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0, 1}}})
	h.fetch(100*ms, "10.0.0.1:5000", "c-m1", 1, 0, 10, batchOf(0, 10, false))
	stableGroup(h, time.Second, "g", 2, map[string]tps{"m1": {"t": {0}}, "m2": {}})
	stableGroup(h, 2*time.Second, "g", 3, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
	h.fetch(1005*ms, "10.0.0.1:5000", "c-m1", 1, 10, 12, batchOf(10, 2, false)) // before its generation 2 assignment
	h.fetch(2500*ms, "10.0.0.1:5000", "c-m1", 1, 12, 14, batchOf(12, 2, false)) // within FetchGrace of it
	if n := len(h.hazards()); n != 0 {
		t.Errorf("hazards = %v, want none", h.hazardViews())
	}
	h.fetch(5*time.Second, "10.0.0.1:5000", "c-m1", 1, 14, 16, batchOf(14, 2, false))
	h.close(6 * time.Second)
	if n := len(h.hazards(HazardNonOwnerFetch)); n != 1 {
		t.Errorf("hazards = %v, want one non_owner_fetch", h.hazardViews())
	}
}

// TestHazardMemberExpiredUncommitted: member_expired says what the next
// owner processes again from what the member was delivered and what it
// committed, not always that records are (a SIGKILLed Java consumer whose
// partition was committed to its end read as data replayed: real Kafka,
// issue 37).
func TestHazardMemberExpiredUncommitted(t *testing.T) {
	for _, tt := range []struct {
		name      string
		committed int64 // of t/1, by m2; -1 none
		want      string
	}{
		{"delivered beyond committed", 10, "(t/1 10..11) are processed again by the next owner"},
		{"committed to the end", 12, "it had committed everything it was delivered, so nothing is processed again"},
		{"no commit seen", -1, "(t/1 below 12, no commit seen) are processed again"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
			c1, c2 := "10.0.0.1:5000", "10.0.0.2:5000"
			h.fetch(50*ms, c2, "c-m2", 1, 0, 12, batchOf(0, 12, false))
			if tt.committed >= 0 {
				h.commit(100*ms, c2, "c-m2", "m2", 1, 1, tt.committed, 0)
			}
			for s := time.Duration(3); s <= 15; s += 3 {
				h.ex(s*time.Second, h.conn(c1, "10.0.0.9:9092"), "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(0))
			}
			h.close(16 * time.Second)
			evs := h.hazards(HazardMemberExpired)
			if len(evs) != 1 || !strings.Contains(evs[0].Summary, tt.want) {
				t.Fatalf("member_expired = %v, want one whose summary says %q", evs, tt.want)
			}
		})
	}
}
