package tui

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwire/kwire/correlate"
)

// textPane is a scrolling text view whose text is written for its width,
// again whenever the width or the data change.
type textPane struct {
	*tview.TextView
	render func(width int) string
	width  int
	dirty  bool
}

func newTextPane(render func(width int) string) *textPane {
	p := &textPane{TextView: tview.NewTextView(), render: render, dirty: true}
	p.SetDynamicColors(true).SetWrap(false).SetScrollable(true)
	return p
}

// invalidate makes the next Draw write the text again.
func (p *textPane) invalidate() { p.dirty = true }

// Draw implements tview.Primitive.
func (p *textPane) Draw(screen tcell.Screen) {
	_, _, w, _ := p.GetInnerRect()
	if w != p.width || p.dirty {
		p.width, p.dirty = w, false
		p.SetText(p.render(max(w, 20)))
	}
	p.TextView.Draw(screen)
}

// Limits of the detail view's lists.
const (
	maxGenerationsShown = 30
	maxCommitsShown     = 20
)

// detailView is one group: members, generations, partitions, commits.
// A member or partition row is selected (sel), to open.
type detailView struct {
	pane  *textPane
	ids   idForm
	group string
	g     *correlate.Group
	now   time.Time
	sel   pick
	// selLine is the selected row's line in the text rendered last (-1:
	// none); keepSel has the next render scroll to it, if needed (it was
	// on screen before new data moved it).
	selLine int
	keepSel bool
	// procs are the client processes known (eBPF), by host and client id.
	procs map[clientKey]*ClientStats
}

func newDetailView() *detailView {
	v := &detailView{}
	v.pane = newTextPane(v.render)
	return v
}

// set shows group from fr.
func (v *detailView) set(group string, fr *Frame) {
	if group != v.group {
		v.sel = pick{}
	}
	v.group = group
	v.pane.ScrollToBeginning()
	v.update(fr)
}

func (v *detailView) update(fr *Frame) {
	v.keepSel = v.onScreen(v.selLine)
	v.g = nil
	clear(v.procs)
	if fr != nil {
		for i := range fr.Traffic.Clients {
			if cl := &fr.Traffic.Clients[i]; cl.PID != 0 || cl.Comm != "" {
				if v.procs == nil {
					v.procs = make(map[clientKey]*ClientStats)
				}
				v.procs[clientKey{cl.Host, cl.ClientID}] = cl
			}
		}
	}
	if fr != nil && fr.Snapshot != nil {
		v.now = fr.Snapshot.Time.Time
		for i := range fr.Snapshot.Groups {
			if fr.Snapshot.Groups[i].Group == v.group {
				v.g = &fr.Snapshot.Groups[i]
			}
		}
	}
	v.pane.invalidate()
}

func (v *detailView) render(width int) string {
	var b strings.Builder
	g := v.g
	v.selLine = -1
	if g == nil {
		fmt.Fprintf(&b, "group %s: not in the capture (yet)\n", tview.Escape(v.group))
		return b.String()
	}
	selM, selP := v.selection(g)
	v.header(&b, g, width)
	v.members(&b, g, width, selM)
	v.generations(&b, g, width)
	if g.Share != nil {
		v.share(&b, g, width)
		return b.String()
	}
	v.partitions(&b, g, width, selP)
	v.commits(&b, g, width)
	if v.keepSel {
		v.keepSel = false
		v.scrollTo(v.selLine)
	}
	return b.String()
}

