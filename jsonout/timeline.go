package jsonout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
)

// maxTimeline caps the lines the report's timeline holds: beyond it
// lines are counted, not kept (the NDJSON has every event).
const maxTimeline = 20000

// timeline holds the text report's events and anomalies until the
// summary, to write them in capture time order: a hazard is reported when
// it is judged (a rejected commit after a grace, an expiry at the
// broker's timeout), which may follow events of later times.
type timeline struct {
	lines   []timelineLine
	dropped int
	// routine are the hazards every new group shows, per group: folded
	// into one line at the time of the first.
	routine map[string]*folded
}

type timelineLine struct {
	at   time.Time
	text string
}

// folded counts a group's routine hazards by kind.
type folded struct {
	first time.Time
	kinds map[string]int
}

func (t *timeline) add(at time.Time, text string) {
	if len(t.lines) >= maxTimeline {
		t.dropped++
		return
	}
	t.lines = append(t.lines, timelineLine{at, text})
}

// event holds ev, text its line; routine hazards are folded.
func (t *timeline) event(ev correlate.Event, text string) {
	if h, ok := ev.(*correlate.HazardEvent); ok && routine(h) {
		if t.routine == nil {
			t.routine = map[string]*folded{}
		}
		f := t.routine[h.Group]
		if f == nil {
			f = &folded{first: h.Time(), kinds: map[string]int{}}
			t.routine[h.Group] = f
		}
		f.first = minTime(f.first, h.Time())
		f.kinds[h.Kind]++
		return
	}
	t.add(ev.Time(), text)
}

// write writes the timeline, oldest first (lines of one time in the order
// they came), with each group's routine hazards folded into one line.
func (t *timeline) write(b *strings.Builder) {
	lines := slices.Clone(t.lines)
	for _, g := range slices.Sorted(maps.Keys(t.routine)) {
		f := t.routine[g]
		lines = append(lines, timelineLine{f.first, fmt.Sprintf("%s INFO %s", Time(f.first), routineText(g, f.kinds))})
	}
	slices.SortStableFunc(lines, func(a, b timelineLine) int { return a.at.Compare(b.at) })
	b.WriteString("\n== timeline (UTC, in capture time order)\n")
	if len(lines) == 0 {
		b.WriteString("no group events\n")
	}
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	if t.dropped > 0 {
		fmt.Fprintf(b, "… %d more lines not held (--json has every event; --group, --since and --until narrow the report)\n", t.dropped)
	}
}

// routine reports whether h is one of the info hazards every new consumer
// group shows, which the text report folds: a partition without committed
// offset starting at the log's start (or its end, skipping nothing),
// commits of records just delivered (auto-commit, a heuristic), and the
// broker's initial rebalance delay. Not one whose evidence was lost.
func routine(h *correlate.HazardEvent) bool {
	if h.Severity != correlate.SeverityInfo || h.EvidenceComplete != nil {
		return false
	}
	switch h.Kind {
	case correlate.HazardOffsetReset:
		return h.FromOffset == nil && h.Skipped == nil
	case correlate.HazardCommitOnReceive, correlate.HazardRebalanceSlow:
		return true
	}
	return false
}

// routineWhat says what each routine hazard kind is, in a few words.
var routineWhat = map[string]string{
	correlate.HazardOffsetReset:     "partitions with no committed offset yet",
	correlate.HazardCommitOnReceive: "auto-commits of records just delivered",
	correlate.HazardRebalanceSlow:   "the broker's initial rebalance delay",
}

// routineText is the one line a group's routine hazards fold into.
func routineText(group string, kinds map[string]int) string {
	n := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		n += kinds[k]
		parts = append(parts, fmt.Sprintf("%d %s (%s)", kinds[k], k, routineWhat[k]))
	}
	who := group
	if who == "" {
		who = "clients"
	}
	hazards := "hazards"
	if n == 1 {
		hazards = "hazard"
	}
	return fmt.Sprintf("%s: %d info %s every new group shows, folded: %s", who, n, hazards, strings.Join(parts, ", "))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
