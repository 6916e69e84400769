package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinAlone makes member join group g alone (generation gen) from conn.
func joinAlone(h *harness, at time.Duration, client, broker, clientID, g, member string, gen int32, a tps) {
	c := h.conn(client, broker)
	h.ex(at, c, clientID, joinReq(9, g, member, consumerMeta(1, "t")),
		joinResp(0, gen, member, member, map[string][]byte{member: consumerMeta(1, "t")}))
	h.ex(at+ms, c, clientID, syncReq(g, member, gen, map[string]tps{member: a}), syncResp(0, a))
}

func TestAmbiguousClientID(t *testing.T) {
	h := newHarness(t, nil)
	// One host, one client id, two consumers in two groups.
	joinAlone(h, 0, "10.0.0.5:6001", "10.0.0.9:9092", "app", "A", "a1", 1, tps{"t": {0}})
	joinAlone(h, 0, "10.0.0.5:6002", "10.0.0.9:9092", "app", "B", "b1", 1, tps{"t": {1}})
	fetch := fetchReq(12, "t", map[int32]int64{0: 0})
	h.ex(time.Second, h.conn("10.0.0.5:6003", "10.0.0.8:9092"), "app", fetch, fetchResp(fetch, 5, map[int32][]byte{0: batches(0, 5)}))

	s := h.c.Snapshot()
	want := []Consumption{{ClientHost: "10.0.0.5", ClientID: "app", Status: AttrAmbiguous, Candidates: []string{"A", "B"}}}
	got := s.Unattributed
	for i := range got {
		got[i].Partitions = nil
	}
	if d := diff(want, got); d != "" {
		t.Errorf("unattributed (-want +got):\n%s", d)
	}
	if st := h.c.Stats(); st.FetchesAmbiguous != 1 || st.FetchesAttributed != 0 {
		t.Errorf("fetch stats = %+v, want 1 ambiguous, 0 attributed", st)
	}
	if p := findPartition(s, "A", "t", 0); p != nil && p.Records != 0 {
		t.Errorf("group A got %d records from an ambiguous fetch", p.Records)
	}

	// B's member leaves: the client is A's alone again.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "B", "b1"
	h.ex(2*time.Second, h.conn("10.0.0.5:6002", "10.0.0.9:9092"), "app", leave, kmsg.NewPtrLeaveGroupResponse())
	fetch = fetchReq(12, "t", map[int32]int64{0: 5})
	h.ex(3*time.Second, h.conn("10.0.0.5:6003", "10.0.0.8:9092"), "app", fetch, fetchResp(fetch, 7, map[int32][]byte{0: batches(5, 2)}))
	p := findPartition(h.c.Snapshot(), "A", "t", 0)
	if p == nil || p.Records != 2 || p.FetchedBy != "a1" {
		t.Errorf("group A partition t/0 = %+v, want 2 records fetched by a1", p)
	}
}

// TestBindingOutlivesConnection is field report 1: FindCoordinator asked of
// broker A, the group run at coordinator B, fetches from C; A's connection
// is gone when the fetches come.
func TestBindingOutlivesConnection(t *testing.T) {
	tests := []struct {
		name string
		join bool // the consumer joins (else: FindCoordinator only)
	}{
		{"member", true},
		{"find coordinator only", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.Version, fc.CoordinatorKeys = 4, []string{"g"}
			resp := kmsg.NewPtrFindCoordinatorResponse()
			for _, k := range fc.CoordinatorKeys {
				co := kmsg.NewFindCoordinatorResponseCoordinator()
				co.Key, co.NodeID, co.Host, co.Port = k, 1, "10.0.0.12", 9092
				resp.Coordinators = append(resp.Coordinators, co)
			}
			h.ex(0, h.conn("10.0.0.1:7001", "10.0.0.11:9092"), "c1", fc, resp)
			if tt.join {
				joinAlone(h, time.Second, "10.0.0.1:7002", "10.0.0.12:9092", "c1", "g", "m1", 1, tps{"t": {0}})
			}
			fetch := fetchReq(11, "t", map[int32]int64{0: 10})
			h.ex(5*time.Second, h.conn("10.0.0.1:7003", "10.0.0.13:9092"), "c1", fetch, fetchResp(fetch, 13, map[int32][]byte{0: batches(10, 3)}))

			s := h.c.Snapshot()
			p := findPartition(s, "g", "t", 0)
			// The Fetch at 10 delivered 10-12: the position is 13, the end.
			if p == nil || p.Records != 3 || *p.Position != 13 || *p.PositionLag != 0 || p.Lag != nil {
				t.Fatalf("partition g t/0 = %+v, want position 13, 3 records, position lag 0, no lag (nothing committed)", p)
			}
			cl := findClient(s, "10.0.0.1", "c1")
			if cl.Attribution != AttrGroup || cl.Group != "g" || len(cl.Bindings) != 1 || cl.Bindings[0].LearnedFrom != "FindCoordinator" {
				t.Errorf("client = %+v, want attributed to g by a FindCoordinator binding", cl)
			}
		})
	}
}

func TestCoordinatorEvents(t *testing.T) {
	h := newHarness(t, nil)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 2, "g"
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.ErrorCode = 15 // COORDINATOR_NOT_AVAILABLE
	h.ex(0, h.conn("10.0.0.1:7001", "10.0.0.11:9092"), "c1", fc, resp)
	resp = kmsg.NewPtrFindCoordinatorResponse()
	resp.NodeID, resp.Host, resp.Port = 2, "10.0.0.12", 9092
	h.ex(time.Second, h.conn("10.0.0.1:7001", "10.0.0.11:9092"), "c1", fc, resp)
	h.ex(2*time.Second, h.conn("10.0.0.1:7001", "10.0.0.11:9092"), "c1", fc, resp) // same answer: no event
	hb := heartbeatReq("g", "m1", 1)
	nc := heartbeatResp(16) // NOT_COORDINATOR
	h.ex(3*time.Second, h.conn("10.0.0.1:7002", "10.0.0.11:9092"), "c1", hb, nc)

	var got []CoordinatorEvent
	for _, ev := range h.events("coordinator") {
		ce := *ev.(*CoordinatorEvent)
		ce.at = time.Time{}
		got = append(got, ce)
	}
	want := []CoordinatorEvent{
		{Group: "g", NodeID: -1, LearnedFrom: "10.0.0.11:9092", Source: "find_coordinator", ErrorCode: 15, Error: "COORDINATOR_NOT_AVAILABLE"},
		{Group: "g", NodeID: 2, Host: "10.0.0.12", Port: 9092, LearnedFrom: "10.0.0.11:9092", Source: "find_coordinator"},
	}
	if d := diff(want, got); d != "" {
		t.Errorf("coordinator events (-want +got):\n%s", d)
	}
	co := findGroup(h.c.Snapshot(), "g").Coordinator
	if co.NotCoordinator != 1 || co.ServedBy != "" {
		t.Errorf("coordinator = %+v, want 1 NOT_COORDINATOR and not served", co)
	}
}
