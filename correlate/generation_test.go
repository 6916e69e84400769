package correlate

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestGenerationNumbering(t *testing.T) {
	type step struct {
		at    time.Duration
		gen   int32
		plan  map[string]tps
		leave string // member leaving before the step
	}
	tests := []struct {
		name  string
		steps []step
		want  genView // the last generation
	}{{
		name: "skip after empty group is not data loss",
		steps: []step{
			{at: 0, gen: 1, plan: map[string]tps{"m1": {"t": {0}}}},
			{at: 2 * time.Second, gen: 3, plan: map[string]tps{"m2": {"t": {0}}}, leave: "m1"},
		},
		want: genView{Gen: 3, Prev: 1, Missed: 0, Leader: "m2", From: fromJoin,
			Assigned: map[string]map[string][]int32{"m2": {"t": {0}}},
			Cause:    Cause{Kind: CauseMemberJoined, Member: "m2"}, Complete: true, Started: "1.995s", Completed: "2.011s"},
	}, {
		name: "generations missing from the capture",
		steps: []step{
			{at: 0, gen: 1, plan: map[string]tps{"m1": {"t": {0}}}},
			{at: 2 * time.Second, gen: 4, plan: map[string]tps{"m1": {"t": {0}}}},
		},
		want: genView{Gen: 4, Prev: 1, Missed: 2, Leader: "m1", From: fromJoin,
			Assigned: map[string]map[string][]int32{"m1": {"t": {0}}},
			Cause:    Cause{Kind: CauseUnknown, Reason: "generations 2..3 are not in the capture"}, Complete: true, Started: "2s", Completed: "2.011s"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			for _, s := range tt.steps {
				if s.leave != "" {
					leave := kmsg.NewPtrLeaveGroupRequest()
					leave.Version, leave.Group, leave.MemberID = 2, "g", s.leave
					h.ex(s.at-time.Second, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "c-"+s.leave, leave, kmsg.NewPtrLeaveGroupResponse())
				}
				stableGroup(h, s.at, "g", s.gen, s.plan)
			}
			h.c.Close(base.Add(time.Minute))
			gens := genViews(h.events("generation"))
			if d := diff(tt.want, gens[len(gens)-1]); d != "" {
				t.Errorf("last generation (-want +got):\n%s", d)
			}
		})
	}
}

// TestCaptureBeganMidway: only heartbeats and commits of generation 7 are
// seen. The generation is reported with what is known, its cause unknown.
func TestCaptureBeganMidway(t *testing.T) {
	h := newHarness(t, nil)
	for i, id := range []string{"m1", "m2"} {
		c := h.conn("10.0.0."+string(rune('1'+i))+":5000", "10.0.0.9:9092")
		h.ex(time.Duration(i)*time.Second, c, "c-"+id, heartbeatReq("g", id, 7), heartbeatResp(0))
	}
	req := commitReq("g", "m1", 7, "t", map[int32]int64{0: 40})
	h.ex(3*time.Second, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "c-m1", req, commitResp(req, 0))
	h.c.Close(base.Add(5 * time.Second))

	if n := len(h.events("member")); n != 0 {
		t.Errorf("got %d member events, want none (no join or expiry seen)", n)
	}
	gens := genViews(h.events("generation"))
	want := []genView{{Gen: 7, Prev: -1, From: fromObserved, Assigned: map[string]map[string][]int32{"m1": nil, "m2": nil},
		Cause:   Cause{Kind: CauseUnknown, Reason: "the JoinGroups of generation 7 are not in the capture (it began mid-way or lost them)"},
		Started: "null", Completed: "null"}}
	if d := diff(want, gens); d != "" {
		t.Errorf("generations (-want +got):\n%s", d)
	}
	if s := findGroup(h.c.Snapshot(), "g"); s.Members[0].SessionTimeoutMillis != 0 || s.Members[0].Status != "live" {
		t.Errorf("member m1 = %+v: want live, session timeout unknown", s.Members[0])
	}
}

