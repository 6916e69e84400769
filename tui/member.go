package tui

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rivo/tview"

	"github.com/kwire/kwire/correlate"
)

// memberView is one member of a group (enter on its row in the group's
// detail): who it is, its heartbeats, the generations it was in with what
// each assigned it, what its Fetches got, its commits and its hazards.
type memberView struct {
	pane    *textPane
	ids     idForm
	group   string
	id      string
	g       *correlate.Group
	m       *correlate.Member
	now     time.Time
	hazards []*correlate.HazardEvent
}

func newMemberView() *memberView {
	v := &memberView{}
	v.pane = newTextPane(v.render)
	return v
}

// set shows member id of group from fr.
func (v *memberView) set(group, id string, fr *Frame) {
	v.group, v.id = group, id
	v.pane.ScrollToBeginning()
	v.update(fr)
}

func (v *memberView) update(fr *Frame) {
	v.g, v.m, v.hazards = nil, nil, v.hazards[:0]
	if fr == nil || fr.Snapshot == nil {
		v.pane.invalidate()
		return
	}
	v.now = fr.Snapshot.Time.Time
	v.g = findGroup(fr.Snapshot, v.group)
	if v.g != nil {
		for i := range v.g.Members {
			if v.g.Members[i].MemberID == v.id {
				v.m = &v.g.Members[i]
			}
		}
	}
	for _, h := range fr.Hazards {
		if h.Group == v.group && h.MemberID == v.id {
			v.hazards = append(v.hazards, h)
		}
	}
	v.pane.invalidate()
}

// findGroup returns group name of s, nil if it has none.
func findGroup(s *correlate.Snapshot, name string) *correlate.Group {
	for i := range s.Groups {
		if s.Groups[i].Group == name {
			return &s.Groups[i]
		}
	}
	return nil
}

func (v *memberView) render(width int) string {
	var b strings.Builder
	m := v.m
	if m == nil {
		fmt.Fprintf(&b, "member %s of group %s: not in the capture (yet)\n", tview.Escape(v.ids.id(v.id)), tview.Escape(v.group))
		return b.String()
	}
	fmt.Fprintf(&b, "[::b]%s[::-]  of %s  client %s on %s  status %s  generation %d\n", tview.Escape(v.ids.id(m.MemberID)),
		tview.Escape(v.group), tview.Escape(orDash(m.ClientID)), tview.Escape(orDash(m.ClientHost)), strings.ToUpper(m.Status), m.Generation)
	v.facts(&b, m, width)
	v.generations(&b, width)
	v.fetched(&b, m, width)
	v.commits(&b, width)
	if len(v.hazards) > 0 {
		fmt.Fprintf(&b, "\n[::u]HAZARDS[::-] %d, newest first\n", len(v.hazards))
		rows := make([][]cell, 0, len(v.hazards))
		for _, h := range v.hazards {
			rows = append(rows, []cell{c(clock(h.Time())), {text: severityLabel(h.Severity), color: severityColor(h.Severity)}, c(h.Kind)})
		}
		writeTable(&b, width, []col{{title: "TIME"}, {title: "SEVERITY"}, {title: "KIND", shrink: 10}}, rows)
	}
	return b.String()
}

// facts are the member's fields, one a line.
func (v *memberView) facts(b *strings.Builder, m *correlate.Member, width int) {
	hb := cell{text: "-"}
	if m.Status == "live" {
		hb = heartbeatCell(v.now, m.LastSeen, m.SessionTimeoutMillis)
	}
	instance := "- (dynamic)"
	if m.InstanceID != nil {
		instance = *m.InstanceID
	}
	gone := "-"
	if m.GoneAt != nil {
		gone = clock(m.GoneAt.Time) + " " + m.Reason
	}
	proc := "-"
	if m.PID != 0 || m.Comm != "" {
		proc = fmt.Sprintf("%d/%s", m.PID, m.Comm)
	}
	rows := [][]cell{
		{c("member id"), c(m.MemberID)},
		{c("instance id"), c(instance)},
		{c("process"), c(proc)},
		{c("joined"), c(clockp(m.JoinedAt))},
		{c("first seen"), c(clock(m.FirstSeen.Time))},
		{c("last request"), hb},
		{c("gone"), c(gone)},
		{c("heartbeats"), cf("%d, longest gap %s of a %s session timeout; %d answered REBALANCE_IN_PROGRESS", m.Heartbeats,
			dur(time.Duration(m.MaxHeartbeatGapMillis)*time.Millisecond), dur(time.Duration(m.SessionTimeoutMillis)*time.Millisecond), m.RebalanceInProgress)},
		{c("rebalance timeout"), c(dur(time.Duration(m.RebalanceTimeoutMillis) * time.Millisecond))},
		{c("protocols"), c(orDash(strings.Join(m.Protocols, ", ")))},
		{c("subscription"), c(orDash(strings.Join(m.Subscription, ", ")))},
		{c("assigned now"), c(correlate.MemberAssignmentText(m.Assignment, m.Tasks))},
	}
	b.WriteString("\n")
	writeTable(b, width, []col{{title: "FIELD"}, {title: "VALUE", shrink: 10}}, rows)
}

