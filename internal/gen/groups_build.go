package gen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// This file assembles the groups truth from what members reported, what
// scenarios scripted and what the broker said at stable points. Called
// with groupRecorder.mu held.

// fetched sums the records of group's reports of kind (fetch, consumed)
// per topic and partition.
func (r *groupRecorder) fetched(group, kind string) map[string]map[string]int64 {
	var out map[string]map[string]int64
	for _, rep := range r.reports {
		if rep.Group != group || rep.Kind != kind {
			continue
		}
		if out == nil {
			out = map[string]map[string]int64{}
		}
		sub(out, rep.Topic)[strconv.Itoa(int(rep.Partition))] += rep.Records
	}
	return out
}

// clientOf maps member ids to client ids from every report of group.
func (r *groupRecorder) clientOf(group string) map[string]string {
	m := map[string]string{}
	for _, rep := range r.reports {
		if rep.Group == group && rep.MemberID != "" && rep.ClientID != "" {
			m[rep.MemberID] = rep.ClientID
		}
	}
	return m
}

// gensClassic assembles the generations of a classic group from the
// leaders' plans and the members' syncs.
func (r *groupRecorder) gensClassic(group string) ([]Generation, []string) {
	plans, syncs := r.plansAndSyncs(group)
	var gens []int32
	for g := range plans {
		gens = append(gens, g)
	}
	for g := range syncs {
		if _, ok := plans[g]; !ok {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	clients := r.clientOf(group)
	var out []Generation
	var notes []string
	for _, g := range gens {
		plan, havePlan := plans[g]
		var gen Generation
		var gnotes []string
		if havePlan {
			gen, gnotes = fromPlan(group, plan, syncs[g], clients)
		} else {
			gen, gnotes = fromSyncs(group, g, syncs[g])
		}
		notes = append(notes, gnotes...)
		out = append(out, gen)
	}
	r.causes(group, out, plans)
	notes = append(notes, r.crossCheckSnaps(group, out)...)
	return out, notes
}

// plansAndSyncs indexes group's plan and sync reports by generation.
func (r *groupRecorder) plansAndSyncs(group string) (map[int32]groupReport, map[int32]map[string]groupReport) {
	plans := map[int32]groupReport{}
	syncs := map[int32]map[string]groupReport{}
	for _, rep := range r.reports {
		if rep.Group != group {
			continue
		}
		switch rep.Kind {
		case "plan":
			if _, dup := plans[rep.Generation]; !dup {
				// KIP-814: a restarted static leader balances again
				// but does not send the plan; the first one stands.
				plans[rep.Generation] = rep
			}
		case "sync":
			if syncs[rep.Generation] == nil {
				syncs[rep.Generation] = map[string]groupReport{}
			}
			syncs[rep.Generation][rep.MemberID] = rep
		}
	}
	return plans, syncs
}

// fromPlan makes a generation from its leader's plan, checked against
// the members' syncs; a synced member missing from the plan is a static
// member that restarted (KIP-345).
func fromPlan(group string, plan groupReport, ss map[string]groupReport, clients map[string]string) (Generation, []string) {
	g := plan.Generation
	gen := Generation{Generation: g, Protocol: plan.Protocol, Leader: plan.MemberID, Topics: plan.Topics,
		Members: map[string]GenMember{}, Completed: true}
	var notes []string
	for m, a := range plan.Plan {
		gm := GenMember{ClientID: clients[m], Assignment: normAssignment(a)}
		if id, ok := plan.PlanInstances[m]; ok {
			gm.InstanceID = &id
		}
		gen.Members[m] = gm
		s, ok := ss[m]
		switch {
		case !ok:
			gen.Completed = false
			gen.NotSynced = append(gen.NotSynced, m)
		case !sameAssignment(s.Assignment, a):
			notes = append(notes, fmt.Sprintf("group %s generation %d: member %s synced %v, the leader planned %v", group, g, m, s.Assignment, a))
		}
	}
	slices.Sort(gen.NotSynced)
	gen.Pending = pending(gen.Topics, gen.Members)
	for m, s := range ss {
		if _, ok := gen.Members[m]; ok {
			continue
		}
		if s.InstanceID != nil {
			if old := staticOwner(plan.PlanInstances, *s.InstanceID); old != "" {
				gen.StaticRejoins = append(gen.StaticRejoins, StaticRejoin{InstanceID: *s.InstanceID, OldMemberID: old, NewMemberID: m, ClientID: s.ClientID})
				continue
			}
		}
		notes = append(notes, fmt.Sprintf("group %s generation %d: member %s synced but is not in the leader's plan", group, g, m))
	}
	sort.Slice(gen.StaticRejoins, func(i, j int) bool { return gen.StaticRejoins[i].NewMemberID < gen.StaticRejoins[j].NewMemberID })
	return gen, notes
}

// fromSyncs makes a generation whose leader never reported a plan from
// its members' syncs.
func fromSyncs(group string, g int32, ss map[string]groupReport) (Generation, []string) {
	gen := Generation{Generation: g, Members: map[string]GenMember{}, Completed: true}
	for m, s := range ss {
		gen.Protocol = s.Protocol
		gen.Members[m] = GenMember{ClientID: s.ClientID, InstanceID: s.InstanceID, Assignment: normAssignment(s.Assignment)}
	}
	return gen, []string{fmt.Sprintf("group %s generation %d: no leader reported its plan; members and assignments are from the members' syncs", group, g)}
}

// staticOwner returns the member that had instance id in a plan.
func staticOwner(instances map[string]string, id string) string {
	for m, i := range instances {
		if i == id {
			return m
		}
	}
	return ""
}

// cand is a possible cause of a rebalance, at the time it took effect.
type cand struct {
	at     int64
	cause  string
	member string
}

const never = 1<<63 - 1

// causes fills Cause and CauseMember from the member sets, the members'
// JoinGroup times and the scenario's script: the earliest candidate
// since the previous generation formed wins.
func (r *groupRecorder) causes(group string, gens []Generation, plans map[int32]groupReport) {
	joins := map[string][]int64{} // member -> JoinGroup write times
	for _, rep := range r.reports {
		if rep.Group == group && rep.Kind == "join" && rep.MemberID != "" {
			joins[rep.MemberID] = append(joins[rep.MemberID], rep.Nanos)
		}
	}
	scripted := r.scripted(group)
	for i := range gens {
		g := &gens[i]
		// Before the first generation, and after a gap (the
		// generations between were an empty group's bumps), nobody
		// was a member: joiners made it.
		prev := Generation{Generation: g.Generation - 1}
		if i > 0 && gens[i-1].Generation+1 == g.Generation {
			prev = gens[i-1]
		}
		var since int64 // when the previous generation was formed
		if p, ok := plans[prev.Generation]; ok {
			since = p.Nanos
		}
		until := int64(never)
		if p, ok := plans[g.Generation]; ok {
			until = p.Nanos
		}
		best := causeOf(g, prev, joins, scripted, since, until)
		if best.cause == CauseMemberJoined && best.member == "" {
			best.member = g.Leader
		}
		g.Cause, g.CauseMember = best.cause, best.member
	}
}

func (r *groupRecorder) scripted(group string) map[string]groupScript {
	out := map[string]groupScript{}
	for _, s := range r.scripts {
		if s.group == group {
			out[s.memberID] = s
		}
	}
	return out
}

func causeOf(g *Generation, prev Generation, joins map[string][]int64, scripted map[string]groupScript, since, until int64) cand {
	var cs []cand
	for m := range g.Members {
		if _, ok := prev.Members[m]; ok {
			continue
		}
		at := until
		if ts := joins[m]; len(ts) > 0 {
			at = ts[0]
		}
		cs = append(cs, cand{at, CauseMemberJoined, m})
	}
	for m := range prev.Members {
		if _, ok := g.Members[m]; ok {
			continue
		}
		if s, ok := scripted[m]; ok {
			cs = append(cs, cand{s.at.UnixNano(), s.kind, m})
		} else {
			cs = append(cs, cand{until, CauseUnknown, ""})
		}
	}
	if len(cs) == 0 {
		// Same members: someone rejoined with new metadata (the
		// follow-up rebalance of a cooperative assignor, or a
		// subscription change): the first JoinGroup names it.
		for m := range g.Members {
			for _, t := range joins[m] {
				if t > since && t <= until {
					cs = append(cs, cand{t, CauseMetadataChange, m})
				}
			}
		}
	}
	if len(cs) == 0 {
		return cand{until, CauseUnknown, ""}
	}
	return slices.MinFunc(cs, func(a, b cand) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.member, b.member)
	})
}