// TestSilentMemberExpires: a lone member killed without leaving expires
// after its session timeout, confirmed by the sweep (silent past session
// and rebalance timeouts) or by Close.
func TestSilentMemberExpires(t *testing.T) {
	tests := []struct {
		name    string
		traffic time.Duration // other traffic until then
		closeAt time.Duration
	}{
		{"confirmed by sweep", 40 * time.Second, 41 * time.Second},
		{"confirmed by close", 0, 12 * time.Second},
		{"not yet due at close", 0, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}}) // session 10s, rebalance 20s
			for at := time.Second; at <= tt.traffic; at += time.Second {
				f := fetchReq(11, "other", map[int32]int64{0: 0})
				h.ex(at, h.conn("10.0.0.50:5000", "10.0.0.8:9092"), "x", f, fetchResp(f, 0, nil))
				if at == 29*time.Second && len(h.events("member")) != 1 {
					t.Fatalf("expired before its session and rebalance timeouts passed")
				}
			}
			h.c.Close(base.Add(tt.closeAt))
			evs := memberViews(h.events("member"))
			if tt.closeAt < 10*time.Second {
				if len(evs) != 1 {
					t.Errorf("member events = %+v, want only the join", evs)
				}
				return
			}
			// The member's last request is its SyncGroup response (11ms).
			want := memberView{MemberExpired, "m1", 1, "no request to the coordinator for 10s (session timeout 10s)", "10.011s"}
			if d := diff(want, evs[len(evs)-1]); d != "" {
				t.Errorf("last member event (-want +got):\n%s", d)
			}
		})
	}
}

