package report

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
)

// chart is one partition's offsets over time.
type chart struct {
	ID, Name string
	SVG      template.HTML
	Facts    []kv
	Owner    memberRef
}

// The offsets plot and, under it, the lag strip, in SVG units.
const (
	plotH = 110.0
	lagH  = 30.0
)

// offsetCharts charts the group's partitions (those with hazards first,
// then those lagging most, up to maxOffsetCharts) and tables them all.
func offsetCharts(ts timeScale, r *Recorder, gv *groupView, g *correlate.Group, ms *members) ([]chart, table) {
	hzOf := func(p *correlate.Partition) []*hazardView {
		var out []*hazardView
		for _, hv := range gv.Hazards {
			if hv.topic == p.Topic && hv.partition != nil && *hv.partition == p.Partition {
				out = append(out, hv)
			}
		}
		return out
	}
	idx := make([]int, len(g.Partitions))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		pa, pb := &g.Partitions[a], &g.Partitions[b]
		return cmp.Or(cmp.Compare(len(hzOf(pb)), len(hzOf(pa))), cmp.Compare(val(pb.Lag), val(pa.Lag)))
	})
	if len(idx) > maxOffsetCharts {
		idx = idx[:maxOffsetCharts]
	}
	slices.Sort(idx)
	var charts []chart
	for _, i := range idx {
		p := &g.Partitions[i]
		c := chart{ID: fmt.Sprintf("%s-p%d", gv.ID, i+1), Name: fmt.Sprintf("%s[%d]", p.Topic, p.Partition), Owner: ms.ref(p.Owner)}
		c.SVG = offsetChart(ts, pointsOf(r, g.Group, p, ts.to), p, hzOf(p), ms, c.Name)
		c.Facts = partitionFacts(p)
		charts = append(charts, c)
	}
	t := table{Head: []string{"partition", "committed", "position", "end", "last stable", "lag", "lag (s)", "health", "records", "bytes", "owner", "last error"}}
	for i := range g.Partitions {
		p := &g.Partitions[i]
		t.Rows = append(t.Rows, []string{fmt.Sprintf("%s[%d]", p.Topic, p.Partition), opt(p.Committed), opt(p.Position),
			opt(p.EndOffset), opt(p.LastStable), opt(p.Lag), lagSecondsText(p), healthText(p.Health, false), fmt.Sprint(p.Records), fmt.Sprint(p.Bytes),
			orDash(ms.ref(p.Owner).Label), orDash(p.LastError)})
	}
	return charts, t
}

func partitionFacts(p *correlate.Partition) []kv {
	facts := []kv{{K: "committed", V: opt(p.Committed)}, {K: "position", V: opt(p.Position)},
		{K: "end offset", V: opt(p.EndOffset) + endFrom(p)}, {K: "lag (records)", V: opt(p.Lag)},
		{K: "lag (seconds)", V: lagSecondsText(p)}, {K: "health", V: healthText(p.Health, true)}}
	if p.ReadCommitted {
		facts = append(facts, kv{K: "last stable", V: opt(p.LastStable)}, kv{K: "read_committed", V: "yes: lag to the last stable offset"})
	}
	facts = append(facts, kv{K: "records fetched", V: fmt.Sprint(p.Records)})
	if p.LastError != "" {
		facts = append(facts, kv{K: "last error", V: p.LastError})
	}
	return facts
}

// pointsOf is a partition's offsets over time: the Recorder's samples,
// else its remembered commits; then its state at the end.
func pointsOf(r *Recorder, group string, p *correlate.Partition, end time.Time) []point {
	var pts []point
	if r != nil {
		if s := r.series[seriesKey{group, p.Topic, p.Partition}]; s != nil {
			pts = slices.Clone(s.points)
		}
	}
	if len(pts) == 0 {
		for _, c := range p.Commits {
			if c.ErrorCode == 0 {
				pts = append(pts, point{at: c.TS.Time, committed: c.Offset, position: -1, hwm: -1, lso: -1, deliv: -1})
			}
		}
	}
	return append(pts, point{at: end, committed: val(p.Committed), position: val(p.Position), hwm: endOf(p),
		lso: val(p.LastStable), deliv: val(p.DeliveredTo)})
}

