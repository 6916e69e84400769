package report

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kwire/kwire/jsonout"
)

// Rows of the timelines, in SVG units.
const (
	rowGen     = 30.0
	rowHz      = 20.0
	laneH      = 18.0
	barH       = 10.0
	minBand    = 6.0  // narrower generation bands are drawn together, as a storm
	maxOverRow = 30.0 // groups drawn in the capture's timeline
)

// groupTimeline draws a group's history: its generations as bands (the
// rebalance hatched), its hazards, and a lane per member from its join
// to its leave or expiry, silences dotted.
func groupTimeline(ts timeScale, spans []genSpan, ms *members, gv *groupView, earlier int64) template.HTML {
	lanes, hidden := pickLanes(ms, gv.Hazards)
	height := axisH + 6 + rowGen + float64(len(lanes))*laneH + 10
	if len(gv.Hazards) > 0 {
		height += rowHz
	}
	if len(hidden) > 0 {
		height += laneH
	}
	var s svg
	s.open(height, "timeline of group "+gv.Name)
	s.axis(ts, height-4)
	y := axisH + 6
	s.text(labelW-8, y+rowGen/2, "row-label", "end", "generations")
	s.generations(ts, spans, y+2, rowGen-8, earlier)
	y += rowGen
	if len(gv.Hazards) > 0 {
		s.text(labelW-8, y+rowHz/2+4, "row-label", "end", "hazards")
		s.marks(ts, y+rowHz/2, gv.Hazards)
		y += rowHz
	}
	for _, x := range lanes {
		s.lane(ts, x, y, gv.Hazards)
		y += laneH
	}
	if len(hidden) > 0 {
		s.hiddenLane(ts, hidden, y)
	}
	return s.close()
}

// generations draws the bands; runs of bands too narrow to tell apart
// are one band with their count (a storm). earlier counts generations
// before the first, no longer remembered.
func (s *svg) generations(ts timeScale, spans []genSpan, y, h float64, earlier int64) {
	if earlier > 0 && len(spans) > 0 {
		x0, x1 := ts.x(ts.from), ts.x(spans[0].begin)
		s.raw(`<g class="storm"><rect x="%s" y="%s" width="%s" height="%s" fill="url(#p-storm)" class="band"/>`,
			num(x0), num(y), num(max(x1-x0, 1)), num(h))
		s.title(fmt.Sprintf("%d earlier generations, no longer remembered (--max-generations)", earlier))
		s.raw("</g>")
	}
	for i := 0; i < len(spans); {
		j := i + 1
		for j < len(spans) && ts.x(spans[j].to)-ts.x(spans[j].begin) < minBand && ts.x(spans[i].to)-ts.x(spans[i].begin) < minBand {
			j++
		}
		if j-i > 1 {
			s.storm(ts, spans[i:j], y, h)
		} else {
			s.band(ts, &spans[i], i, y, h)
		}
		i = j
	}
}

func (s *svg) band(ts timeScale, sp *genSpan, i int, y, h float64) {
	e := sp.ev
	x0, x1, x2 := ts.x(sp.begin), ts.x(sp.stable), ts.x(sp.to)
	if sp.ref != "" {
		s.link(sp.ref)
	}
	s.raw(`<g class="gen" data-generation="%d">`, e.Generation)
	tip := fmt.Sprintf("generation %d: %s; %d members", e.Generation, jsonout.CauseText(e.Cause), len(e.Members))
	if e.DurationMillis != nil {
		tip += "; rebalance " + dur(time.Duration(*e.DurationMillis)*time.Millisecond)
	}
	if !e.Complete {
		tip += "; not every member's assignment seen"
	}
	s.title(tip)
	if x1 > x0 {
		s.raw(`<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="url(#p-rebal)"/>`, num(x0), num(y), num(x1-x0), num(h))
	}
	s.raw(`<rect class="band stable s%d" x="%s" y="%s" width="%s" height="%s"/>`, i%2, num(x1), num(y), num(max(x2-x1, 1)), num(h))
	if x2-x0 >= 24 {
		s.text((x0+x2)/2, y+h/2+4, "band-label", "middle", fmt.Sprintf("g%d", e.Generation))
	}
	s.raw("</g>")
	if sp.ref != "" {
		s.end()
	}
}

