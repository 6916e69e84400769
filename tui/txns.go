package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kwire/kwire/correlate"
)

// txnsView lists the transactional ids (KIP-98) with their producer and
// how their transactions ended, then the transactional partitions' last
// stable offset against their high watermark. Its tab shows once the
// capture has either.
type txnsView struct {
	pane   *tview.Flex
	table  *tview.Table // transactional ids
	parts  *tview.Table // transactional partitions
	snap   *correlate.Snapshot
	filter string
	rows   int // transactional ids listed
}

func newTxnsView() *txnsView {
	v := &txnsView{table: tview.NewTable(), parts: tview.NewTable()}
	v.table.SetFixed(1, 0).SetSelectable(true, false).SetSeparator(' ')
	v.table.SetSelectedStyle(tcell.StyleDefault.Reverse(true))
	v.parts.SetFixed(1, 0).SetSeparator(' ')
	v.pane = tview.NewFlex().SetDirection(tview.FlexRow).AddItem(v.table, 0, 1, true).AddItem(v.parts, 0, 0, false)
	v.render()
	return v
}

func (v *txnsView) update(fr *Frame) {
	v.snap = fr.Snapshot
	v.render()
}

func (v *txnsView) setFilter(s string) {
	v.filter = s
	v.render()
}

// hasTxns says whether fr has anything for the view.
func hasTxns(fr *Frame) bool {
	return fr != nil && fr.Snapshot != nil && (len(fr.Snapshot.Transactions) > 0 || len(fr.Snapshot.StablePartitions) > 0)
}

func (v *txnsView) matches(fields ...string) bool {
	if v.filter == "" {
		return true
	}
	f := strings.ToLower(v.filter)
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

func (v *txnsView) render() {
	row, _ := v.table.GetSelection()
	t := v.table
	t.Clear()
	header(t, "TRANSACTIONAL ID", "CLIENT", "PRODUCER ID", "EPOCH", "STATE", "COMMITTED", "ABORTED", "TIMED OUT", "FENCED", "LONGEST")
	var txns []correlate.Transaction
	var parts []correlate.StablePartition
	var now time.Time
	if v.snap != nil {
		txns, parts, now = v.snap.Transactions, v.snap.StablePartitions, v.snap.Time.Time
	}
	y := 1
	for i := range txns {
		x := &txns[i]
		if !v.matches(x.TransactionalID, x.ClientID, x.ClientHost) {
			continue
		}
		state, col := "idle", tcell.ColorDefault
		if x.OpenSince != nil {
			state = "open " + now.Sub(x.OpenSince.Time).Round(time.Millisecond).String()
			if x.TimeoutMillis > 0 && now.Sub(x.OpenSince.Time) > time.Duration(x.TimeoutMillis)*time.Millisecond {
				col = colorOf(severityColor(correlate.SeverityWarn))
			}
		}
		cells := []string{x.TransactionalID, x.ClientID, fmt.Sprint(x.ProducerID), fmt.Sprint(x.ProducerEpoch), state,
			fmt.Sprint(x.Committed), fmt.Sprint(x.Aborted), fmt.Sprint(x.TimedOut), fmt.Sprint(x.Fenced),
			fmt.Sprintf("%dms", x.MaxDurationMillis)}
		for c, s := range cells {
			cell := tview.NewTableCell(tview.Escape(s))
			if c == 4 {
				cell.SetTextColor(col)
			}
			if c == 0 {
				cell.SetMaxWidth(28)
			}
			t.SetCell(y, c, cell)
		}
		y++
	}
	v.rows = y - 1
	if v.rows == 0 {
		msg := "no transactional producer in the capture"
		if v.filter != "" {
			msg = "no transactional id matches the filter (esc clears it)"
		}
		t.SetCell(y, 0, tview.NewTableCell(msg).SetSelectable(false))
		y++
	}
	v.parts.Clear()
	v.pane.ResizeItem(v.parts, 0, 0)
	if len(parts) > 0 {
		v.pane.ResizeItem(v.parts, 0, 1)
		header(v.parts, "PARTITION", "LAST STABLE", "HIGH WM", "UNSTABLE", "STUCK", "MAX STUCK", "MARKERS", "ABORTED TXNS", "HELD BY")
		y := 1
		for _, p := range parts {
			name := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
			if !v.matches(name, p.HeldBy) {
				continue
			}
			stuck := "-"
			if p.StuckSince != nil {
				stuck = fmt.Sprintf("%dms", p.StuckMillis)
			}
			cells := []string{name, fmt.Sprint(p.LastStable), fmt.Sprint(p.HighWatermark), fmt.Sprint(p.Unstable), stuck,
				fmt.Sprintf("%dms", p.MaxStuckMillis), fmt.Sprint(p.TransactionMarkers), fmt.Sprint(p.AbortedTransactions), orDash(p.HeldBy)}
			for c, s := range cells {
				v.parts.SetCell(y, c, tview.NewTableCell(tview.Escape(s)))
			}
			y++
		}
	}
	if v.rows > 0 {
		t.Select(min(max(row, 1), v.rows), 0)
	}
}

// topViews are the views tab cycles through and the tab bar lists:
// Transactions once the capture has transactions.
func (u *UI) topViews() []view {
	vs := []view{viewGroups, viewHazards, viewTraffic}
	if hasTxns(u.frame) || u.top == viewTxns {
		vs = append(vs, viewTxns)
	}
	return vs
}