// TestStaticMemberRestart: a static member restarting under a new member
// id replaces the old one without a rebalance (KIP-345).
func TestStaticMemberRestart(t *testing.T) {
	h := newHarness(t, nil)
	c := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	join := joinReq(9, "g", "", consumerMeta(1, "t"))
	join.InstanceID = kmsg.StringPtr("i1")
	h.ex(0, c, "c1", join, joinResp(0, 1, "s1", "s1", map[string][]byte{"s1": consumerMeta(1, "t")}))
	h.ex(10*ms, c, "c1", syncReq("g", "s1", 1, map[string]tps{"s1": {"t": {0}}}), syncResp(0, tps{"t": {0}}))
	c2 := h.conn("10.0.0.1:5001", "10.0.0.9:9092")
	h.ex(5*time.Second, c2, "c1", join, joinResp(0, 1, "s1", "s2", nil))
	h.ex(5*time.Second+10*ms, c2, "c1", syncReq("g", "s2", 1, nil), syncResp(0, tps{"t": {0}}))

	want := []memberView{
		{MemberJoined, "s1", 1, "", "0s"},
		{MemberLeft, "s1", 1, "static member restarted: replaced by s2 (same group.instance.id i1)", "5s"},
		{MemberJoined, "s2", 1, "static member restarted (group.instance.id i1): replaced s1 in generation 1, taking over its assignment without a rebalance", "5s"},
	}
	if d := diff(want, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	g := findGroup(h.c.Snapshot(), "g")
	if g.Generation != 1 || g.Partitions != nil && len(g.Partitions) != 0 {
		t.Errorf("group = gen %d, want still generation 1", g.Generation)
	}
	// Generation 1 stays as it was formed (s1); s2 owns s1's assignment.
	if len(g.Generations) != 1 || len(g.Generations[0].Members) != 1 || g.Generations[0].Members[0].MemberID != "s1" {
		t.Errorf("generations = %+v, want generation 1 with its member s1", g.Generations)
	}
	for _, m := range g.Members {
		if m.MemberID == "s2" && (m.Status != "live" || diff(tps{"t": {0}}, m.Assignment) != "") {
			t.Errorf("s2 = %s with %v, want live with t/0", m.Status, m.Assignment)
		}
	}
	if d := h.c.groups["g"].departures; len(d) != 0 {
		t.Errorf("departures = %+v, want none: a static restart is no rebalance cause", d)
	}
}

func TestMetadataChangeReason(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
	c := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	meta := consumerMeta(1, "t", "u")
	h.ex(time.Second, c, "c-m1", joinReq(9, "g", "m1", meta), joinResp(0, 2, "m1", "m1", map[string][]byte{"m1": meta}))
	h.ex(time.Second+10*ms, c, "c-m1", syncReq("g", "m1", 2, map[string]tps{"m1": {"t": {0}, "u": {0}}}), syncResp(0, tps{"t": {0}, "u": {0}}))
	gens := genViews(h.events("generation"))
	got := gens[len(gens)-1].Cause
	if got.Kind != CauseMetadataChange || !strings.Contains(got.Reason, "subscription changed: m1 [t] -> [t u]") {
		t.Errorf("cause = %+v, want metadata_change naming the subscription change", got)
	}
}

// TestMetadataChangeNamesFirstRejoin: when the same members rejoin, the
// cause names the member whose JoinGroup came first (not the leader, not
// the first by id).
func TestMetadataChangeNamesFirstRejoin(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
	meta := consumerMeta(1, "t")
	c1, c2 := h.conn("10.0.0.1:5000", "10.0.0.9:9092"), h.conn("10.0.0.2:5000", "10.0.0.9:9092")
	h.ex(time.Second, c2, "c-m2", joinReq(9, "g", "m2", meta), joinResp(0, 2, "m1", "m2", nil))
	h.ex(time.Second+2*ms, c1, "c-m1", joinReq(9, "g", "m1", meta), joinResp(0, 2, "m1", "m1", map[string][]byte{"m1": meta, "m2": meta}))
	plan := map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}}
	h.ex(time.Second+10*ms, c1, "c-m1", syncReq("g", "m1", 2, plan), syncResp(0, plan["m1"]))
	h.ex(time.Second+11*ms, c2, "c-m2", syncReq("g", "m2", 2, nil), syncResp(0, plan["m2"]))
	gens := genViews(h.events("generation"))
	if got := gens[len(gens)-1]; got.Gen != 2 || got.Cause.Kind != CauseMetadataChange || got.Cause.Member != "m2" || got.Started != "1s" {
		t.Errorf("generation %d cause %+v started %s, want 2, metadata_change by m2 at 1s", got.Gen, got.Cause, got.Started)
	}
}

// TestExpiryConfirmedAfterSuccessorJoined: the only member expires; its
// expiry is confirmed only when the successor's JoinGroup forms the next
// generation (before kwire's sweep judged it). The group was empty in
// between, so the broker bumped the generation once: the successor's join
// caused the generation seen, none is missed.
func TestExpiryConfirmedAfterSuccessorJoined(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}}) // session 10s, rebalance 20s
	stableGroup(h, 12*time.Second, "g", 3, map[string]tps{"m2": {"t": {0}}})
	gens := genViews(h.events("generation"))
	want := genView{Gen: 3, Prev: 1, Missed: 0, Leader: "m2", From: fromJoin,
		Assigned: map[string]map[string][]int32{"m2": {"t": {0}}},
		Cause:    Cause{Kind: CauseMemberJoined, Member: "m2"}, Complete: true, Started: "11.995s", Completed: "12.011s"}
	if d := diff(want, gens[len(gens)-1]); d != "" {
		t.Errorf("last generation (-want +got):\n%s", d)
	}
	evs := memberViews(h.events("member"))
	if d := diff(memberView{MemberExpired, "m1", 1, "no request to the coordinator for 10s (session timeout 10s)", "10.011s"}, evs[1]); d != "" {
		t.Errorf("m1's expiry (-want +got):\n%s", d)
	}
}
