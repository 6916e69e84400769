package correlate

import (
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// checkGroups checks every group of the truth: its members' joins and
// departures (see checkMembers), and its generations: every generation is
// complete, explained and consecutive, led by one of its members, with no
// partition assigned twice; the largest generation covers every partition
// of the group's topics.
func checkGroups(t *testing.T, tr *truth, gt *groupsTruth, s *Snapshot, rec *recorder, cut cutShort) {
	for group := range tr.Committed {
		g := findGroup(s, group)
		if g == nil {
			t.Errorf("group %s not found", group)
			continue
		}
		checkMembers(t, group, gt, rec)
		var largest *GenerationEvent
		for i := range g.Generations {
			gen := &g.Generations[i]
			checkGeneration(t, gen, i == 0, cut[group][gen.Generation])
			if i > 0 {
				checkCause(t, &g.Generations[i-1], gen)
			}
			if largest == nil || len(gen.Members) >= len(largest.Members) {
				largest = gen
			}
		}
		if largest == nil {
			t.Errorf("group %s has no generation", group)
			continue
		}
		want := map[string][]int32{}
		for topic, ps := range tr.EndOffsets {
			for p := range ps {
				n, _ := strconv.Atoi(p)
				want[topic] = append(want[topic], int32(n))
			}
		}
		got := map[string][]int32{}
		for _, m := range largest.Members {
			for topic, ps := range m.Assignment {
				got[topic] = append(got[topic], ps...)
			}
		}
		if d := diff(sortedAssignment(want), sortedAssignment(got)); d != "" {
			t.Errorf("generation %d assigns (-want +got):\n%s", largest.Generation, d)
		}
	}
}

// checkMembers checks the member events of group: each member joins once
// and, unless still in the group at the end, departs once.
//
// Without a groups truth (older captures), the scenario is the simple one
// those captures record: every member joins and leaves, none expires. With
// one, the members and their departures come from the truth, since the
// group scenarios kill, freeze, restart and drop members: its members are
// those of its generations and the static members that replaced one
// (static_rejoins); those of final.members never depart; a departure the
// truth names (a generation's cause member_left or member_expired, a
// member_expired hazard, a static member replaced: left) has that kind;
// a member missing from the next generation whose cause names another
// member was dropped by the broker from a rebalance (it did not rejoin in
// time: h_rebalance_storm), which is no LeaveGroup: left or expired; any
// other member leaves.
func checkMembers(t *testing.T, group string, gt *groupsTruth, rec *recorder) {
	t.Helper()
	joined, departed := map[string]int{}, map[string][]string{}
	for _, ev := range rec.events {
		m, ok := ev.(*MemberEvent)
		if !ok || m.Group != group {
			continue
		}
		if m.Action == MemberJoined {
			joined[m.MemberID]++
		} else {
			departed[m.MemberID] = append(departed[m.MemberID], m.Action)
		}
	}
	g := gt.Groups[group]
	if g == nil {
		left := map[string]int{}
		for id, actions := range departed {
			for _, a := range actions {
				if a != MemberLeft {
					t.Errorf("member %s %s: no member of this scenario expires", id, a)
				}
				left[id]++
			}
		}
		if len(joined) == 0 || diff(joined, left) != "" {
			t.Errorf("members joined %v, left %v: want every member to join and leave once", joined, left)
		}
		return
	}
	members := map[string]int{}
	named := map[string]string{} // member -> the departure the truth names
	dropped := map[string]bool{}
	for i, tg := range g.Generations {
		for id := range tg.Members {
			members[id] = 1
		}
		for _, rj := range tg.StaticRejoins {
			members[rj.NewMemberID] = 1
			named[rj.OldMemberID] = MemberLeft
		}
		switch tg.Cause {
		case CauseMemberLeft:
			named[tg.CauseMember] = MemberLeft
		case CauseMemberExpired:
			named[tg.CauseMember] = MemberExpired
		}
		if i+1 < len(g.Generations) && g.Generations[i+1].Generation == tg.Generation+1 {
			next := g.Generations[i+1]
			for id := range tg.Members {
				if _, ok := next.Members[id]; !ok && next.CauseMember != id {
					dropped[id] = true
				}
			}
		}
	}
	for _, h := range gt.Hazards {
		if h.Kind == "member_expired" && h.Group == group && h.MemberID != "" {
			named[h.MemberID] = MemberExpired
		}
	}
	final := map[string]bool{}
	if g.Final != nil {
		for _, m := range g.Final.Members {
			final[m.MemberID] = true
		}
	}
	if d := diff(members, joined); d != "" {
		t.Errorf("members joined (-truth +events):\n%s", d)
	}
	for id, actions := range departed {
		if members[id] == 0 {
			t.Errorf("member %s %v: not a member in the truth", id, actions)
		}
	}
	for id := range members {
		actions := departed[id]
		switch {
		case final[id]:
			if len(actions) != 0 {
				t.Errorf("member %s %v: still in the group at the end (final.members)", id, actions)
			}
		case len(actions) != 1:
			t.Errorf("member %s departed %v: want once", id, actions)
		case named[id] != "":
			if actions[0] != named[id] {
				t.Errorf("member %s %s, the truth says %s", id, actions[0], named[id])
			}
		case dropped[id]:
		case actions[0] != MemberLeft:
			t.Errorf("member %s %s: want left (the truth names no expiry, nor a rebalance that dropped it)", id, actions[0])
		}
	}
}

// cutShort: group -> generations a member's SyncGroup was answered
// REBALANCE_IN_PROGRESS in, read from the exchanges: the broker began the
// next rebalance (a cooperative member rejoining at once) before that
// member had its assignment, so the generation never completes.
type cutShort map[string]map[int32]bool

func (c cutShort) add(e *decode.Exchange) {
	req, _ := e.Req.(*kmsg.SyncGroupRequest)
	resp, _ := e.Resp.(*kmsg.SyncGroupResponse)
	if req == nil || resp == nil || resp.ErrorCode != kerr.RebalanceInProgress.Code {
		return
	}
	if c[req.Group] == nil {
		c[req.Group] = map[int32]bool{}
	}
	c[req.Group][req.Generation] = true
}

func checkGeneration(t *testing.T, gen *GenerationEvent, first, cutShort bool) {
	t.Helper()
	if (!gen.Complete && !cutShort) || gen.Cause.Kind == CauseUnknown || (!first && gen.Missed != 0) {
		t.Errorf("generation %d: complete %v, cause %+v, missed %d: want complete, explained, none missed",
			gen.Generation, gen.Complete, gen.Cause, gen.Missed)
	}
	seen := map[tp]string{}
	leader := gen.Leader == ""
	for _, m := range gen.Members {
		leader = leader || m.MemberID == gen.Leader
		if m.Assignment == nil {
			t.Errorf("generation %d member %s: no assignment", gen.Generation, m.MemberID)
		}
		for topic, ps := range m.Assignment {
			for _, p := range ps {
				if o, dup := seen[tp{topic, p}]; dup {
					t.Errorf("generation %d: %s/%d assigned to %s and %s", gen.Generation, topic, p, o, m.MemberID)
				}
				seen[tp{topic, p}] = m.MemberID
			}
		}
	}
	if !leader {
		t.Errorf("generation %d: leader %s is not a member", gen.Generation, gen.Leader)
	}
	checkGenerationEvidence(t, gen)
}

// checkGenerationEvidence: a generation's evidence (the HTML report's
// links) holds the exchanges that made it, oldest first: its first
// JoinGroup (at Started) and, once complete, a SyncGroup or heartbeat.
func checkGenerationEvidence(t *testing.T, gen *GenerationEvent) {
	t.Helper()
	if len(gen.Evidence) == 0 {
		t.Errorf("generation %d: no evidence", gen.Generation)
		return
	}
	ev := gen.Evidence
	if !slices.IsSortedFunc(ev, func(a, b Evidence) int { return a.TS.Compare(b.TS.Time) }) {
		t.Errorf("generation %d: evidence not oldest first: %+v", gen.Generation, ev)
	}
	if gen.Started != nil && !ev[0].TS.Equal(gen.Started.Time) {
		t.Errorf("generation %d: first evidence %s %s, want the exchange at started %s", gen.Generation, ev[0].API, ev[0].TS, gen.Started)
	}
	want := map[string]bool{"JoinGroup": true, "SyncGroup": true, "ConsumerGroupHeartbeat": true, "ShareGroupHeartbeat": true}
	for _, e := range ev {
		if !want[e.API] || e.Conn.ID == 0 {
			t.Errorf("generation %d: evidence %+v: want a group membership exchange on a connection", gen.Generation, e)
		}
	}
	if gen.Complete && !slices.ContainsFunc(ev, func(e Evidence) bool { return e.API != "JoinGroup" }) {
		t.Errorf("generation %d: complete, but no evidence of what completed it (a SyncGroup or heartbeat)", gen.Generation)
	}
}

// checkCause: a generation with a new member was caused by a join, one
// without a member of the previous one by a leave (or expiry), one with the
// same members by a metadata change (naming one of them, or none).
func checkCause(t *testing.T, prev, gen *GenerationEvent) {
	t.Helper()
	in := func(ms []GenerationMember, id string) bool {
		for _, m := range ms {
			if m.MemberID == id {
				return true
			}
		}
		return false
	}
	var want []string
	for _, m := range gen.Members {
		if !in(prev.Members, m.MemberID) {
			want = append(want, CauseMemberJoined+" "+m.MemberID)
		}
	}
	for _, m := range prev.Members {
		if !in(gen.Members, m.MemberID) {
			want = append(want, CauseMemberLeft+" "+m.MemberID, CauseMemberExpired+" "+m.MemberID)
		}
	}
	got := gen.Cause.Kind + " " + gen.Cause.Member
	if len(want) == 0 {
		// The same members: one of them rejoined first, or the capture
		// does not show who.
		want = []string{CauseMetadataChange + " "}
		for _, m := range gen.Members {
			want = append(want, CauseMetadataChange+" "+m.MemberID)
		}
	}
	for _, w := range want {
		if w == got {
			return
		}
	}
	t.Errorf("generation %d cause %q, want one of %q", gen.Generation, got, want)
}