// share is a share group's records (KIP-932) in place of partitions and
// commits: per partition what was acquired, redelivered and acknowledged,
// lock expiries, the highest delivery count and what is held; then per
// member.
func (v *detailView) share(b *strings.Builder, g *correlate.Group, width int) {
	s := g.Share
	fmt.Fprintf(b, "\n[::u]SHARE RECORDS[::-] %d partitions\n", len(s.Partitions))
	warn := func(n int64, text string) cell {
		if n > 0 {
			return cell{text: text, color: severityColor(correlate.SeverityWarn)}
		}
		return c(text)
	}
	rows := make([][]cell, 0, len(s.Partitions))
	for _, p := range s.Partitions {
		rows = append(rows, []cell{c(p.Topic), cf("%d", p.Partition), cf("%d", p.Acquired), warn(p.Redelivered, fmt.Sprint(p.Redelivered)),
			cf("%d", p.Accepted), warn(p.Released, fmt.Sprint(p.Released)), cf("%d", p.Rejected), warn(p.LockExpired, fmt.Sprint(p.LockExpired)),
			cf("%d", p.MaxDeliveryCount), cf("%d", p.Held)})
	}
	writeTable(b, width, []col{{title: "TOPIC", shrink: 8}, {title: "PART", right: true}, {title: "ACQUIRED", right: true},
		{title: "REDELIV", right: true}, {title: "ACCEPT", right: true}, {title: "RELEASE", right: true}, {title: "REJECT", right: true},
		{title: "LOCK EXP", right: true}, {title: "MAX DC", right: true}, {title: "HELD", right: true}}, rows)
	fmt.Fprintf(b, "\n[::u]SHARE MEMBERS[::-] %d\n", len(s.Members))
	rows = rows[:0]
	for _, m := range s.Members {
		rows = append(rows, []cell{c(v.ids.id(m.MemberID)), cf("%d", m.Acquired), warn(m.Redelivered, fmt.Sprint(m.Redelivered)), cf("%d", m.Accepted),
			warn(m.Released, fmt.Sprint(m.Released)), cf("%d", m.Rejected), warn(m.LockExpired, fmt.Sprint(m.LockExpired))})
	}
	writeTable(b, width, []col{{title: "MEMBER", shrink: 12, mid: true}, {title: "ACQUIRED", right: true}, {title: "REDELIV", right: true},
		{title: "ACCEPT", right: true}, {title: "RELEASE", right: true}, {title: "REJECT", right: true}, {title: "LOCK EXP", right: true}}, rows)
}

func (v *detailView) header(b *strings.Builder, g *correlate.Group, width int) {
	typ := g.GroupType
	if typ == "" {
		typ = "unknown type"
	}
	proto := " " + orDash(strings.Trim(g.ProtocolType+"/"+g.Protocol, "/"))
	if g.Share != nil && g.Protocol == "" {
		proto = "" // share groups have no protocol (the broker assigns)
	}
	fmt.Fprintf(b, "[::b]%s[::-]  %s%s  state [%s]%s[-]  generation %d\n", tview.Escape(g.Group), typ,
		tview.Escape(proto), orDefault(stateColor(g.State)), strings.ToUpper(g.State), g.Generation)
	coord := "unknown"
	switch c := &g.Coordinator; {
	case c.NodeID >= 0:
		coord = fmt.Sprintf("node %d (%s:%d)", c.NodeID, c.Host, c.Port)
	case c.ServedBy != "":
		coord = c.ServedBy
	}
	line := "coordinator " + coord + "  leader " + cut(orDash(v.ids.id(g.Leader)), 24, true)
	fmt.Fprintln(b, tview.Escape(cut(line, width, false)))
	if len(g.Hazards) > 0 {
		var hs []string
		for _, h := range g.Hazards {
			hs = append(hs, fmt.Sprintf("[%s]%s[-] %d %s", severityColor(h.Severity), severityLabel(h.Severity), h.Count, h.Kind))
		}
		fmt.Fprintf(b, "hazards: %s\n", strings.Join(hs, ", "))
	}
	if len(g.Errors) > 0 {
		var es []string
		for _, k := range slices.Sorted(maps.Keys(g.Errors)) {
			es = append(es, fmt.Sprintf("%s %d", k, g.Errors[k]))
		}
		fmt.Fprintln(b, tview.Escape(cut("errors: "+strings.Join(es, ", "), width, false)))
	}
}

