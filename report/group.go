package report

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/jsonout"
)

// groupView is one group's section of the page.
type groupView struct {
	ID, Name, Type, Protocol, State, Coordinator string
	Generation                                   int32
	Timeline, Owners                             template.HTML
	Gens                                         []genRow
	GensNote                                     string
	Members                                      []memberRow
	MembersMore                                  int
	Charts                                       []chart
	Parts                                        table
	Share, ShareMembers                          table
	Hazards                                      []*hazardView
	Errors                                       []kv
}

// genRow is one generation in a group's table.
type genRow struct {
	ID                       string
	N                        int32
	Started, Completed, Took string
	Cause, CauseReason       string
	CauseMember              memberRef
	Members                  []memberRef
	MembersFrom, Protocol    string
	Leader                   memberRef
	Complete                 bool
	Missed                   int32
	Evidence                 []evidenceRow
}

type memberRef struct{ Label, Ref, ID string }

// memberRow is one member in a group's table.
type memberRow struct {
	Ref, Label, MemberID, ClientID, Host, Instance, Process string
	Status, Joined, Gone, LastSeen, Reason, Assignment      string
	Heartbeats, MaxGapMillis, SessionMillis                 int64
	Hazards                                                 []hazardLink
}

// hazardLink is a member's hazards of one kind: a link to the first, and
// how many.
type hazardLink struct {
	*hazardView
	N int
}

// member is what the figures know of one member id: its label (m1, m2...
// in order of appearance) and span.
type member struct {
	memberRef
	m          *correlate.Member // nil: known only from generations
	begin, end time.Time
	joined     bool // its join is in the capture
	idx        int
}

func groupID(i int) string { return fmt.Sprintf("g%d", i+1) }

// groupOf builds the section of the i-th group of the Snapshot.
func groupOf(in *Input, i int, hz *hazards) *groupView {
	g := &in.Snapshot.Groups[i]
	gv := &groupView{ID: groupID(i), Name: g.Group, Type: g.GroupType, Protocol: g.Protocol, State: g.State,
		Coordinator: jsonout.CoordinatorText(&g.Coordinator), Generation: g.Generation, Hazards: hz.byGroup[g.Group]}
	if gv.Protocol == "" {
		gv.Protocol = g.ProtocolType
	}
	from, to := groupSpan(in, g)
	ts := newTimeScale(from, to)
	ms := memberIndex(gv.ID, g, to)
	for _, hv := range gv.Hazards {
		if m := ms.byID[hv.memberID]; m != nil {
			hv.MemberRef, hv.Member = m.Ref, m.Label+" "+hv.memberID
		}
	}
	spans := genSpans(g.Generations, to)
	gv.gens(g, ms, spans, in.Recorder)
	gv.members(g, ms)
	var earlier int64
	if r := in.Recorder; r != nil && r.gens[g.Group] != nil {
		earlier = max(r.gens[g.Group].events-int64(len(g.Generations)), 0)
	}
	gv.Timeline = groupTimeline(ts, spans, ms, gv, earlier)
	gv.Owners = ownership(ts, g, spans, ms)
	gv.Charts, gv.Parts = offsetCharts(ts, in.Recorder, gv, g, ms)
	if sh := g.Share; sh != nil {
		gv.Share, gv.ShareMembers = jsonTable(sh.Partitions), jsonTable(sh.Members)
	}
	for _, k := range slices.Sorted(maps.Keys(g.Errors)) {
		gv.Errors = append(gv.Errors, kv{K: k, V: fmt.Sprint(g.Errors[k])})
	}
	return gv
}

// groupSpan is the time the group's figures cover: from the first thing
// known of it to the end of the capture.
func groupSpan(in *Input, g *correlate.Group) (from, to time.Time) {
	to = in.Snapshot.Time.UTC()
	from = to
	early := func(t time.Time) {
		if !t.IsZero() && t.Before(from) {
			from = t
		}
	}
	for i := range g.Generations {
		if e := &g.Generations[i]; e.Started != nil {
			early(e.Started.Time)
		} else {
			early(e.Time())
		}
	}
	for i := range g.Members {
		early(g.Members[i].FirstSeen.Time)
		if j := g.Members[i].JoinedAt; j != nil {
			early(j.Time)
		}
	}
	for i := range g.Partitions {
		for _, c := range g.Partitions[i].Commits {
			early(c.TS.Time)
		}
	}
	if r := in.Recorder; r != nil {
		for k, s := range r.series {
			if k.group == g.Group && len(s.points) > 0 {
				early(s.points[0].at)
			}
		}
		if c := r.gens[g.Group]; c != nil {
			early(c.first)
		}
	}
	for _, h := range in.Snapshot.Hazards {
		if h.Group == g.Group {
			early(h.Time())
		}
	}
	return from.UTC(), to
}

// memberIndex labels the group's members m1, m2... by first appearance:
// the Snapshot's members, then members only its generations name.
func memberIndex(gid string, g *correlate.Group, end time.Time) *members {
	ms := &members{byID: map[string]*member{}}
	for i := range g.Members {
		m := &g.Members[i]
		x := &member{m: m, begin: m.FirstSeen.Time, end: end}
		if m.JoinedAt != nil {
			x.begin, x.joined = m.JoinedAt.Time, true
		}
		if m.GoneAt != nil {
			x.end = m.GoneAt.Time
		}
		x.ID = m.MemberID
		ms.order = append(ms.order, x)
	}
	slices.SortStableFunc(ms.order, func(a, b *member) int { return a.begin.Compare(b.begin) })
	for _, x := range ms.order {
		ms.byID[x.ID] = x
	}
	for i := range g.Generations {
		for _, gm := range g.Generations[i].Members {
			if ms.byID[gm.MemberID] == nil {
				t := g.Generations[i].Time()
				x := &member{memberRef: memberRef{ID: gm.MemberID}, begin: t, end: t}
				ms.order = append(ms.order, x)
				ms.byID[x.ID] = x
			}
		}
	}
	for i, x := range ms.order {
		x.idx, x.Label = i, fmt.Sprintf("m%d", i+1)
		if i < maxMemberRows { // those listed have an anchor
			x.Ref = fmt.Sprintf("%s-m%d", gid, i+1)
		}
	}
	return ms
}

