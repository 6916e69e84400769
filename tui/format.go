package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rivo/tview"
	"github.com/rivo/uniseg"

	"github.com/kwire/kwire/correlate"
)

// col is a column of a text table (see writeTable).
type col struct {
	title string
	right bool
	// shrink is the narrowest the column may get when the table is too
	// wide (0: never shrinks); mid cuts it in the middle ("abc…xyz"), for
	// ids whose end tells them apart.
	shrink int
	mid    bool
}

// cell is one cell of a text table: plain text and a tview colour tag
// ("" for the default colour).
type cell struct {
	text  string
	color string
}

// c makes a cell of text in the default colour.
func c(text string) cell { return cell{text: text} }

// cf makes a cell of formatted text in the default colour.
func cf(format string, args ...any) cell { return cell{text: fmt.Sprintf(format, args...)} }

// writeTable writes a table of plain cells as tview-tagged lines no wider
// than width: columns are as wide as their widest cell and shrink (cut with
// an ellipsis) down to their shrink width, widest first, until the table
// fits. Cell text is escaped.
func writeTable(b *strings.Builder, width int, cols []col, rows [][]cell) {
	w := make([]int, len(cols))
	for i, cl := range cols {
		w[i] = uniseg.StringWidth(cl.title)
	}
	for _, r := range rows {
		for i := range min(len(r), len(cols)) {
			w[i] = max(w[i], uniseg.StringWidth(r[i].text))
		}
	}
	fit(w, cols, width)
	line := func(cells []cell, header bool) {
		var l strings.Builder
		for i, cl := range cols {
			if i > 0 {
				l.WriteString(" ")
			}
			var cc cell
			if i < len(cells) {
				cc = cells[i]
			}
			s := pad(cut(cc.text, w[i], cl.mid), w[i], cl.right)
			if i == len(cols)-1 && !cl.right {
				s = strings.TrimRight(s, " ")
			}
			s = tview.Escape(s)
			switch {
			case header:
				s = "[::b]" + s + "[::-]"
			case cc.color != "":
				s = "[" + cc.color + "]" + s + "[-]"
			}
			l.WriteString(s)
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteString("\n")
	}
	hdr := make([]cell, len(cols))
	for i, cl := range cols {
		hdr[i] = cell{text: cl.title}
	}
	line(hdr, true)
	for _, r := range rows {
		line(r, false)
	}
}

// writeTableSel is writeTable with row sel (from 0; -1 for none) drawn
// in reverse video, the selection of a text pane. It returns the offset
// in b where that row's line starts, -1 for none.
func writeTableSel(b *strings.Builder, width int, cols []col, rows [][]cell, sel int) int {
	if sel < 0 || sel >= len(rows) {
		writeTable(b, width, cols, rows)
		return -1
	}
	var t strings.Builder
	writeTable(&t, width, cols, rows)
	at := -1
	for i, l := range strings.SplitAfter(t.String(), "\n") {
		if i == sel+1 {
			at = b.Len()
			l = "[::r]" + strings.TrimSuffix(l, "\n") + "[::-]\n"
		}
		b.WriteString(l)
	}
	return at
}

// fit shrinks the column widths w until they and their one-space
// separators fit in width, or no column can shrink further.
func fit(w []int, cols []col, width int) {
	total := func() int {
		n := len(w) - 1
		for _, x := range w {
			n += x
		}
		return n
	}
	for total() > width {
		best := -1
		for i, cl := range cols {
			if cl.shrink > 0 && w[i] > cl.shrink && (best < 0 || w[i] > w[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w[best] = max(cols[best].shrink, w[best]-(total()-width))
	}
}

// cut shortens s to width cells with an ellipsis, at its end or (mid) in
// its middle.
func cut(s string, width int, mid bool) string {
	if uniseg.StringWidth(s) <= width {
		return s
	}
	if width <= 1 {
		return strings.Repeat("…", max(width, 0))
	}
	r := []rune(s)
	if !mid {
		for uniseg.StringWidth(string(r))+1 > width {
			r = r[:len(r)-1]
		}
		return string(r) + "…"
	}
	tail := (width - 1) / 3
	head := width - 1 - tail
	for head > 0 && uniseg.StringWidth(string(r[:head])) > width-1-tail {
		head--
	}
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// pad pads s with spaces to width cells.
func pad(s string, width int, right bool) string {
	n := width - uniseg.StringWidth(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// severityLabel is a severity as a fixed-width word, so that severity is
// never told by colour alone.
func severityLabel(s string) string {
	switch s {
	case correlate.SeverityCritical:
		return "CRIT"
	case correlate.SeverityWarn:
		return "WARN"
	case correlate.SeverityInfo:
		return "INFO"
	}
	return strings.ToUpper(s)
}

// severityColor is the tview colour of a severity.
func severityColor(s string) string {
	switch s {
	case correlate.SeverityCritical:
		return "red"
	case correlate.SeverityWarn:
		return "yellow"
	case correlate.SeverityInfo:
		return "aqua"
	}
	return ""
}

// stateColor is the tview colour of a group state.
func stateColor(s string) string {
	switch s {
	case "stable":
		return "green"
	case "rebalancing":
		return "yellow"
	case "empty", "dead":
		return "gray"
	}
	return ""
}

// clock is a capture time of day to the millisecond.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

// clockp is clock of a time that may be unknown.
func clockp(t *correlate.Time) string {
	if t == nil {
		return "-"
	}
	return clock(t.Time)
}

// dur is a duration, short: 850µs, 12.3ms, 4.2s, 3m10s.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return d.Round(time.Second).String()
}

// count is a number, short: 950, 12.3k, 4.5M, 1.2G.
func count[T int | int64 | uint64](n T) string {
	v := float64(n)
	switch {
	case v < 10000:
		return strconv.FormatInt(int64(n), 10)
	case v < 1e6:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v < 1e9:
		return fmt.Sprintf("%.1fM", v/1e6)
	}
	return fmt.Sprintf("%.1fG", v/1e9)
}

// bytesText is a byte count, short: 950B, 12kB, 4.5MB.
func bytesText[T int | int64 | uint64](n T) string {
	v := float64(n)
	switch {
	case v < 1000:
		return fmt.Sprintf("%dB", int64(n))
	case v < 1e6:
		return fmt.Sprintf("%.0fkB", v/1e3)
	case v < 1e9:
		return fmt.Sprintf("%.1fMB", v/1e6)
	}
	return fmt.Sprintf("%.2fGB", v/1e9)
}

// rate is a per-second rate, short.
func rate(v float64) string {
	switch {
	case v <= 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 1000:
		return fmt.Sprintf("%.1f", v)
	}
	return count(int64(v))
}

// opt is an optional offset.
func opt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// bar is a text bar of width cells filled to frac (0..1+): "[####----]".
// Beyond 1 it is full and ends in "!": the bar is read without colour.
func bar(frac float64, width int) string {
	inner := width - 2
	n := int(frac*float64(inner) + 0.5)
	over := frac > 1
	n = min(max(n, 0), inner)
	s := strings.Repeat("#", n) + strings.Repeat("-", inner-n)
	if over {
		s = s[:inner-1] + "!"
	}
	return "[" + s + "]"
}

// para writes text (plain, escaped here) word-wrapped to width.
func para(b *strings.Builder, width int, text string) {
	for _, l := range tview.WordWrap(tview.Escape(text), width) {
		b.WriteString(l)
		b.WriteString("\n")
	}
}

// idForm shortens member ids as all of kwire's text does
// (correlate.ShortID), or (true) leaves them whole.
type idForm bool

// id is member id s as shown.
func (full idForm) id(s string) string {
	if full {
		return s
	}
	return correlate.ShortID(s)
}

// in shortens the member ids in text s.
func (full idForm) in(s string) string {
	if full {
		return s
	}
	return correlate.ShortIDs(s)
}