// offsetChart draws the end offset, the last stable offset (when it
// differs), the consumer's position and the committed offset over time
// (the lag is the distance between them, drawn again under them on a
// scale of its own), commits as marks.
func offsetChart(ts timeScale, pts []point, p *correlate.Partition, hs []*hazardView, ms *members, name string) template.HTML {
	lo, hi := int64(-1), int64(-1)
	widen := func(v int64) {
		if v < 0 {
			return
		}
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	lsoDiffers := false
	for _, pt := range pts {
		widen(pt.committed)
		widen(pt.position)
		widen(pt.hwm)
		widen(pt.lso)
		lsoDiffers = lsoDiffers || (pt.lso >= 0 && pt.lso != pt.hwm)
	}
	for _, c := range p.Commits {
		widen(c.Offset)
	}
	if lo < 0 {
		lo, hi = 0, 1
	}
	if hi == lo {
		hi = lo + 1
	}
	top := axisH + 8
	y := func(v int64) float64 { return top + float64(hi-v)/float64(hi-lo)*plotH }
	var s svg
	s.open(top+plotH+lagH+14, "offsets of "+name)
	s.axis(ts, top+plotH+lagH+10)
	for _, v := range []int64{lo, lo + (hi-lo)/2, hi} {
		s.text(labelW-6, y(v)+4, "tick", "end", offsetText(v))
		s.raw(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(plotLeft), num(y(v)), num(plotRight), num(y(v)))
	}
	s.text(4, top+12, "row-label", "start", name)
	line := func(class, tip string, get func(point) int64) {
		if d := stepPath(ts, pts, y, get); d != "" {
			s.raw(`<path class="%s" d="%s"><title>%s</title></path>`, class, d, esc(tip))
		}
	}
	line("l-hwm", "end offset", func(p point) int64 { return p.hwm })
	if lsoDiffers {
		line("l-lso", "last stable offset", func(p point) int64 { return p.lso })
	}
	line("l-pos", "consumer position (fetch offset)", func(p point) int64 { return p.position })
	line("l-comm", "committed offset", func(p point) int64 { return p.committed })
	for _, c := range p.Commits {
		s.commitMark(ts, c, y(c.Offset), ms)
	}
	s.marks(ts, top+4, hs)
	s.lagStrip(ts, pts, top+plotH+8)
	return s.close()
}

// lagStrip draws the lag in records on a scale of its own, under the
// offsets: committed offset to end offset (shaded), and the
// consumer's position to it (dashed). Offsets in the millions hide a lag
// of a few hundred; this strip does not.
func (s *svg) lagStrip(ts timeScale, pts []point, top float64) {
	lag := func(v, end int64) int64 {
		if v < 0 || end < 0 {
			return -1
		}
		return max(end-v, 0)
	}
	peak := int64(0)
	for _, pt := range pts {
		peak = max(peak, lag(pt.committed, pt.hwm), lag(pt.position, pt.hwm))
	}
	y := func(v int64) float64 { return top + lagH - float64(v)/float64(max(peak, 1))*(lagH-4) }
	s.raw(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`, num(plotLeft), num(top+lagH), num(plotRight), num(top+lagH))
	s.text(labelW-6, top+lagH/2+4, "tick", "end", "lag ≤ "+offsetText(peak))
	committed := func(p point) int64 { return lag(p.committed, p.hwm) }
	if d := stepPath(ts, pts, y, committed); d != "" {
		s.raw(`<path class="lag-line" d="%s"><title>lag of the committed offset (records), at most %d</title></path>`, d, peak)
	}
	position := func(p point) int64 { return lag(p.position, p.hwm) }
	if d := stepPath(ts, pts, y, position); d != "" {
		s.raw(`<path class="l-pos" d="%s"><title>lag of the consumer's position (records)</title></path>`, d)
	}
}

func (s *svg) commitMark(ts timeScale, c correlate.Commit, cy float64, ms *members) {
	x := ts.x(c.TS.Time)
	outcome := "accepted"
	switch c.ErrorCode {
	case 0:
		s.raw(`<g class="commit"><circle class="c-ok" cx="%s" cy="%s" r="2.5"/>`, num(x), num(cy))
	case -1:
		outcome = "no answer seen"
		s.raw(`<g class="commit"><circle class="c-unknown" cx="%s" cy="%s" r="3"/>`, num(x), num(cy))
	default:
		outcome = "rejected " + strconv.Itoa(int(c.ErrorCode))
		s.raw(`<g class="commit"><path class="c-rejected" d="M%s %sl6 6M%s %sl-6 6"/>`, num(x-3), num(cy-3), num(x+3), num(cy-3))
	}
	s.title(fmt.Sprintf("commit %d by %s (generation %d) at %s: %s", c.Offset, orDash(ms.ref(c.MemberID).Label+" "+c.MemberID), c.Generation, clock(c.TS.Time), outcome))
	s.raw("</g>")
}

// stepPath draws get(point) as steps: each value holds until the next;
// unknown values (-1) lift the pen.
func stepPath(ts timeScale, pts []point, y func(int64) float64, get func(point) int64) string {
	var d strings.Builder
	down := false
	for _, pt := range pts {
		v := get(pt)
		if v < 0 {
			down = false
			continue
		}
		x := ts.x(pt.at)
		if !down {
			fmt.Fprintf(&d, "M%s %s", num(x), num(y(v)))
			down = true
			continue
		}
		fmt.Fprintf(&d, "H%sV%s", num(x), num(y(v)))
	}
	return d.String()
}

func offsetText(v int64) string {
	switch {
	case v >= 10_000_000:
		return strconv.FormatFloat(float64(v)/1e6, 'f', 1, 64) + "M"
	case v >= 100_000:
		return strconv.FormatFloat(float64(v)/1e3, 'f', 0, 64) + "k"
	}
	return strconv.FormatInt(v, 10)
}

func opt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// endOf is a partition's end as the charts draw it: the newest evidence
// of any client's (end_offset), else its own last Fetch's high watermark.
func endOf(p *correlate.Partition) int64 {
	if p.EndOffset != nil {
		return *p.EndOffset
	}
	return val(p.HighWatermark)
}

// endFrom says what gave a partition's end.
func endFrom(p *correlate.Partition) string {
	if p.EndOffsetFrom == "" {
		return ""
	}
	return " (" + strings.ReplaceAll(p.EndOffsetFrom, "_", " ") + ")"
}

// lagSecondsText is a partition's lag in seconds: "12.3 s", "~12.3 s"
// when estimated, "-" unknown.
func lagSecondsText(p *correlate.Partition) string {
	if p.LagSeconds == nil {
		return "-"
	}
	return correlate.LagSecondsText(p.LagSeconds, p.LagSecondsEstimated) + " s"
}

// healthText is a partition's health, with what the wire shows behind it
// when long.
func healthText(h *correlate.Health, long bool) string {
	switch {
	case h == nil:
		return "-"
	case long && h.Evidence != "":
		return h.State + ": " + h.Evidence
	}
	return h.State
}