type members struct {
	byID  map[string]*member
	order []*member
}

func (ms *members) ref(id string) memberRef {
	if m := ms.byID[id]; m != nil {
		return m.memberRef
	}
	return memberRef{ID: id}
}

func (gv *groupView) members(g *correlate.Group, ms *members) {
	for _, x := range ms.order {
		if len(gv.Members) >= maxMemberRows {
			gv.MembersMore++
			continue
		}
		if x.m == nil {
			gv.Members = append(gv.Members, memberRow{Ref: x.Ref, Label: x.Label, MemberID: x.ID,
				Status: "forgotten (--max-members): only its generations remember it"})
			continue
		}
		m := x.m
		r := memberRow{Ref: x.Ref, Label: x.Label, MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost,
			Status: m.Status, Reason: m.Reason, Assignment: correlate.MemberAssignmentText(m.Assignment, m.Tasks),
			Heartbeats: m.Heartbeats, MaxGapMillis: m.MaxHeartbeatGapMillis, SessionMillis: int64(m.SessionTimeoutMillis)}
		if m.InstanceID != nil {
			r.Instance = *m.InstanceID
		}
		if m.PID != 0 {
			r.Process = fmt.Sprintf("%s (pid %d)", m.Comm, m.PID)
		}
		r.Joined = "not in the capture (first seen " + clock(m.FirstSeen.Time) + ")"
		if m.JoinedAt != nil {
			r.Joined = clock(m.JoinedAt.Time)
		}
		if m.GoneAt != nil {
			r.Gone = clock(m.GoneAt.Time)
		}
		if m.LastSeen != nil {
			r.LastSeen = clock(m.LastSeen.Time)
		}
		for _, hv := range memberHazards(gv.Hazards, m.MemberID) {
			if i := slices.IndexFunc(r.Hazards, func(l hazardLink) bool { return l.Kind == hv.Kind }); i >= 0 {
				r.Hazards[i].N++
				continue
			}
			r.Hazards = append(r.Hazards, hazardLink{hv, 1})
		}
		gv.Members = append(gv.Members, r)
	}
}

func (gv *groupView) gens(g *correlate.Group, ms *members, spans []genSpan, r *Recorder) {
	if r != nil {
		if c := r.gens[g.Group]; c != nil && c.events > int64(len(g.Generations)) {
			gv.GensNote = fmt.Sprintf("%d generations in the capture; the last %d are remembered (--max-generations) and listed",
				c.events, len(g.Generations))
		}
	}
	for i := range spans {
		if len(gv.Gens) >= maxGenRows {
			gv.GensNote += fmt.Sprintf("; %d more not listed", len(spans)-maxGenRows)
			break
		}
		e := spans[i].ev
		row := genRow{ID: genID(gv.ID, e.Generation), N: e.Generation, Cause: e.Cause.Kind, CauseReason: e.Cause.Reason,
			MembersFrom: e.MembersFrom, Protocol: e.Protocol, Complete: e.Complete, Missed: e.Missed,
			Evidence: evidenceRows(e.Evidence), Started: "-", Completed: "-", Took: "-"}
		if e.Cause.Member != "" {
			row.CauseMember = ms.ref(e.Cause.Member)
		}
		if e.Leader != "" {
			row.Leader = ms.ref(e.Leader)
		}
		if e.Started != nil {
			row.Started = clock(e.Started.Time)
		}
		if e.Completed != nil {
			row.Completed = clock(e.Completed.Time)
		}
		if e.DurationMillis != nil {
			row.Took = dur(time.Duration(*e.DurationMillis) * time.Millisecond)
		}
		for _, gm := range e.Members {
			row.Members = append(row.Members, ms.ref(gm.MemberID))
		}
		gv.Gens = append(gv.Gens, row)
		spans[i].ref = row.ID
	}
}

func genID(gid string, n int32) string { return fmt.Sprintf("%s-gen%d", gid, n) }

// genSpan is when a generation was the group's: from its rebalance's
// start (begin) through its completion (stable) to the next one's start.
type genSpan struct {
	ev                *correlate.GenerationEvent
	begin, stable, to time.Time
	ref               string // its row's anchor, when listed
}

func genSpans(gens []correlate.GenerationEvent, end time.Time) []genSpan {
	out := make([]genSpan, len(gens))
	for i := range gens {
		e := &gens[i]
		s := genSpan{ev: e, begin: e.Time(), stable: e.Time()}
		if e.Started != nil {
			s.begin = e.Started.Time
		}
		if e.Completed != nil {
			s.stable = e.Completed.Time
		}
		if s.stable.Before(s.begin) {
			s.stable = s.begin
		}
		out[i] = s
	}
	for i := range out {
		out[i].to = end
		if i+1 < len(out) && out[i+1].begin.Before(end) {
			out[i].to = out[i+1].begin
		}
		if out[i].to.Before(out[i].stable) {
			out[i].to = out[i].stable
		}
	}
	return out
}
