package report

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// svg builds one SVG figure as text. Every string from the capture goes
// through esc: the figure is inserted in the page as template.HTML.
type svg struct {
	b strings.Builder
}

// Figure geometry, in SVG user units (the figure scales to the page).
const (
	figWidth  = 1100.0
	labelW    = 190.0 // left column: lane and row labels
	plotLeft  = labelW + 8
	plotRight = figWidth - 48 // room for the words that end a lane
	axisH     = 30.0          // the time axis above the plot
)

func esc(s string) string { return html.EscapeString(s) }

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func (s *svg) open(height float64, label string) {
	fmt.Fprintf(&s.b, `<svg class="fig" viewBox="0 0 %s %s" width="100%%" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		num(figWidth), num(height), esc(label))
}

func (s *svg) close() template.HTML {
	s.b.WriteString("</svg>")
	return template.HTML(s.b.String()) //nolint:gosec // every capture string went through esc
}

func (s *svg) raw(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// title writes a tooltip (the <title> of the element being written).
func (s *svg) title(t string) { s.raw("<title>%s</title>", esc(t)) }

func (s *svg) text(x, y float64, class, anchor, t string) {
	s.raw(`<text x="%s" y="%s" class="%s" text-anchor="%s">%s</text>`, num(x), num(y), class, anchor, esc(t))
}

// link opens an <a> to an anchor of the page; end closes it.
func (s *svg) link(anchor string) { s.raw(`<a href="#%s">`, esc(anchor)) }
func (s *svg) end()               { s.b.WriteString("</a>") }

// timeScale maps capture times to x between labelW and plotRight.
type timeScale struct {
	from, to time.Time
}

func newTimeScale(from, to time.Time) timeScale {
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	return timeScale{from, to}
}

func (ts timeScale) x(t time.Time) float64 {
	f := float64(t.Sub(ts.from)) / float64(ts.to.Sub(ts.from))
	return plotLeft + min(max(f, 0), 1)*(plotRight-plotLeft)
}

// tickSteps are the spacings tried for time ticks.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// axis draws the time axis at the top (labels in UTC, the date on the
// first label and wherever the day changes) and light grid lines down to
// bottom.
func (s *svg) axis(ts timeScale, bottom float64) {
	span := ts.to.Sub(ts.from)
	day := 24 * time.Hour
	step := (span/8/day + 1) * day // days apart, past the longest step
	for _, st := range tickSteps {
		if span/st <= 8 {
			step = st
			break
		}
	}
	layout := "15:04:05"
	if step < time.Second {
		layout = "15:04:05.000"
	}
	s.text(4, 14, "axis-title", "start", "UTC "+ts.from.UTC().Format("2006-01-02"))
	s.raw(`<line class="axis" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(plotLeft), num(axisH), num(plotRight), num(axisH))
	first := ts.from.Truncate(step)
	if first.Before(ts.from) {
		first = first.Add(step)
	}
	date := ""
	for t := first; !t.After(ts.to); t = t.Add(step) {
		x := ts.x(t)
		s.raw(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(x), num(axisH-4), num(x), num(bottom))
		label := t.UTC().Format(layout)
		if d := t.UTC().Format("2006-01-02"); d != date {
			if date != "" {
				label = d + " " + label
			}
			date = d
		}
		s.text(x, axisH-8, "tick", "middle", label)
	}
}

// Hazard markers: a shape per severity, so that they read in black and
// white too.
func (s *svg) marker(x, y float64, severity string) {
	switch severity {
	case "critical":
		s.raw(`<path class="mk mk-critical" d="M%s %sl6 6l-6 6l-6-6z"/>`, num(x), num(y-6))
	case "warn":
		s.raw(`<path class="mk mk-warn" d="M%s %sl6 11h-12z"/>`, num(x), num(y-6))
	default:
		s.raw(`<circle class="mk mk-info" cx="%s" cy="%s" r="4"/>`, num(x), num(y))
	}
}

// defs are the patterns the figures fill with: hatched rebalances,
// cross-hatched storms.
const defs = `<defs>` +
	`<pattern id="p-rebal" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="#555" stroke-width="2"/></pattern>` +
	`<pattern id="p-storm" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fff"/><path d="M0 0L6 6M6 0L0 6" stroke="#222" stroke-width="1"/></pattern>` +
	`<pattern id="p-silent" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#fff"/><circle cx="2" cy="2" r="0.8" fill="#333"/></pattern>` +
	`</defs>`

// dur says a duration the way people read it.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// clock formats a capture time in the tables: UTC, with microseconds.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }
