package aggregate

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/version"
	"github.com/kwire/kwire/jsonout"
)

// Line is the final "aggregate" NDJSON line (docs/aggregate.md).
type Line struct {
	V          int            `json:"v"`
	Type       string         `json:"type"`
	TS         correlate.Time `json:"ts"`
	TSMillis   int64          `json:"ts_ms"`
	Agents     []LineAgent    `json:"agents"`
	Missing    uint64         `json:"agent_records_missing"`
	Duplicates int64          `json:"duplicate_batches"`
	Corrupt    int64          `json:"corrupt_batches"`
	Late       int64          `json:"late_exchanges"`
	Dropped    uint64         `json:"publish_batches_dropped"`
	// Unverified counts batches dropped because they were not signed
	// with a key of the agent they name (Options.Keys).
	Unverified int64 `json:"unverified_batches"`
	// NewerFormat counts batches dropped because they are of a format
	// newer than this aggregator reads (an agent of a newer kwire:
	// upgrade the aggregator).
	NewerFormat int64 `json:"newer_format_batches"`
	// Restarts counts agent runs that ended without saying so, a later
	// run of their host being heard.
	Restarts int `json:"agent_restarts"`
	// Withheld counts expiries concluded from a silence the coordinator's
	// host's agents did not capture (confirmed ones included); Unobserved
	// lists the members still withheld at the end.
	Withheld   int64        `json:"expiries_withheld"`
	Unobserved []Unobserved `json:"unobserved,omitempty"`
	// HazardsWithheld counts member_expired and heartbeat_late hazards
	// dropped because the silence they rest on was the aggregator's: the
	// coordinator's host was not captured for all of it.
	HazardsWithheld int64 `json:"hazards_withheld"`
	// What the bounds on hostile agents cut (docs/aggregate.md, "Hostile
	// agents"): runs off clock at the end (their clock outside
	// --clock-window of the others'), items held back for it and those
	// of them dropped; runs forgotten (--max-agents, --max-runs) and
	// batches of new runs refused; connection ids forgotten (--max-conns);
	// records whose handling panicked (counted corrupt too).
	OffClock       int   `json:"agents_off_clock"`
	ClockHeld      int64 `json:"clock_held_items"`
	ClockDropped   int64 `json:"clock_dropped_items"`
	Evicted        int64 `json:"agents_forgotten"`
	Refused        int64 `json:"agent_batches_refused"`
	ConnsForgotten int64 `json:"conns_forgotten"`
	Panics         int64 `json:"panics_recovered"`
}

// LineAgent is one agent run of the aggregate line: its name (host and
// run), its Kwire build (nil when its batches do not say: a format
// before 6), State (sending, quiet, stopped or restarted), the Batches
// received and Missing, the capture times of its First and Latest items,
// and its latest publishing counters.
type LineAgent struct {
	Agent   string            `json:"agent"`
	Kwire   *version.Build    `json:"kwire,omitempty"`
	State   string            `json:"state"`
	Batches uint64            `json:"batches"`
	Missing uint64            `json:"records_missing"`
	First   correlate.Time    `json:"first"`
	Latest  correlate.Time    `json:"latest"`
	Publish wire.PublishStats `json:"publish"`
}

// lineAgent is a's LineAgent at wall time now.
func (m *merger) lineAgent(a *agentState, now time.Time) LineAgent {
	x := LineAgent{Agent: a.name, State: m.state(a, now), Batches: a.got, Missing: a.missing(), First: correlate.TimeOf(a.first), Latest: correlate.TimeOf(a.latest)}
	if a.kwire != (version.Build{}) {
		b := a.kwire
		x.Kwire = &b
	}
	if a.counter != nil {
		x.Publish = a.counter.Publish
	}
	return x
}

func (ag *Aggregator) line(end, now time.Time) *Line {
	m := ag.m
	l := &Line{V: jsonout.SchemaVersion, Type: "aggregate", TS: correlate.TimeOf(end), TSMillis: end.UnixMilli(), Duplicates: m.duplicates, Corrupt: m.corrupt, Unverified: ag.verify.count(),
		NewerFormat: ag.newer.batches(), Late: m.late, Withheld: m.cover.expiries, HazardsWithheld: m.cover.hazards}
	m.caps.line(l, m)
	for _, a := range m.agents {
		x := m.lineAgent(a, now)
		if a.restarted {
			l.Restarts++
		}
		l.Agents = append(l.Agents, x)
		l.Missing += x.Missing
		l.Dropped += x.Publish.BatchesDropped
	}
	l.Missing += m.caps.evictedMissing
	slices.SortFunc(l.Agents, func(a, b LineAgent) int { return cmp.Compare(a.Agent, b.Agent) })
	return l
}

// line sets l's counters of what the bounds cut.
func (c *caps) line(l *Line, m *merger) {
	l.OffClock, l.ClockHeld, l.ClockDropped = m.offClock(), m.clock.heldItems, m.clock.dropped
	l.Evicted, l.Refused, l.ConnsForgotten, l.Panics = c.evicted, c.refused, c.connsForgotten, c.panics
}

// textKwire writes, in text, which kwire the agents run (how many runs
// of each build, "unknown" for those whose format does not say), and the
// batches of a newer format dropped, if any.
func textKwire(w io.Writer, l *Line) error {
	n := map[string]int{}
	for _, a := range l.Agents {
		b := "unknown"
		if a.Kwire != nil {
			b = a.Kwire.String()
		}
		n[b]++
	}
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s (%d)", b, n[b]))
	}
	line := "aggregate: agents' kwire: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		line = "aggregate: no agent heard"
	}
	if l.NewerFormat > 0 {
		line += fmt.Sprintf("; %d batches of a newer format dropped: upgrade this aggregator (docs/deploy.md, Upgrades)", l.NewerFormat)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// textCaps writes, in text, what the bounds on hostile agents cut, if
// anything.
func textCaps(w io.Writer, l *Line) error {
	if l.OffClock == 0 && l.ClockHeld == 0 && l.Evicted == 0 && l.Refused == 0 && l.ConnsForgotten == 0 && l.Panics == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "aggregate: bounds: %d agents off clock (%d items held back, %d dropped), %d agent runs forgotten, %d batches of new runs refused, %d connection ids forgotten, %d panics recovered\n",
		l.OffClock, l.ClockHeld, l.ClockDropped, l.Evicted, l.Refused, l.ConnsForgotten, l.Panics)
	return err
}
