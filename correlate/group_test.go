package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const ms = time.Millisecond

// genView is the part of a generation event the tests compare.
type genView struct {
	Gen       int32
	Prev      int32
	Missed    int32
	Leader    string
	From      string
	Assigned  map[string]map[string][]int32 // member -> assignment
	Cause     Cause
	Complete  bool
	Started   string
	Completed string
}

func rel(t *Time) string {
	if t == nil {
		return "null"
	}
	return t.Sub(base).String()
}

func genViews(evs []Event) []genView {
	var out []genView
	for _, ev := range evs {
		g := ev.(*GenerationEvent)
		v := genView{Gen: g.Generation, Prev: g.PreviousGeneration, Missed: g.Missed, Leader: g.Leader,
			From: g.MembersFrom, Assigned: map[string]map[string][]int32{}, Cause: g.Cause,
			Complete: g.Complete, Started: rel(g.Started), Completed: rel(g.Completed)}
		for _, m := range g.Members {
			v.Assigned[m.MemberID] = m.Assignment
		}
		out = append(out, v)
	}
	return out
}

// memberView is the part of a member event the tests compare.
type memberView struct {
	Action, Member string
	Gen            int32
	Reason         string
	At             string
}

func memberViews(evs []Event) []memberView {
	var out []memberView
	for _, ev := range evs {
		m := ev.(*MemberEvent)
		at := Time{m.Time()}
		out = append(out, memberView{m.Action, m.MemberID, m.Generation, m.Reason, rel(&at)})
	}
	return out
}

type tps = map[string][]int32

// stableGroup makes members join group g in generation gen, member ids[0]
// leading, each from its own connection, and sync with plan.
func stableGroup(h *harness, at time.Duration, g string, gen int32, plan map[string]tps) {
	ids := sortedKeys(plan)
	metas := map[string][]byte{}
	for _, id := range ids {
		metas[id] = consumerMeta(1, "t")
	}
	for i, id := range ids {
		c := h.conn("10.0.0."+string(rune('1'+i))+":5000", "10.0.0.9:9092")
		if !h.joined[g+"/"+id] {
			// A new member: KIP-394's first step.
			h.joined[g+"/"+id] = true
			h.ex(at-5*ms, c, "c-"+id, joinReq(9, g, "", metas[id]), joinResp(kerr.MemberIDRequired.Code, -1, "", id, nil))
		}
		var list map[string][]byte
		if i == 0 {
			list = metas
		}
		h.ex(at, c, "c-"+id, joinReq(9, g, id, metas[id]), joinResp(0, gen, ids[0], id, list))
	}
	for i, id := range ids {
		c := h.conn("10.0.0."+string(rune('1'+i))+":5000", "10.0.0.9:9092")
		var p map[string]tps
		if i == 0 {
			p = plan
		}
		h.ex(at+10*ms, c, "c-"+id, syncReq(g, id, gen, p), syncResp(0, plan[id]))
	}
}

func TestMemberIDRequiredIsOneMember(t *testing.T) {
	h := newHarness(t, nil)
	c := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	h.ex(0, c, "c1", joinReq(9, "g", "", consumerMeta(1, "t")), joinResp(kerr.MemberIDRequired.Code, -1, "", "m1", nil))
	h.ex(10*ms, c, "c1", joinReq(9, "g", "m1", consumerMeta(1, "t")),
		joinResp(0, 1, "m1", "m1", map[string][]byte{"m1": consumerMeta(1, "t")}))
	h.ex(20*ms, c, "c1", syncReq("g", "m1", 1, map[string]tps{"m1": {"t": {1, 0}}}), syncResp(0, tps{"t": {1, 0}}))

	wantMembers := []memberView{{MemberJoined, "m1", 1, "", "0s"}}
	if d := diff(wantMembers, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	wantGens := []genView{{
		Gen: 1, Prev: -1, Leader: "m1", From: fromJoin, Assigned: map[string]map[string][]int32{"m1": {"t": {0, 1}}},
		Cause: Cause{Kind: CauseMemberJoined, Member: "m1"}, Complete: true, Started: "0s", Completed: "21ms",
	}}
	if d := diff(wantGens, genViews(h.events("generation"))); d != "" {
		t.Errorf("generation events (-want +got):\n%s", d)
	}
	s := h.c.Snapshot()
	if n := len(s.Groups[0].Members); n != 1 {
		t.Errorf("snapshot has %d members, want 1", n)
	}
	if got := s.Groups[0].Members[0]; got.ClientID != "c1" || got.ClientHost != "10.0.0.1" || got.SessionTimeoutMillis != 10000 {
		t.Errorf("member identity = %q %q %d, want c1 10.0.0.1 10000", got.ClientID, got.ClientHost, got.SessionTimeoutMillis)
	}
}

func TestLeaveGroupBatched(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}, "m3": {"t": {2}}})
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	for _, l := range []struct{ id, reason string }{{"m3", "scale in"}, {"m2", "shutdown"}} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.Reason = l.id, kmsg.StringPtr(l.reason)
		leave.Members = append(leave.Members, m)
	}
	resp := kmsg.NewPtrLeaveGroupResponse()
	for _, id := range []string{"m3", "m2"} {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID = id
		resp.Members = append(resp.Members, m)
	}
	h.ex(time.Second, h.conn("10.0.0.2:5000", "10.0.0.9:9092"), "c-m2", leave, resp)
	stableGroup(h, 2*time.Second, "g", 2, map[string]tps{"m1": {"t": {0, 1, 2}}})

	want := []memberView{
		{MemberJoined, "m1", 1, "", "-5ms"}, {MemberJoined, "m2", 1, "", "-5ms"}, {MemberJoined, "m3", 1, "", "-5ms"},
		{MemberLeft, "m3", 1, "scale in", "1s"}, {MemberLeft, "m2", 1, "shutdown", "1s"},
	}
	if d := diff(want, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	gens := genViews(h.events("generation"))
	wantCause := Cause{Kind: CauseMemberLeft, Member: "m2", Reason: "shutdown"}
	if len(gens) != 2 {
		t.Fatalf("got %d generations, want 2", len(gens))
	}
	if d := diff(wantCause, gens[1].Cause); d != "" {
		t.Errorf("generation 2 cause (-want +got):\n%s", d)
	}
}