// generations writes the generations the member was in, newest first,
// with what each assigned it and how that changed from the one before.
func (v *memberView) generations(b *strings.Builder, width int) {
	gens := v.g.Generations
	type in struct {
		e *correlate.GenerationEvent
		m *correlate.GenerationMember
	}
	var mine []in
	for i := range gens {
		for j := range gens[i].Members {
			if gens[i].Members[j].MemberID == v.id {
				mine = append(mine, in{&gens[i], &gens[i].Members[j]})
			}
		}
	}
	fmt.Fprintf(b, "\n[::u]GENERATIONS AND ASSIGNMENTS[::-] in %d of %d, newest first\n", len(mine), len(gens))
	rows := make([][]cell, 0, min(len(mine), maxGenerationsShown))
	for i := len(mine) - 1; i >= 0 && len(rows) < maxGenerationsShown; i-- {
		e, gm := mine[i].e, mine[i].m
		var prev map[string][]int32
		if i > 0 {
			prev = mine[i-1].m.Assignment
		}
		change := assignmentChange(prev, gm.Assignment)
		cause := e.Cause.Kind
		if e.Cause.Reason != "" {
			cause += ": " + e.Cause.Reason
		}
		leader := ""
		if e.Leader == v.id {
			leader = "leader"
		}
		rows = append(rows, []cell{cf("%d", e.Generation), c(clock(generationTime(e))), c(correlate.MemberAssignmentText(gm.Assignment, gm.Tasks)),
			c(change), c(leader), c(v.ids.in(cause))})
	}
	if n := len(mine) - len(rows); n > 0 {
		rows = append(rows, []cell{c("…"), cf("%d older", n)})
	}
	writeTable(b, width, []col{{title: "GEN", right: true}, {title: "WHEN"}, {title: "ASSIGNED", shrink: 10}, {title: "CHANGE", shrink: 8},
		{title: "ROLE"}, {title: "CAUSE", shrink: 10}}, rows)
}

// generationTime is when a generation completed, else started, else was
// reported.
func generationTime(e *correlate.GenerationEvent) time.Time {
	switch {
	case e.Completed != nil:
		return e.Completed.Time
	case e.Started != nil:
		return e.Started.Time
	}
	return e.Time()
}

// assignmentChange is what changed between two assignments: the
// partitions gained (+) and lost (-) per topic, "=" for none.
func assignmentChange(prev, cur map[string][]int32) string {
	diff := func(a, b []int32) []int32 {
		var out []int32
		for _, p := range a {
			if !slices.Contains(b, p) {
				out = append(out, p)
			}
		}
		return out
	}
	var parts []string
	topics := slices.Sorted(maps.Keys(cur))
	for _, t := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := cur[t]; !ok {
			topics = append(topics, t)
		}
	}
	for _, t := range topics {
		if add := diff(cur[t], prev[t]); len(add) > 0 {
			parts = append(parts, "+"+correlate.AssignmentText(map[string][]int32{t: add}))
		}
		if gone := diff(prev[t], cur[t]); len(gone) > 0 {
			parts = append(parts, "-"+correlate.AssignmentText(map[string][]int32{t: gone}))
		}
	}
	if len(parts) == 0 {
		return "="
	}
	return strings.Join(parts, " ")
}

// fetched writes what the Fetches attributed to the member got.
func (v *memberView) fetched(b *strings.Builder, m *correlate.Member, width int) {
	fmt.Fprintf(b, "\n[::u]FETCHED[::-] %d partitions\n", len(m.Fetched))
	rows := make([][]cell, 0, len(m.Fetched))
	for _, f := range m.Fetched {
		rows = append(rows, fetchRow(f.Topic, f.Partition, &f.Fetch))
	}
	writeTable(b, width, fetchCols, rows)
}

// fetchCols and fetchRow are a table of what Fetches got per partition.
var fetchCols = []col{{title: "TOPIC", shrink: 8}, {title: "PART", right: true}, {title: "POSITION", right: true},
	{title: "HWM", right: true}, {title: "BEHIND", right: true}, {title: "RECORDS", right: true}, {title: "BYTES", right: true},
	{title: "FETCHES", right: true}, {title: "LAST FETCH"}, {title: "ERROR", shrink: 6}}

func fetchRow(topic string, part int32, f *correlate.Fetch) []cell {
	errText := "-"
	if f.LastErrorCode != 0 {
		errText = f.LastError
	}
	return []cell{c(topic), cf("%d", part), c(opt(f.Position)), c(opt(f.HighWatermark)), c(opt(f.PositionLag)),
		c(count(f.Records)), c(bytesText(f.Bytes)), c(count(f.Fetches)), c(clockp(f.LastFetch)), c(errText)}
}

// commits writes the member's remembered commits, newest first.
func (v *memberView) commits(b *strings.Builder, width int) {
	all := recentCommits(v.g, v.id)
	fmt.Fprintf(b, "\n[::u]COMMITS[::-] %d remembered, newest first\n", len(all))
	rows := make([][]cell, 0, maxCommitsShown)
	for _, cm := range all[:min(len(all), maxCommitsShown)] {
		rows = append(rows, []cell{c(clock(cm.TS.Time)), cf("%s/%d", cm.topic, cm.part), cf("%d", cm.Offset), cf("%d", cm.Generation), commitResult(cm.ErrorCode)})
	}
	writeTable(b, width, []col{{title: "TIME"}, {title: "PARTITION", shrink: 10}, {title: "OFFSET", right: true},
		{title: "GEN", right: true}, {title: "RESULT", shrink: 8}}, rows)
}
