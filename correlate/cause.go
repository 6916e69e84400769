package correlate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// cause explains why gen began, from what the capture shows before it:
// the earliest of the members that joined anew and the members that left
// or expired; otherwise a metadata change when the same members rejoined;
// otherwise unknown, saying what the capture lacks.
func (c *Correlator) cause(g *groupState, gen *genState) Cause {
	if cs, ok := earliestChange(gen); ok {
		return cs
	}
	prev := g.before(gen)
	switch {
	case !gen.joinsSeen && !g.epochsAt(gen):
		return Cause{Kind: CauseUnknown, Reason: fmt.Sprintf("the JoinGroups of generation %d are not in the capture (it began mid-way or lost them)", gen.id)}
	case prev == nil:
		return Cause{Kind: CauseUnknown, Reason: fmt.Sprintf("first generation seen; generation %d is not in the capture", gen.id-1)}
	case gen.missed() > 0 && !g.epochsAt(gen):
		return Cause{Kind: CauseUnknown, Reason: fmt.Sprintf("generations %d..%d are not in the capture", prev.id+1, gen.id-1)}
	}
	return Cause{Kind: CauseMetadataChange, Member: metadataMember(prev, gen), Reason: metadataReason(g, prev, gen)}
}

// metadataMember names the member that started a rebalance of the same
// members: the one whose subscription changed (KIP-848), else the one
// whose JoinGroup came first; "" when the capture does not show it.
func metadataMember(prev, gen *genState) string {
	for _, id := range []string{gen.subChangeBy, gen.starter} {
		if id != "" && gen.members[id] != nil && prev.members[id] != nil {
			return id
		}
	}
	return ""
}

// earliestChange returns the first join, leave or expiry behind gen.
func earliestChange(gen *genState) (Cause, bool) {
	type cand struct {
		at     time.Time
		kind   string
		member string
		reason string
	}
	var cands []cand
	for id, t := range gen.fresh {
		if gen.members[id] != nil || authority(gen.membersFrom) == authority(fromObserved) {
			cands = append(cands, cand{t, CauseMemberJoined, id, gen.joinReasons[id]})
		}
	}
	for _, d := range gen.departures {
		cands = append(cands, cand{d.at, d.kind, d.member, d.reason})
	}
	if len(cands) == 0 {
		return Cause{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].at.Equal(cands[j].at) {
			return cands[i].at.Before(cands[j].at)
		}
		return cands[i].member < cands[j].member
	})
	b := cands[0]
	return Cause{Kind: b.kind, Member: b.member, Reason: b.reason}, true
}

// metadataReason describes what changed when the same members rejoined.
func metadataReason(g *groupState, prev, gen *genState) string {
	if gen.subChange != "" {
		return gen.subChange
	}
	var diffs []string
	for _, id := range sortedKeys(gen.members) {
		p := prev.members[id]
		if p == nil || p.subscription == nil || gen.members[id].subscription == nil {
			continue
		}
		if !slices.Equal(p.subscription, gen.members[id].subscription) {
			diffs = append(diffs, fmt.Sprintf("%s %v -> %v", id, p.subscription, gen.members[id].subscription))
		}
	}
	switch {
	case len(diffs) > 0:
		return "subscription changed: " + strings.Join(diffs, "; ")
	case g.typ == GroupStreams && assignedCount(prev) < assignedCount(gen) && assignedCount(prev) >= 0:
		why := ""
		if len(prev.statuses) > 0 {
			why = fmt.Sprintf(" (its heartbeats were answered %s)", strings.Join(prev.statuses, ", "))
		}
		return fmt.Sprintf("same members; tasks the broker held back in epoch %d%s were assigned", prev.id, why)
	case assignedCount(prev) < assignedCount(gen) && assignedCount(prev) >= 0:
		return fmt.Sprintf("same members rejoined; partitions left unassigned in generation %d were assigned (cooperative rebalance)", prev.id)
	}
	if ids := sortedKeys(gen.joinReasons); len(ids) > 0 {
		return "same members rejoined: " + gen.joinReasons[ids[0]] // the first member's, by id
	}
	return "same members rejoined (the leader rejoined, or a member's metadata changed)"
}

// assignedCount counts the partitions assigned in gen, or -1 when some
// member's assignment is unknown.
func assignedCount(gen *genState) int {
	n := 0
	for _, gm := range gen.members {
		if !gm.assigned {
			return -1
		}
		for _, ps := range gm.assignment {
			n += len(ps)
		}
	}
	return n
}
