package report

import (
	"fmt"
	"html/template"
	"time"
)

// captureTimeline draws the whole capture: a row per group (when it was
// seen, linked to its section), every hazard, and where the capture lost
// or skipped bytes.
func captureTimeline(in *Input, v *view, from, to time.Time, hz *hazards) template.HTML {
	ts := newTimeScale(from, to)
	groups := v.Groups
	more := 0
	if len(groups) > maxOverRow {
		groups, more = groups[:maxOverRow], len(groups)-maxOverRow
	}
	rows := float64(len(groups)) + 2
	if more > 0 {
		rows++
	}
	height := axisH + 6 + rows*laneH + 8
	var s svg
	s.open(height, "the capture's timeline")
	s.axis(ts, height-4)
	y := axisH + 6
	for i, gv := range groups {
		g := &in.Snapshot.Groups[i]
		gf, gt := groupSpan(in, g)
		s.link(gv.ID)
		s.raw(`<g class="lane" data-group="%s">`, esc(gv.Name))
		s.title(fmt.Sprintf("group %s (%s): %d generations, %d members, %d hazards", gv.Name, orDash(gv.Type),
			len(g.Generations), len(g.Members), len(gv.Hazards)))
		s.text(labelW-8, y+laneH/2+4, "lane-label", "end", clip(gv.Name, 28))
		s.raw(`<rect class="bar bar-group" x="%s" y="%s" width="%s" height="%s"/>`,
			num(ts.x(gf)), num(y+laneH/2-barH/2), num(max(ts.x(gt)-ts.x(gf), 2)), num(barH))
		s.raw("</g>")
		s.end()
		y += laneH
	}
	if more > 0 {
		s.text(labelW-8, y+laneH/2+4, "lane-label", "end", fmt.Sprintf("+%d more groups", more))
		y += laneH
	}
	s.text(labelW-8, y+laneH/2+4, "row-label", "end", "hazards")
	s.marks(ts, y+laneH/2, hz.all)
	y += laneH
	s.text(labelW-8, y+laneH/2+4, "row-label", "end", "lost / skipped")
	if r := in.Recorder; r != nil && len(r.anomalies) == 0 {
		s.text(plotLeft, y+laneH/2+4, "lane-note", "start", "none")
	} else if r != nil {
		for _, a := range r.anomalies {
			x := ts.x(a.Time)
			s.link("loss")
			s.raw(`<g class="loss-mark"><path class="loss" d="M%s %sv%s"/>`, num(x), num(y+3), num(laneH-6))
			s.title(fmt.Sprintf("%s %s on connection %d (%s → %s): %s", clock(a.Time), a.Kind, a.Conn.ID, a.Conn.Client, a.Conn.Broker, a.Detail))
			s.raw("</g>")
			s.end()
		}
	}
	return s.close()
}

// clip shortens s to n characters for a label; tooltips have it whole.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
