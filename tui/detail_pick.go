package tui

import (
	"slices"
	"strings"

	"github.com/kwire/kwire/correlate"
)

// pick is a row of the group detail that opens: a member (by id) or a
// partition (by topic and partition).
type pick struct {
	member    string
	topic     string
	partition int32
}

// picks lists g's rows that open, in the order the detail shows them:
// members, then partitions (a share group's have no detail).
func picks(g *correlate.Group) []pick {
	out := make([]pick, 0, len(g.Members)+len(g.Partitions))
	for _, m := range g.Members {
		out = append(out, pick{member: m.MemberID})
	}
	if g.Share == nil {
		for _, p := range g.Partitions {
			out = append(out, pick{topic: p.Topic, partition: p.Partition})
		}
	}
	return out
}

// selection settles the detail's selection on g's rows: the one selected
// before if still there, else the first. It returns its index among the
// members and among the partitions (-1 where it is not).
func (v *detailView) selection(g *correlate.Group) (member, partition int) {
	ps := picks(g)
	i := slices.Index(ps, v.sel)
	if i < 0 && len(ps) > 0 {
		i = 0
	}
	v.sel = pick{}
	if i < 0 {
		return -1, -1
	}
	v.sel = ps[i]
	if i < len(g.Members) {
		return i, -1
	}
	return -1, i - len(g.Members)
}

// move moves the selection step rows (down when positive), keeping it on
// screen; past the first or last row it scrolls the text instead (to the
// group's header above, its generations and commits below).
func (v *detailView) move(step int) {
	row, _ := v.pane.GetScrollOffset()
	if v.g == nil {
		v.pane.ScrollTo(max(row+step, 0), 0)
		return
	}
	v.selection(v.g) // settled, if not drawn yet
	ps := picks(v.g)
	i := slices.Index(ps, v.sel)
	j := i + step
	if i < 0 || j < 0 || j >= len(ps) {
		v.pane.ScrollTo(max(row+step, 0), 0)
		return
	}
	v.sel = ps[j]
	v.pane.invalidate()
	v.render(max(v.pane.width, 20)) // the selected row's line
	v.scrollTo(v.selLine)
}

// selected notes the selected row's line, at offset at of b (-1: not in
// this table).
func (v *detailView) selected(b *strings.Builder, at int) {
	if at >= 0 {
		v.selLine = strings.Count(b.String()[:at], "\n")
	}
}

// onScreen says whether line is on the screen.
func (v *detailView) onScreen(line int) bool {
	row, _ := v.pane.GetScrollOffset()
	_, _, _, h := v.pane.GetInnerRect()
	return line >= row && line < row+h
}

// scrollTo scrolls the least that puts line on the screen.
func (v *detailView) scrollTo(line int) {
	if line < 0 {
		return
	}
	row, _ := v.pane.GetScrollOffset()
	_, _, _, h := v.pane.GetInnerRect()
	switch {
	case line < row:
		v.pane.ScrollTo(line, 0)
	case h > 0 && line >= row+h:
		v.pane.ScrollTo(line-h+1, 0)
	}
}
