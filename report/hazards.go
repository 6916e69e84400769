package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
)

// hazardView is one hazard as the page lists it: anchor, what, when,
// its numbers and the exchanges it rests on.
type hazardView struct {
	ID                    string
	Kind, Severity        string
	Group, GroupRef       string
	Member, MemberRef     string
	Time, Summary         string
	Facts                 []kv
	Evidence              []evidenceRow
	Incomplete            bool
	Loss                  []kv
	listed                bool
	at                    time.Time
	memberID, topic       string
	partition             *int32
	heartbeatGap, silence time.Duration
}

// hazards are the Snapshot's hazards, those listed and all of them by
// group (for the figures).
type hazards struct {
	list    []*hazardView
	all     []*hazardView
	byGroup map[string][]*hazardView
	count   map[string]int
}

// Fields a hazard's facts leave out: shown otherwise.
var hazardSkip = []string{"kind", "severity", "summary", "evidence", "group", "evidence_complete", "loss"}

func hazardViews(s *correlate.Snapshot, v *view) *hazards {
	hz := &hazards{byGroup: map[string][]*hazardView{}, count: map[string]int{}}
	groupRef := map[string]string{}
	for i := range s.Groups {
		groupRef[s.Groups[i].Group] = groupID(i)
	}
	for i := range s.Hazards {
		h := &s.Hazards[i]
		hv := &hazardView{ID: fmt.Sprintf("hz-%d", i+1), Kind: h.Kind, Severity: h.Severity, Group: h.Group,
			GroupRef: groupRef[h.Group], Member: h.MemberID, Time: clock(h.Time()), Summary: h.Summary,
			at: h.Time().UTC(), memberID: h.MemberID, topic: h.Topic, partition: h.Partition,
			heartbeatGap: time.Duration(h.HeartbeatGapMillis) * time.Millisecond,
			silence:      time.Duration(h.SilentMillis) * time.Millisecond}
		hz.count[h.Kind]++
		hz.all = append(hz.all, hv)
		if h.Group != "" {
			hz.byGroup[h.Group] = append(hz.byGroup[h.Group], hv)
		}
		if len(hz.list) >= maxHazardItems {
			continue
		}
		hv.listed = true
		for _, f := range flatFields(h, hazardSkip...) {
			hv.Facts = append(hv.Facts, kv{K: f.key, V: f.value})
		}
		hv.Evidence = evidenceRows(h.Evidence)
		if h.EvidenceComplete != nil && !*h.EvidenceComplete {
			hv.Incomplete = true
			for _, f := range flatFields(h.Loss) {
				hv.Loss = append(hv.Loss, kv{K: f.key, V: f.value})
			}
		}
		hz.list = append(hz.list, hv)
	}
	return hz
}

// kinds counts the hazards by kind, most frequent first.
func (hz *hazards) kinds() []kv {
	ks := slices.Sorted(maps.Keys(hz.count))
	slices.SortStableFunc(ks, func(a, b string) int { return hz.count[b] - hz.count[a] })
	out := make([]kv, 0, len(ks))
	for _, k := range ks {
		out = append(out, kv{K: k, V: fmt.Sprint(hz.count[k])})
	}
	return out
}

// href is where a hazard's marker links to: its entry, when listed,
// else the hazards' counts by kind.
func (hv *hazardView) href() string {
	if !hv.listed {
		return "hazards"
	}
	return hv.ID
}

// tip is a hazard marker's tooltip.
func (hv *hazardView) tip() string {
	return fmt.Sprintf("%s %s at %s: %s", hv.Severity, hv.Kind, hv.Time, hv.Summary)
}

// marks draws hazard markers at y, linked to their entries. Past
// maxMarks in a row, the hazards within binPx of each other are one
// marker: the most severe, its tooltip counting them all by kind.
func (s *svg) marks(ts timeScale, y float64, hs []*hazardView) {
	if len(hs) <= maxMarks {
		for _, hv := range hs {
			s.mark(ts.x(hv.at), y, hv, hv.tip())
		}
		return
	}
	type bin struct {
		top   *hazardView
		kinds map[string]int
		n     int
	}
	bins := map[int]*bin{}
	for _, hv := range hs {
		k := int(ts.x(hv.at) / binPx)
		b := bins[k]
		if b == nil {
			b = &bin{top: hv, kinds: map[string]int{}}
			bins[k] = b
		}
		b.n++
		b.kinds[hv.Kind]++
		if correlate.SeverityRank(hv.Severity) > correlate.SeverityRank(b.top.Severity) {
			b.top = hv
		}
	}
	for _, k := range slices.Sorted(maps.Keys(bins)) {
		b := bins[k]
		var kinds []string
		for _, kind := range slices.Sorted(maps.Keys(b.kinds)) {
			kinds = append(kinds, fmt.Sprintf("%s ×%d", kind, b.kinds[kind]))
		}
		tip := b.top.tip()
		if b.n > 1 {
			tip = fmt.Sprintf("%d hazards here (%s); the most severe: %s", b.n, strings.Join(kinds, ", "), tip)
		}
		s.mark(ts.x(b.top.at), y, b.top, tip)
	}
}

// Hazard markers in one row past which they are binned, and the bins'
// width in SVG units.
const (
	maxMarks = 150
	binPx    = 4.0
)

func (s *svg) mark(x, y float64, hv *hazardView, tip string) {
	s.link(hv.href())
	s.raw(`<g class="hz" data-hazard="%s">`, esc(hv.ID))
	s.title(tip)
	s.marker(x, y, hv.Severity)
	s.raw("</g>")
	s.end()
}
