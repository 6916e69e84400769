package correlate

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
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
