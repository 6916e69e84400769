package correlate

import (
	"strconv"
	"testing"
)

// checkGroups checks every group of the truth against the scenario's
// shape: members join and leave cleanly (no expiry), every generation is
// complete, explained and consecutive, led by one of its members, with no
// partition assigned twice; the largest generation covers every partition
// of the group's topics.
func checkGroups(t *testing.T, tr *truth, s *Snapshot, rec *recorder) {
	for group := range tr.Committed {
		g := findGroup(s, group)
		if g == nil {
			t.Errorf("group %s not found", group)
			continue
		}
		joined, left := map[string]bool{}, map[string]bool{}
		for _, ev := range rec.events {
			m, ok := ev.(*MemberEvent)
			if !ok || m.Group != group {
				continue
			}
			switch m.Action {
			case MemberJoined:
				joined[m.MemberID] = true
			case MemberLeft:
				left[m.MemberID] = true
			default:
				t.Errorf("member %s %s: no member of this scenario expires", m.MemberID, m.Action)
			}
		}
		if len(joined) == 0 || diff(joined, left) != "" {
			t.Errorf("members joined %v, left %v: want every member to join and leave", joined, left)
		}
		var largest *GenerationEvent
		for i := range g.Generations {
			gen := &g.Generations[i]
			checkGeneration(t, gen, i == 0)
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

func checkGeneration(t *testing.T, gen *GenerationEvent, first bool) {
	t.Helper()
	if !gen.Complete || gen.Cause.Kind == CauseUnknown || (!first && gen.Missed != 0) {
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
}

// checkCause: a generation with a new member was caused by a join, one
// without a member of the previous one by a leave (or expiry), one with the
// same members by a metadata change.
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
		want = []string{CauseMetadataChange + " "}
	}
	for _, w := range want {
		if w == got {
			return
		}
	}
	t.Errorf("generation %d cause %q, want one of %q", gen.Generation, got, want)
}
