package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kwire/kwire/correlate"
)

// groupRow is one row of the Groups view.
type groupRow struct {
	name, state, protocol string
	gen                   int32
	live, members         int
	lag                   int64
	lagKnown              bool
	lagSeconds            float64 // -1 unknown
	lagEstimated          bool
	parts                 int
	hz                    [4]int // by severity rank
	lastAt                time.Time
	lastCause             string
}

func newGroupRow(g *correlate.Group) groupRow {
	r := groupRow{name: g.Group, state: g.State, gen: g.Generation, members: len(g.Members), parts: len(g.Partitions)}
	r.protocol = g.Protocol
	if g.ProtocolType != "" && g.ProtocolType != "consumer" {
		r.protocol = g.ProtocolType + "/" + g.Protocol
	}
	if g.Share != nil { // a share group: no assignor, no committed offsets
		r.protocol, r.parts = "share", len(g.Share.Partitions)
	}
	for _, m := range g.Members {
		if m.Status == "live" {
			r.live++
		}
	}
	if g.Lag != nil {
		r.lag, r.lagKnown = *g.Lag, true
	}
	r.lagSeconds = -1
	if g.LagSeconds != nil {
		r.lagSeconds, r.lagEstimated = *g.LagSeconds, g.LagSecondsEstimated
	}
	for _, h := range g.Hazards {
		r.hz[correlate.SeverityRank(h.Severity)] += h.Count
	}
	if n := len(g.Generations); n > 0 {
		e := &g.Generations[n-1]
		r.lastAt, r.lastCause = generationTime(e), e.Cause.Kind
	}
	return r
}

