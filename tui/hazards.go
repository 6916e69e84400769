package tui

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kwire/kwire/correlate"
)

// hazardSorts are the Hazards view's orders, in the order s cycles them.
var hazardSorts = []string{"newest", "severity"}

// hazardSeverities are the Hazards view's severity filters, in the order v
// cycles them: the least severity shown, and its name in the tab bar.
var hazardSeverities = []struct {
	name    string
	minRank int
}{{"all", 0}, {"warn+", 2}, {"critical", 3}}

// previewLines is the height of the selected hazard's summary under the
// list (a rule, then the summary): the list cuts summaries at the
// screen's edge.
const previewLines = 5

// hazardsView is the hazard feed: newest first (or most severe first),
// and under it the selected hazard's whole summary.
type hazardsView struct {
	pane    *tview.Flex
	table   *tview.Table
	preview *textPane
	all     []*correlate.HazardEvent
	rows    []*correlate.HazardEvent
	sort    int
	sev     int // index in hazardSeverities
	filter  string
	ids     idForm
}

func newHazardsView() *hazardsView {
	v := &hazardsView{table: tview.NewTable()}
	v.table.SetFixed(1, 0).SetSelectable(true, false).SetSeparator(' ')
	v.table.SetSelectedStyle(tcell.StyleDefault.Reverse(true))
	v.preview = newTextPane(v.previewText)
	v.table.SetSelectionChangedFunc(func(int, int) { v.preview.invalidate() })
	v.pane = tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(v.table, 0, 1, true).
		AddItem(v.preview, previewLines, 0, false)
	v.render()
	return v
}

func (v *hazardsView) sortName() string { return hazardSorts[v.sort] }

func (v *hazardsView) nextSort() {
	v.sort = (v.sort + 1) % len(hazardSorts)
	v.render()
}

func (v *hazardsView) severityName() string { return hazardSeverities[v.sev].name }

func (v *hazardsView) nextSeverity() {
	v.sev = (v.sev + 1) % len(hazardSeverities)
	v.render()
}

// selectTop selects the first row and shows the list from its start.
func (v *hazardsView) selectTop() {
	if len(v.rows) > 0 {
		v.table.Select(1, 0)
	}
	v.table.ScrollToBeginning()
}

// previewText is the selected hazard's summary, whole, word-wrapped.
func (v *hazardsView) previewText(width int) string {
	h := v.selected()
	if h == nil {
		return ""
	}
	lines := tview.WordWrap(tview.Escape(severityLabel(h.Severity)+" "+h.Kind+": "+v.ids.in(h.Summary)), width)
	if len(lines) > previewLines-1 {
		lines = lines[:previewLines-1]
		last := strings.TrimRight(lines[len(lines)-1], " ")
		lines[len(lines)-1] = cut(last+" …", width, false)
	}
	return "[gray]" + strings.Repeat("─", width) + "[-]\n" + strings.Join(lines, "\n") + "\n"
}

func (v *hazardsView) setFilter(s string) {
	v.filter = s
	v.render()
}

func (v *hazardsView) update(fr *Frame) {
	v.all = fr.Hazards
	v.render()
}

// selected returns the selected hazard, nil if none.
func (v *hazardsView) selected() *correlate.HazardEvent {
	row, _ := v.table.GetSelection()
	if row < 1 || row > len(v.rows) {
		return nil
	}
	return v.rows[row-1]
}