// members writes the members' table, row sel selected (-1: none).
func (v *detailView) members(b *strings.Builder, g *correlate.Group, width, sel int) {
	live := 0
	for _, m := range g.Members {
		if m.Status == "live" {
			live++
		}
	}
	fmt.Fprintf(b, "\n[::u]MEMBERS[::-] %d live of %d\n", live, len(g.Members))
	rows := make([][]cell, 0, len(g.Members))
	withProc := false
	for _, m := range g.Members {
		hb := cell{text: "-"}
		if m.Status == "live" {
			hb = heartbeatCell(v.now, m.LastSeen, m.SessionTimeoutMillis)
		}
		st := cell{text: m.Status}
		if m.Status == "expired" {
			st.color = severityColor(correlate.SeverityWarn)
		}
		proc := v.process(m.ClientHost, m.ClientID)
		withProc = withProc || proc != "-"
		rows = append(rows, []cell{c(v.ids.id(m.MemberID)), c(m.ClientID), c(m.ClientHost), c(proc), st, cf("%d", m.Generation), hb,
			c(correlate.MemberAssignmentText(m.Assignment, m.Tasks))})
	}
	cols := []col{{title: "MEMBER", shrink: 12, mid: true}, {title: "CLIENT", shrink: 8}, {title: "HOST", shrink: 9},
		{title: "PID/COMM", shrink: 8}, {title: "STATUS"}, {title: "GEN", right: true}, {title: "HEARTBEAT"}, {title: "ASSIGNED", shrink: 10}}
	if !withProc { // packet captures do not know processes: no column
		cols = slices.Delete(cols, 3, 4)
		for i := range rows {
			rows[i] = slices.Delete(rows[i], 3, 4)
		}
	}
	v.selected(b, writeTableSel(b, width, cols, rows, sel))
}

// process is "pid/comm" of a client, "-" when unknown.
func (v *detailView) process(host, clientID string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "-"
	}
	cl := v.procs[clientKey{a, clientID}]
	if cl == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%s", cl.PID, cl.Comm)
}

// heartbeatCell is the age of a member's last request against its
// session timeout: a bar, then the numbers ("[###---] 1.2s/6s").
func heartbeatCell(now time.Time, last *correlate.Time, sessionMillis int32) cell {
	if last == nil {
		return cell{text: "?"}
	}
	age := max(now.Sub(last.Time), 0)
	if sessionMillis <= 0 {
		return cell{text: dur(age) + "/?"}
	}
	session := time.Duration(sessionMillis) * time.Millisecond
	frac := float64(age) / float64(session)
	color := "green"
	switch {
	case frac > 1:
		color = "red"
	case frac >= 2.0/3:
		color = "yellow"
	}
	return cell{text: bar(frac, 8) + " " + dur(age) + "/" + dur(session), color: color}
}

func (v *detailView) generations(b *strings.Builder, g *correlate.Group, width int) {
	gens := g.Generations
	fmt.Fprintf(b, "\n[::u]GENERATIONS[::-] %d, newest first\n", len(gens))
	rows := make([][]cell, 0, min(len(gens), maxGenerationsShown))
	for i := len(gens) - 1; i >= 0 && len(rows) < maxGenerationsShown; i-- {
		e := &gens[i]
		when := generationTime(e)
		took := "?"
		if e.DurationMillis != nil {
			took = dur(time.Duration(*e.DurationMillis) * time.Millisecond)
		}
		var prev []correlate.GenerationMember
		if i > 0 {
			prev = gens[i-1].Members
		}
		cause := e.Cause.Kind
		if e.Cause.Reason != "" {
			cause += ": " + e.Cause.Reason
		}
		rows = append(rows, []cell{cf("%d", e.Generation), c(clock(when)), c(took), cf("%d", len(e.Members)), c(memberChange(prev, e.Members, i == 0)), c(v.ids.in(cause))})
	}
	if n := len(gens) - len(rows); n > 0 {
		rows = append(rows, []cell{c("…"), cf("%d older", n)})
	}
	writeTable(b, width, []col{{title: "GEN", right: true}, {title: "WHEN"}, {title: "TOOK", right: true}, {title: "MEMBERS", right: true},
		{title: "JOINED/LEFT", shrink: 10}, {title: "CAUSE", shrink: 10}}, rows)
}

