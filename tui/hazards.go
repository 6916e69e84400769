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

// hazardsView is the hazard feed: newest first (or most severe first).
type hazardsView struct {
	table  *tview.Table
	all    []*correlate.HazardEvent
	rows   []*correlate.HazardEvent
	sort   int
	filter string
	counts map[string]int
	listed int
	ids    idForm
}

func newHazardsView() *hazardsView {
	v := &hazardsView{table: tview.NewTable()}
	v.table.SetFixed(1, 0).SetSelectable(true, false).SetSeparator(' ')
	v.table.SetSelectedStyle(tcell.StyleDefault.Reverse(true))
	v.render()
	return v
}

func (v *hazardsView) sortName() string { return hazardSorts[v.sort] }

func (v *hazardsView) nextSort() {
	v.sort = (v.sort + 1) % len(hazardSorts)
	v.render()
}

func (v *hazardsView) setFilter(s string) {
	v.filter = s
	v.render()
}

func (v *hazardsView) update(fr *Frame) {
	v.all = fr.Hazards
	if fr.Snapshot != nil {
		v.counts = fr.Snapshot.HazardCounts
	}
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

func (v *hazardsView) render() {
	keep := v.selected()
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
		t.SetCell(y, 2, tview.NewTableCell(h.Kind).SetMaxWidth(22).SetTextColor(col))
		t.SetCell(y, 3, tview.NewTableCell(tview.Escape(orDash(h.Group))).SetMaxWidth(16))
		t.SetCell(y, 4, tview.NewTableCell(tview.Escape(v.ids.in(h.Summary))).SetExpansion(1))
	}
	settle(t, len(v.rows), sel, v.filter != "", "no hazard reported", "no hazard matches the filter (esc clears it)")
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