// matches: a case-insensitive substring of the kind, severity, group,
// topic, member, client or summary.
func (v *hazardsView) matches(h *correlate.HazardEvent) bool {
	if correlate.SeverityRank(h.Severity) < hazardSeverities[v.sev].minRank {
		return false
	}
	if v.filter == "" {
		return true
	}
	f := strings.ToLower(v.filter)
	for _, s := range []string{h.Kind, h.Severity, severityLabel(h.Severity), h.Group, h.Topic, h.MemberID, h.ClientID, h.Summary} {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// render rebuilds the list, keeping the selected hazard selected; while
// the top row is selected it stays selected, so that the newest is.
func (v *hazardsView) render() {
	keep := v.selected()
	if row, _ := v.table.GetSelection(); row <= 1 {
		keep = nil
	}
	v.rows = v.rows[:0]
	for _, h := range v.all {
		if v.matches(h) {
			v.rows = append(v.rows, h)
		}
	}
	if hazardSorts[v.sort] == "severity" {
		sort.SliceStable(v.rows, func(i, j int) bool {
			return correlate.SeverityRank(v.rows[i].Severity) > correlate.SeverityRank(v.rows[j].Severity)
		})
	}
	t := v.table
	t.Clear()
	header(t, "TIME", "SEVERITY", "KIND", "GROUP", "SUMMARY")
	sel := 0
	for i, h := range v.rows {
		y := i + 1
		if h == keep {
			sel = y
		}
		col := colorOf(severityColor(h.Severity))
		t.SetCell(y, 0, tview.NewTableCell(clock(h.Time())))
		t.SetCell(y, 1, tview.NewTableCell(severityLabel(h.Severity)).SetTextColor(col))
		t.SetCell(y, 2, tview.NewTableCell(h.Kind).SetTextColor(col))
		t.SetCell(y, 3, tview.NewTableCell(tview.Escape(orDash(h.Group))).SetMaxWidth(maxNameWidth))
		t.SetCell(y, 4, tview.NewTableCell(tview.Escape(v.ids.in(withoutGroup(h.Summary, h.Group)))))
	}
	noMatch := "no hazard matches the filter (esc clears it)"
	switch {
	case v.sev > 0 && v.filter != "":
		noMatch = "no " + v.severityName() + " hazard matches the filter (esc clears it, v shows all severities)"
	case v.sev > 0:
		noMatch = "no " + v.severityName() + " hazard (v shows all severities)"
	}
	settle(t, len(v.rows), sel, len(v.all) > 0, "no hazard reported", noMatch)
	v.preview.invalidate()
}

// withoutGroup is a hazard's summary without the group it begins with
// (the list has a GROUP column): "g orders/0: ..." gives "orders/0: ...",
// "g: ..." gives "...".
func withoutGroup(summary, group string) string {
	if group == "" {
		return summary
	}
	if rest, ok := strings.CutPrefix(summary, group+": "); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(summary, group+" "); ok {
		return rest
	}
	return summary
}

// evidenceView is one hazard: what it says, its fields, and the exchanges
// it rests on.
type evidenceView struct {
	pane *textPane
	h    *correlate.HazardEvent
}

func newEvidenceView() *evidenceView {
	v := &evidenceView{}
	v.pane = newTextPane(v.render)
	return v
}

func (v *evidenceView) set(h *correlate.HazardEvent) {
	v.h = h
	v.pane.ScrollToBeginning()
	v.pane.invalidate()
}

// update does nothing: a hazard never changes once reported.
func (v *evidenceView) update(*Frame) {}

func (v *evidenceView) render(width int) string {
	h := v.h
	if h == nil {
		return "no hazard selected\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s::b]%s[-::-] [::b]%s[::-] at %s\n", severityColor(h.Severity), severityLabel(h.Severity), h.Kind, clock(h.Time()))
	para(&b, width, h.Summary)
	b.WriteString("\n")
	b.WriteString("[::u]EVIDENCE[::-] ")
	para(&b, width-9, fmt.Sprintf("%d exchange(s) the hazard rests on, oldest first: find them in Wireshark by the client port and kafka.correlation_id", len(h.Evidence)))
	rows := make([][]cell, 0, len(h.Evidence))
	for _, e := range h.Evidence {
		rows = append(rows, []cell{c(e.TS.UTC().Format("15:04:05.000000")), cf("c%d", e.Conn.ID), cf("%s > %s", e.Conn.Client, e.Conn.Broker),
			c(e.API), cf("%d", e.CorrelationID)})
	}
	writeTable(&b, width, []col{{title: "TIME"}, {title: "CONN", right: true}, {title: "CLIENT > BROKER", shrink: 12},
		{title: "API", shrink: 8}, {title: "CORR ID", right: true}}, rows)
	b.WriteString("\n")
	var fields [][]cell
	for _, kv := range hazardFields(h) {
		fields = append(fields, []cell{c(kv[0]), c(kv[1])})
	}
	writeTable(&b, width, []col{{title: "FIELD"}, {title: "VALUE", shrink: 10}}, fields)
	return b.String()
}

// hazardFields lists a hazard's set fields as name, value pairs, from its
// JSON form (so fields added to HazardEvent show up here too), in the
// order of the JSON, without those shown elsewhere.
func hazardFields(h *correlate.HazardEvent) [][2]string {
	raw, err := json.Marshal(h)
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return nil
	}
	var out [][2]string
	for dec.More() {
		tk, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tk.(string)
		var val any
		if err := dec.Decode(&val); err != nil {
			return out
		}
		switch name {
		case "kind", "severity", "summary", "evidence":
			continue
		}
		var s string
		switch x := val.(type) {
		case string:
			s = x
		case json.Number:
			s = x.String()
		default:
			bs, _ := json.Marshal(x)
			s = string(bs)
		}
		out = append(out, [2]string{name, s})
	}
	return out
}