// storm draws generations too close to tell apart as one band.
func (s *svg) storm(ts timeScale, run []genSpan, y, h float64) {
	first, last := run[0], run[len(run)-1]
	causes := map[string]int{}
	for _, sp := range run {
		causes[sp.ev.Cause.Kind]++
	}
	var cs []string
	for _, k := range slices.Sorted(maps.Keys(causes)) {
		cs = append(cs, fmt.Sprintf("%s ×%d", k, causes[k]))
	}
	x0, x1 := ts.x(first.begin), ts.x(last.to)
	if first.ref != "" {
		s.link(first.ref)
	}
	s.raw(`<g class="storm" data-generations="%d">`, len(run))
	s.title(fmt.Sprintf("%d generations, %d to %d, in %s: %s", len(run), first.ev.Generation, last.ev.Generation,
		dur(last.to.Sub(first.begin)), strings.Join(cs, ", ")))
	s.raw(`<rect class="band" x="%s" y="%s" width="%s" height="%s" fill="url(#p-storm)"/>`, num(x0), num(y), num(max(x1-x0, 2)), num(h))
	label := fmt.Sprintf("×%d", len(run))
	if w := float64(len(label))*6 + 6; x1-x0 >= w+2 {
		s.raw(`<rect class="count-bg" x="%s" y="%s" width="%s" height="12"/>`, num((x0+x1-w)/2), num(y+h/2-6), num(w))
		s.text((x0+x1)/2, y+h/2+4, "band-label", "middle", label)
	}
	s.raw("</g>")
	if first.ref != "" {
		s.end()
	}
}

// pickLanes chooses the members drawn as lanes: all of them up to
// maxLanes, else those with hazards first, then the earliest; hidden are
// the rest.
func pickLanes(ms *members, hs []*hazardView) (lanes, hidden []*member) {
	if len(ms.order) <= maxLanes {
		return ms.order, nil
	}
	with := map[string]bool{}
	for _, hv := range hs {
		with[hv.memberID] = true
	}
	picked := map[*member]bool{}
	for _, pass := range []bool{true, false} {
		for _, x := range ms.order {
			if len(lanes) < maxLanes && !picked[x] && (with[x.ID] || !pass) {
				picked[x] = true
				lanes = append(lanes, x)
			}
		}
	}
	slices.SortFunc(lanes, func(a, b *member) int { return a.idx - b.idx })
	for _, x := range ms.order {
		if !picked[x] {
			hidden = append(hidden, x)
		}
	}
	return lanes, hidden
}

// lane draws one member: a bar while it was in the group, its end (left,
// expired, fenced), its silences and its hazards.
func (s *svg) lane(ts timeScale, x *member, y float64, hs []*hazardView) {
	mid := y + laneH/2
	label := x.Label
	if x.m != nil && x.m.ClientID != "" {
		label += " " + x.m.ClientID
	}
	if x.Ref != "" {
		s.link(x.Ref)
	}
	s.raw(`<g class="lane" data-member="%s">`, esc(x.ID))
	s.title(memberTip(x))
	s.text(labelW-8, mid+4, "lane-label", "end", clip(label, 28))
	x0, x1 := ts.x(x.begin), ts.x(x.end)
	status := "live"
	if x.m != nil {
		status = x.m.Status
	}
	s.raw(`<rect class="bar bar-%s" x="%s" y="%s" width="%s" height="%s"/>`, esc(status), num(x0), num(mid-barH/2), num(max(x1-x0, 2)), num(barH))
	if !x.joined {
		s.text(x0-2, mid+4, "lane-note", "end", "◂") // already a member when first seen
	}
	if x.m != nil && x.m.GoneAt != nil {
		s.laneEnd(ts, x, mid)
	}
	s.raw("</g>")
	if x.Ref != "" {
		s.end()
	}
	for _, hv := range hs {
		if hv.memberID != x.ID {
			continue
		}
		if gap := max(hv.heartbeatGap, hv.silence); hv.Kind == "heartbeat_late" && gap > 0 {
			s.silence(ts, hv.at.Add(-gap), hv.at, mid, "silent "+dur(gap)+" ("+hv.Kind+")")
		}
	}
	s.marks(ts, mid, memberHazards(hs, x.ID))
}