// hazardText is the HAZARDS cell: "C1 W2 I3", the non-zero counts by
// severity (C critical, W warn, I info), or "-".
func (r *groupRow) hazardText() string {
	var parts []string
	for rank := 3; rank >= 1; rank-- {
		if n := r.hz[rank]; n > 0 {
			parts = append(parts, fmt.Sprintf("%c%d", "?IWC"[rank], n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// groupSorts are the Groups view's orders, in the order s cycles them.
var groupSorts = []struct {
	name string
	less func(a, b *groupRow) bool
}{
	{"name", func(a, b *groupRow) bool { return a.name < b.name }},
	{"lag", func(a, b *groupRow) bool { return a.lag > b.lag }},
	{"hazards", func(a, b *groupRow) bool {
		for rank := 3; rank >= 1; rank-- {
			if a.hz[rank] != b.hz[rank] {
				return a.hz[rank] > b.hz[rank]
			}
		}
		return false
	}},
	{"members", func(a, b *groupRow) bool { return a.live > b.live }},
	{"rebalance", func(a, b *groupRow) bool { return a.lastAt.After(b.lastAt) }},
	{"state", func(a, b *groupRow) bool { return a.state < b.state }},
	{"lag seconds", func(a, b *groupRow) bool { return a.lagSeconds > b.lagSeconds }},
}

// maxNameWidth is the widest a list's group name column gets; columns
// are otherwise as wide as their widest cell, none stretched to fill the
// screen.
const maxNameWidth = 40

// groupsView is the home view: one row per group.
type groupsView struct {
	table  *tview.Table
	rows   []groupRow
	sort   int
	filter string
	all    []groupRow
}

func newGroupsView() *groupsView {
	v := &groupsView{table: tview.NewTable()}
	v.table.SetFixed(1, 1).SetSelectable(true, false).SetSeparator(' ')
	v.table.SetSelectedStyle(tcell.StyleDefault.Reverse(true))
	v.render()
	return v
}

func (v *groupsView) sortName() string { return groupSorts[v.sort].name }

func (v *groupsView) nextSort() {
	v.sort = (v.sort + 1) % len(groupSorts)
	v.render()
}

func (v *groupsView) setFilter(s string) {
	v.filter = s
	v.render()
}

func (v *groupsView) update(fr *Frame) {
	v.all = v.all[:0]
	if fr.Snapshot != nil {
		for i := range fr.Snapshot.Groups {
			v.all = append(v.all, newGroupRow(&fr.Snapshot.Groups[i]))
		}
	}
	v.render()
}

// selected returns the selected group's name, "" if none.
func (v *groupsView) selected() string {
	row, _ := v.table.GetSelection()
	if row < 1 || row > len(v.rows) {
		return ""
	}
	return v.rows[row-1].name
}

// matches reports whether a row passes the filter: a case-insensitive
// substring of its name, state or protocol.
func (v *groupsView) matches(r *groupRow) bool {
	if v.filter == "" {
		return true
	}
	f := strings.ToLower(v.filter)
	for _, s := range []string{r.name, r.state, r.protocol} {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// render rebuilds the table, keeping the selected group selected.
func (v *groupsView) render() {
	keep := v.selected()
	v.rows = v.rows[:0]
	for i := range v.all {
		if v.matches(&v.all[i]) {
			v.rows = append(v.rows, v.all[i])
		}
	}
	less := groupSorts[v.sort].less
	sort.SliceStable(v.rows, func(i, j int) bool {
		if less(&v.rows[i], &v.rows[j]) {
			return true
		}
		if less(&v.rows[j], &v.rows[i]) {
			return false
		}
		return v.rows[i].name < v.rows[j].name
	})
	t := v.table
	t.Clear()
	header(t, "GROUP", "STATE", "GEN", "LIVE/ALL", "LAG", "LAG(S)", "HAZARDS", "LAST REBALANCE", "PARTS", "PROTOCOL")
	sel := 0
	for i := range v.rows {
		r := &v.rows[i]
		y := i + 1
		if r.name == keep {
			sel = y
		}
		for x, cl := range r.cells() {
			t.SetCell(y, x, cl)
		}
	}
	settle(t, len(v.rows), sel, v.filter != "", "no consumer group seen yet", "no group matches the filter (esc clears it)")
}

// cells are the row's table cells; state and hazards are coloured and
// written out.
func (r *groupRow) cells() []*tview.TableCell {
	lag := "-"
	if r.lagKnown {
		lag = count(r.lag)
	}
	last := "-"
	if !r.lastAt.IsZero() {
		last = r.lastAt.UTC().Format("15:04:05") + " " + r.lastCause
	}
	return []*tview.TableCell{
		tview.NewTableCell(tview.Escape(r.name)).SetMaxWidth(maxNameWidth),
		tview.NewTableCell(r.state).SetTextColor(colorOf(stateColor(r.state))),
		tview.NewTableCell(fmt.Sprint(r.gen)).SetAlign(tview.AlignRight),
		tview.NewTableCell(fmt.Sprintf("%d/%d", r.live, r.members)).SetAlign(tview.AlignRight),
		tview.NewTableCell(lag).SetAlign(tview.AlignRight),
		tview.NewTableCell(correlate.LagSecondsText(r.lagSecondsPtr(), r.lagEstimated)).SetAlign(tview.AlignRight),
		tview.NewTableCell(r.hazardText()).SetTextColor(colorOf(hazardColor(r.hz))),
		tview.NewTableCell(tview.Escape(last)).SetMaxWidth(26),
		tview.NewTableCell(fmt.Sprint(r.parts)).SetAlign(tview.AlignRight),
		tview.NewTableCell(tview.Escape(orDash(r.protocol))).SetMaxWidth(24),
	}
}

// hazardColor is the colour of the worst severity counted.
func hazardColor(hz [4]int) string {
	switch {
	case hz[3] > 0:
		return severityColor(correlate.SeverityCritical)
	case hz[2] > 0:
		return severityColor(correlate.SeverityWarn)
	case hz[1] > 0:
		return severityColor(correlate.SeverityInfo)
	}
	return ""
}

// colorOf turns a tview colour name into a tcell colour ("": default).
func colorOf(name string) tcell.Color {
	if name == "" {
		return tcell.ColorDefault
	}
	return tcell.GetColor(name)
}

// lagSecondsPtr is the row's lag in seconds, nil when unknown.
func (r *groupRow) lagSecondsPtr() *float64 {
	if r.lagSeconds < 0 {
		return nil
	}
	return &r.lagSeconds
}
