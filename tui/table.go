package tui

import (
	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// header writes a list's header row.
func header(t *tview.Table, titles ...string) {
	for i, h := range titles {
		t.SetCell(0, i, tview.NewTableCell(h).SetAttributes(tcell.AttrBold).SetSelectable(false))
	}
}

// settle ends drawing a list of n rows under its header: a message when it
// is empty (noMatch when a filter hides every row), else the selection:
// row sel (the item selected before the redraw, 0 if gone), else the row
// number selected before, else the first.
func settle(t *tview.Table, n, sel int, filtered bool, empty, noMatch string) {
	if n == 0 {
		msg := empty
		if filtered {
			msg = noMatch
		}
		t.SetCell(1, 0, tview.NewTableCell(msg).SetSelectable(false))
		return
	}
	if sel == 0 {
		sel = 1
		if r, _ := t.GetSelection(); r >= 1 && r <= n {
			sel = r
		}
	}
	t.Select(sel, 0)
}