func memberHazards(hs []*hazardView, id string) []*hazardView {
	var out []*hazardView
	for _, hv := range hs {
		if hv.memberID == id {
			out = append(out, hv)
		}
	}
	return out
}

// laneEnd marks how a member ended: a bar for a leave, a cross for an
// expiry (KIP-848: fenced), with the silence before it dotted.
func (s *svg) laneEnd(ts timeScale, x *member, mid float64) {
	m := x.m
	xe := ts.x(m.GoneAt.Time)
	word := m.Status
	if m.Status == "expired" {
		if strings.Contains(m.Reason, "fenced") {
			word = "fenced"
		}
		if m.LastSeen != nil && m.LastSeen.Before(m.GoneAt.Time) {
			s.silence(ts, m.LastSeen.Time, m.GoneAt.Time, mid, "silent from its last request to its expiry")
		}
		s.raw(`<path class="end-x" d="M%s %sl8 8M%s %sl-8 8"/>`, num(xe-4), num(mid-4), num(xe+4), num(mid-4))
	} else {
		s.raw(`<path class="end-bar" d="M%s %sv12"/>`, num(xe), num(mid-6))
	}
	s.text(xe+7, mid+4, "lane-note", "start", word)
}

func (s *svg) silence(ts timeScale, from, to time.Time, mid float64, tip string) {
	x0, x1 := ts.x(from), ts.x(to)
	s.raw(`<g class="silence"><rect x="%s" y="%s" width="%s" height="%s" fill="url(#p-silent)" class="silent"/>`,
		num(x0), num(mid-barH/2), num(max(x1-x0, 1)), num(barH))
	s.title(tip)
	s.raw("</g>")
}

func memberTip(x *member) string {
	if x.m == nil {
		return x.ID + " (known only from its generations)"
	}
	m := x.m
	t := fmt.Sprintf("%s %s: client %s@%s, %s", x.Label, m.MemberID, m.ClientID, m.ClientHost, m.Status)
	if m.InstanceID != nil {
		t += ", group.instance.id " + *m.InstanceID
	}
	if !x.joined {
		t += ", a member already when first seen (" + clock(m.FirstSeen.Time) + ")"
	}
	if m.Reason != "" {
		t += ": " + m.Reason
	}
	return t
}

// hiddenLane draws the members not given a lane as one: how many of them
// were in the group over time.
func (s *svg) hiddenLane(ts timeScale, hidden []*member, y float64) {
	type step struct {
		at time.Time
		d  int
	}
	var steps []step
	for _, x := range hidden {
		steps = append(steps, step{x.begin, 1}, step{x.end, -1})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	peak, n := 0, 0
	for _, st := range steps {
		n += st.d
		peak = max(peak, n)
	}
	s.raw(`<g class="lane hidden-lane" data-hidden="%d">`, len(hidden))
	s.title(fmt.Sprintf("%d more members, not drawn one by one (at most %d at once); the table lists them", len(hidden), peak))
	s.text(labelW-8, y+laneH/2+4, "lane-label", "end", fmt.Sprintf("+%d more members", len(hidden)))
	var d strings.Builder
	base := y + laneH - 3
	fmt.Fprintf(&d, "M%s %s", num(ts.x(ts.from)), num(base))
	n = 0
	for _, st := range steps {
		n += st.d
		fmt.Fprintf(&d, "H%sV%s", num(ts.x(st.at)), num(base-float64(n)/float64(max(peak, 1))*(laneH-6)))
	}
	fmt.Fprintf(&d, "H%sV%sZ", num(ts.x(ts.to)), num(base))
	s.raw(`<path class="count-area" d="%s"/></g>`, d.String())
}