// crossCheckSnaps compares the broker's stable snapshots with the
// assembled generations and says where they differ.
func (r *groupRecorder) crossCheckSnaps(group string, gens []Generation) []string {
	var notes []string
	for _, s := range r.snaps[group] {
		var gen *Generation
		for i := range gens {
			if gens[i].Generation == s.info.Epoch {
				gen = &gens[i]
			}
		}
		if gen == nil {
			notes = append(notes, fmt.Sprintf("group %s: the broker reported generation %d stable, but no member reported it", group, s.info.Epoch))
			continue
		}
		current := map[string]map[string][]int32{}
		for m, gm := range gen.Members {
			current[m] = gm.Assignment
		}
		for _, sr := range gen.StaticRejoins {
			a, ok := current[sr.OldMemberID]
			if ok && slices.ContainsFunc(s.info.Members, func(m kfake.GroupMember) bool { return m.MemberID == sr.NewMemberID }) {
				delete(current, sr.OldMemberID)
				current[sr.NewMemberID] = a
			}
		}
		broker := map[string]map[string][]int32{}
		for _, m := range s.info.Members {
			broker[m.MemberID] = normAssignment(m.Assignment)
		}
		if !sameMembers(current, broker) {
			notes = append(notes, fmt.Sprintf("group %s generation %d: the broker's stable state %v differs from the members' reports %v", group, s.info.Epoch, broker, current))
		}
	}
	return notes
}

