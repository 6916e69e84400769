package correlate

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestLimits(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want Limits
	}{
		// 3 groups over the cap, 7 requests each.
		{"groups", Options{MaxGroups: 2}, Limits{GroupsDropped: 21}},
		// The second member of each group, in 3 requests.
		{"members", Options{MaxMembersPerGroup: 1}, Limits{MembersDropped: 15}},
		// 2 of the 3 committed partitions of each group.
		{"partitions", Options{MaxPartitionsPerGroup: 1}, Limits{PartitionsDropped: 10}},
		// 10 clients: whenever a fourth comes, the least recently seen are
		// forgotten until fewer than 2 (90% of 3) remain.
		{"clients", Options{MaxClients: 3}, Limits{ClientsEvicted: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &tt.opts)
			churn(h)
			if d := diff(tt.want, h.c.Stats().Limits); d != "" {
				t.Errorf("limits (-want +got):\n%s", d)
			}
		})
	}
}

// churn runs five groups of two members, with commits on three partitions.
func churn(h *harness) {
	for i := 0; i < 5; i++ {
		g := fmt.Sprintf("g%d", i)
		at := time.Duration(i) * time.Second
		stableGroup(h, at, g, 1, map[string]tps{g + "-a": {"t": {0, 1}}, g + "-b": {"t": {2}}})
		req := commitReq(g, g+"-a", 1, "t", map[int32]int64{0: 10, 1: 20, 2: 30})
		h.ex(at+500*ms, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "c-"+g+"-a", req, commitResp(req, 0))
	}
	h.c.Close(base.Add(time.Hour))
}

// TestDeterministic: the same input gives the same events and snapshot,
// whatever the map iteration orders.
func TestDeterministic(t *testing.T) {
	run := func() string {
		h := newHarness(t, nil)
		churn(h)
		out, err := json.Marshal(struct {
			Events   []Event
			Snapshot *Snapshot
		}{h.rec.events, h.c.Snapshot()})
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	first := run()
	for i := 0; i < 5; i++ {
		if got := run(); got != first {
			t.Fatalf("run %d differs from the first:\n%s", i+2, diff(first, got))
		}
	}
}

// TestTopicIDLimits: a hostile stream goes through 100 made-up topic ids,
// five every 10ms, named by Metadata responses or used by Fetch requests
// of a client in no group, while member m1 fetches "orders" by id. With
// MaxTopicIDs 10, a full map forgets its least recently seen ids until 8
// remain; the ids m1 uses stay resolved throughout.
func TestTopicIDLimits(t *testing.T) {
	junk := func(i int) [16]byte { return [16]byte{0xff, byte(i >> 8), byte(i)} }
	tests := []struct {
		name string
		// hostile sends the ids junk(first..first+4).
		hostile func(h *harness, at time.Duration, first int)
		// Names: "orders" and 100 ids, 101 in all: the 11th, 13th ...
		// 101st each forget two (46 times). Unresolved: 100 ids, the
		// 11th, 13th ... 99th each forget two (45 times).
		want           Limits
		wantUnresolved int
	}{
		{"names", func(h *harness, at time.Duration, first int) {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			resp := kmsg.NewPtrMetadataResponse()
			for i := first; i < first+5; i++ {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID = kmsg.StringPtr(fmt.Sprintf("junk-%d", i)), junk(i)
				resp.Topics = append(resp.Topics, mt)
			}
			h.ex(at, h.conn("10.0.0.66:6000", "10.0.0.8:9092"), "hostile", req, resp)
		}, Limits{TopicIDsEvicted: 92}, 0},
		{"unresolved", func(h *harness, at time.Duration, first int) {
			for i := first; i < first+5; i++ {
				f := fetchReqID(13, "", junk(i), map[int32]int64{0: 0})
				h.ex(at, h.conn("10.0.0.66:6000", "10.0.0.8:9092"), "hostile", f, fetchResp(f, 1, map[int32][]byte{0: batches(0, 1)}))
			}
		}, Limits{TopicIDsEvicted: 90}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Options{MaxTopicIDs: 10})
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"orders": {0}}})
			metadataExchange(h, 50*ms)
			fc := h.conn("10.0.0.1:5001", "10.0.0.8:9092")
			for step := range 20 {
				at := 100*ms + time.Duration(step)*10*ms
				tt.hostile(h, at, 5*step)
				f := fetchReqID(13, "", ordersID, map[int32]int64{0: int64(step)})
				h.ex(at+5*ms, fc, "c-m1", f, fetchResp(f, 100, map[int32][]byte{0: batches(int64(step), 1)}))
				if n, u := h.c.topics.Len(), len(h.c.unresolved); n > 10 || u > 10 {
					t.Fatalf("step %d: %d names, %d unresolved ids remembered; want at most 10 each", step, n, u)
				}
			}
			s := h.c.Snapshot()
			if d := diff(tt.want, s.Stats.Limits); d != "" {
				t.Errorf("limits (-want +got):\n%s", d)
			}
			if p := findPartition(s, "g", "orders", 0); p == nil || p.Records != 20 || s.Stats.UnresolvedTopicIDs != tt.wantUnresolved {
				t.Errorf("orders/0 = %+v, %d unresolved topic ids; want 20 records, %d", p, s.Stats.UnresolvedTopicIDs, tt.wantUnresolved)
			}
		})
	}
}