func TestExpiryAndStaleHeartbeat(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
	c1, c2 := h.conn("10.0.0.1:5000", "10.0.0.9:9092"), h.conn("10.0.0.2:5000", "10.0.0.9:9092")
	h.ex(3*time.Second, c2, "c-m2", heartbeatReq("g", "m2", 1), heartbeatResp(0))
	for s := 3; s <= 12; s += 3 {
		h.ex(time.Duration(s)*time.Second, c1, "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(0))
	}
	// m2 is silent from 3s; its session (10s) runs out at 13s.
	h.ex(15*time.Second, c1, "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(kerr.RebalanceInProgress.Code))
	h.ex(15*time.Second+100*ms, c1, "c-m1", joinReq(9, "g", "m1", consumerMeta(1, "t")),
		joinResp(0, 2, "m1", "m1", map[string][]byte{"m1": consumerMeta(1, "t")}))
	h.ex(15*time.Second+200*ms, c1, "c-m1", syncReq("g", "m1", 2, map[string]tps{"m1": {"t": {0, 1}}}), syncResp(0, tps{"t": {0, 1}}))
	// m2 wakes up: the broker no longer knows it.
	h.ex(20*time.Second, c2, "c-m2", heartbeatReq("g", "m2", 1), heartbeatResp(kerr.UnknownMemberID.Code))
	fetch := fetchReq(12, "t", map[int32]int64{1: 40})
	h.ex(21*time.Second, h.conn("10.0.0.2:5001", "10.0.0.8:9092"), "c-m2", fetch, fetchResp(fetch, 0, map[int32][]byte{1: batches(40, 2)}))

	want := []memberView{
		{MemberJoined, "m1", 1, "", "-5ms"}, {MemberJoined, "m2", 1, "", "-5ms"},
		{MemberExpired, "m2", 1, "no request to the coordinator for 10s (session timeout 10s)", "13s"},
	}
	if d := diff(want, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	gens := genViews(h.events("generation"))
	if d := diff(Cause{Kind: CauseMemberExpired, Member: "m2", Reason: want[2].Reason}, gens[len(gens)-1].Cause); d != "" {
		t.Errorf("generation 2 cause (-want +got):\n%s", d)
	}
	if n := h.c.Stats().ExpiriesRetracted; n != 0 {
		t.Errorf("ExpiriesRetracted = %d, want 0", n)
	}
	s := h.c.Snapshot()
	cl := findClient(s, "10.0.0.2", "c-m2")
	if cl == nil || cl.Attribution != AttrFormer || cl.Group != "g" {
		t.Errorf("client c-m2 = %+v, want attribution %s to g", cl, AttrFormer)
	}
	p := findPartition(s, "g", "t", 1)
	if p == nil || p.Records != 2 || p.FetchedBy != "m2" {
		t.Errorf("partition t/1 = %+v, want 2 records fetched by m2 (zombie)", p)
	}
}

func findClient(s *Snapshot, host, id string) *Client {
	for i := range s.Clients {
		if s.Clients[i].ClientHost == host && s.Clients[i].ClientID == id {
			return &s.Clients[i]
		}
	}
	return nil
}

func findGroup(s *Snapshot, name string) *Group {
	for i := range s.Groups {
		if s.Groups[i].Group == name {
			return &s.Groups[i]
		}
	}
	return nil
}

func findPartition(s *Snapshot, group, topic string, p int32) *Partition {
	g := findGroup(s, group)
	if g == nil {
		return nil
	}
	for i := range g.Partitions {
		if g.Partitions[i].Topic == topic && g.Partitions[i].Partition == p {
			return &g.Partitions[i]
		}
	}
	return nil
}