// gens848 turns the broker's stable snapshots of a KIP-848 group into
// generations (one per group epoch).
func (r *groupRecorder) gens848(group string) ([]Generation, []string) {
	var notes []string
	var out []Generation
	for _, s := range r.snaps[group] {
		gen := Generation{Generation: s.info.Epoch, Protocol: r.kip848[group], Members: map[string]GenMember{}, Completed: true, Topics: s.topics}
		for _, m := range s.info.Members {
			gen.Members[m.MemberID] = GenMember{ClientID: m.ClientID, InstanceID: m.InstanceID, Assignment: normAssignment(m.Assignment)}
		}
		if n := len(out); n > 0 && out[n-1].Generation == gen.Generation {
			out[n-1] = gen
			continue
		}
		out = append(out, gen)
	}
	scripted := r.scripted(group)
	for i := range out {
		g := &out[i]
		var prev map[string]GenMember
		if i > 0 {
			prev = out[i-1].Members
			if out[i-1].Generation+1 != g.Generation {
				notes = append(notes, fmt.Sprintf("group %s: group epochs %d..%d passed while members reconciled; only stable epochs are listed",
					group, out[i-1].Generation+1, g.Generation-1))
			}
		}
		g.Cause = CauseUnknown
		var joined, gone []string
		for m := range g.Members {
			if _, ok := prev[m]; !ok {
				joined = append(joined, m)
			}
		}
		for m := range prev {
			if _, ok := g.Members[m]; !ok {
				gone = append(gone, m)
			}
		}
		slices.Sort(joined)
		slices.Sort(gone)
		switch {
		case len(joined) > 0:
			g.Cause, g.CauseMember = CauseMemberJoined, joined[0]
		case len(gone) > 0:
			if s, ok := scripted[gone[0]]; ok {
				g.Cause, g.CauseMember = s.kind, gone[0]
			}
		}
		if len(joined)+len(gone) > 1 {
			notes = append(notes, fmt.Sprintf("group %s epoch %d: %d members joined and %d left since the last stable epoch", group, g.Generation, len(joined), len(gone)))
		}
	}
	return out, notes
}

// normAssignment copies a, sorted, without empty topics (never nil).
func normAssignment(a map[string][]int32) map[string][]int32 {
	out := map[string][]int32{}
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out[t] = ps
	}
	return out
}

func sameAssignment(a, b map[string][]int32) bool {
	na, nb := normAssignment(a), normAssignment(b)
	return maps.EqualFunc(na, nb, slices.Equal)
}

func sameMembers(a, b map[string]map[string][]int32) bool {
	return maps.EqualFunc(a, b, sameAssignment)
}

// pending lists the partitions of topics no member was given.
func pending(topics map[string]int32, members map[string]GenMember) map[string][]int32 {
	var out map[string][]int32
	for t, n := range topics {
		taken := map[int32]bool{}
		for _, m := range members {
			for _, p := range m.Assignment[t] {
				taken[p] = true
			}
		}
		for p := range n {
			if !taken[p] {
				if out == nil {
					out = map[string][]int32{}
				}
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}
