package tui

import (
	"strings"
	"testing"

	"github.com/rivo/tview"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		width int
		mid   bool
		want  string
	}{
		{"fits", "abc", 3, false, "abc"},
		{"end", "abcdef", 4, false, "abc…"},
		{"middle", "gc-member-1-1fa6e38bf95327b2", 12, true, "gc-membe…7b2"},
		{"one cell", "abc", 1, false, "…"},
		{"zero", "abc", 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cut(tc.s, tc.width, tc.mid); got != tc.want {
				t.Errorf("cut(%q, %d, %v) = %q, want %q", tc.s, tc.width, tc.mid, got, tc.want)
			}
		})
	}
}

// TestWriteTableFits: a table of long cells is cut to the width, and
// tags in cell text are shown, not interpreted.
func TestWriteTableFits(t *testing.T) {
	cols := []col{{title: "ID", shrink: 6, mid: true}, {title: "N", right: true}, {title: "TEXT", shrink: 8}}
	rows := [][]cell{
		{c(strings.Repeat("x", 50)), c("1"), c("topic[0,1] [red]not a tag[-]")},
		{c("short"), c("22"), cell{text: "[####----]", color: "green"}},
	}
	for _, width := range []int{30, 40, 80} {
		var b strings.Builder
		writeTable(&b, width, cols, rows)
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if w := tview.TaggedStringWidth(l); w > width {
				t.Errorf("width %d: line %q is %d wide", width, l, w)
			}
		}
		if !strings.Contains(b.String(), "[green][####----[][-]") {
			t.Errorf("width %d: bar not escaped in its colour:\n%s", width, b.String())
		}
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		frac float64
		want string
	}{
		{0, "[------]"}, {0.5, "[###---]"}, {1, "[######]"}, {1.5, "[#####!]"},
	}
	for _, tc := range tests {
		if got := bar(tc.frac, 8); got != tc.want {
			t.Errorf("bar(%v) = %q, want %q", tc.frac, got, tc.want)
		}
	}
}