// memberChange names the members who joined (+) and left (-) between two
// generations, by client id.
func memberChange(prev, cur []correlate.GenerationMember, first bool) string {
	if first {
		return fmt.Sprintf("+%d", len(cur))
	}
	in := func(ms []correlate.GenerationMember, id string) bool {
		return slices.ContainsFunc(ms, func(m correlate.GenerationMember) bool { return m.MemberID == id })
	}
	var parts []string
	for _, m := range cur {
		if !in(prev, m.MemberID) {
			parts = append(parts, "+"+orDash(m.ClientID))
		}
	}
	for _, m := range prev {
		if !in(cur, m.MemberID) {
			parts = append(parts, "-"+orDash(m.ClientID))
		}
	}
	if len(parts) == 0 {
		return "="
	}
	return strings.Join(parts, " ")
}

// partitions writes the partitions' table, row sel selected (-1: none).
func (v *detailView) partitions(b *strings.Builder, g *correlate.Group, width, sel int) {
	fmt.Fprintf(b, "\n[::u]PARTITIONS[::-] %d\n", len(g.Partitions))
	rows := make([][]cell, 0, len(g.Partitions))
	for _, p := range g.Partitions {
		lag := cell{text: opt(p.Lag)}
		if p.Lag != nil && *p.Lag > 0 {
			lag.color = "yellow"
		}
		errText := "-"
		if p.LastErrorCode != 0 {
			errText = p.LastError
		}
		rows = append(rows, []cell{c(p.Topic), cf("%d", p.Partition), c(orDash(v.ids.id(p.Owner))), c(opt(p.Position)), c(opt(p.Committed)),
			c(opt(p.EndOffset)), lag, c(correlate.LagSecondsText(p.LagSeconds, p.LagSecondsEstimated)), c(errText)})
	}
	v.selected(b, writeTableSel(b, width, []col{{title: "TOPIC", shrink: 8}, {title: "PART", right: true}, {title: "OWNER", shrink: 10, mid: true},
		{title: "POSITION", right: true}, {title: "COMMITTED", right: true}, {title: "END", right: true}, {title: "LAG", right: true}, {title: "LAG(S)", right: true},
		{title: "FETCH ERROR", shrink: 6}}, rows, sel))
}

// partCommit is a commit with its partition.
type partCommit struct {
	topic string
	part  int32
	correlate.Commit
}

// recentCommits are g's remembered commits by member (all with member
// ""), newest first.
func recentCommits(g *correlate.Group, member string) []partCommit {
	var all []partCommit
	for _, p := range g.Partitions {
		for _, cm := range p.Commits {
			if member == "" || cm.MemberID == member {
				all = append(all, partCommit{p.Topic, p.Partition, cm})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].TS.After(all[j].TS.Time) })
	return all
}

func (v *detailView) commits(b *strings.Builder, g *correlate.Group, width int) {
	all := recentCommits(g, "")
	fmt.Fprintf(b, "\n[::u]RECENT COMMITS[::-] newest first\n")
	rows := make([][]cell, 0, maxCommitsShown)
	for _, cm := range all[:min(len(all), maxCommitsShown)] {
		rows = append(rows, []cell{c(clock(cm.TS.Time)), cf("%s/%d", cm.topic, cm.part), cf("%d", cm.Offset), c(orDash(v.ids.id(cm.MemberID))),
			cf("%d", cm.Generation), commitResult(cm.ErrorCode)})
	}
	writeTable(b, width, []col{{title: "TIME"}, {title: "PARTITION", shrink: 10}, {title: "OFFSET", right: true},
		{title: "MEMBER", shrink: 10, mid: true}, {title: "GEN", right: true}, {title: "RESULT", shrink: 8}}, rows)
}

// commitResult is a commit's answer: ok, the error's name and code, or no
// response.
func commitResult(code int16) cell {
	switch code {
	case 0:
		return cell{text: "ok"}
	case -1:
		return cell{text: "no response", color: "yellow"}
	}
	return cell{text: fmt.Sprintf("%s (%d)", errName(code), code), color: "red"}
}

// errName is Kafka's name of an error code.
func errName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("UNKNOWN_%d", code)
}

func orDefault(color string) string {
	if color == "" {
		return "-"
	}
	return color
}
