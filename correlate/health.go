package correlate

import (
	"fmt"
	"slices"
	"time"
)

// Consumer health, Burrow's evaluation from wire evidence (issue 41).
//
// Each group partition with a committed offset is judged over the last
// Options.HealthWindow of capture time (--health-window, 60 s): its
// committed offset and its end at the window's start (sampled at each
// health tick, a quarter window apart at most) and now, and the commits
// between. A capture shorter than the
// window gives no judgment (no health field), as Burrow waits for a full
// window of offsets.
//
//   - ok: no lag now, or commits move and the lag did not grow;
//   - lagging: commits move, but the lag grew;
//   - stalled: commits come (two or more), all of the same offset, while
//     the end moved and there is lag (a consumer stuck on a record whose
//     commits go on);
//   - stopped: no commit accepted in the window while the end moved and
//     there is lag;
//   - rewind: a commit in the window went backwards (commit_regression).
//
// Stalled and stopped say what the wire shows behind them: the group's
// Fetches answered but no commit (commits failing, with their errors, or
// disabled), its members alive (heartbeats or other requests to the
// coordinator) but no Fetch (processing stuck), or no traffic from its
// members at all (the consumer is gone).

// Health states.
const (
	HealthOK      = "ok"
	HealthLagging = "lagging"
	HealthStalled = "stalled"
	HealthStopped = "stopped"
	HealthRewind  = "rewind"
)

// healthRank orders states by how bad they are, for a group's worst.
var healthRank = map[string]int{HealthOK: 1, HealthLagging: 2, HealthRewind: 3, HealthStalled: 4, HealthStopped: 5}

// Health is a group partition's state over the health window, or a
// group's worst.
type Health struct {
	State string `json:"state"`
	// Evidence is what the wire shows behind it, for people.
	Evidence string `json:"evidence,omitempty"`
	// LagThen is the lag at the window's start, when known.
	LagThen *int64 `json:"lag_then,omitempty"`
	// WindowMillis is the window judged: Options.HealthWindow.
	WindowMillis int64 `json:"window_ms"`
}

// healthSample is a group partition's end and committed offset at a
// health tick (healthTick): the state a window that begins then starts
// from.
type healthSample struct {
	at        time.Time
	end       int64 // -1 unknown
	committed int64 // -1 none
}

// sample records ps's end and committed offset now, keeping those a window
// needs: the newest taken at or before its start, and all since.
func (c *Correlator) sample(ps *partState, at time.Time, end int64, haveEnd bool) {
	sm := healthSample{at: at, end: -1, committed: -1}
	if haveEnd {
		sm.end = end
	}
	if ps.hasCommitted {
		sm.committed = ps.committed
	}
	from := at.Add(-c.opts.HealthWindow)
	i := 0
	for i+1 < len(ps.samples) && !ps.samples[i+1].at.After(from) {
		i++
	}
	ps.samples = append(ps.samples[:0], ps.samples[i:]...)
	if len(ps.samples) >= maxHealthSamples { // ticks closer than a quarter window: thin the middle
		ps.samples = slices.Delete(ps.samples, 1, 2)
	}
	ps.samples = append(ps.samples, sm)
}

// maxHealthSamples bounds a group partition's health samples: a window
// holds four ticks, and the one before it.
const maxHealthSamples = 8

// health judges ps (its lag now lag, its end now end) over the window,
// from the sample taken at or before its start.
func (c *Correlator) health(g *groupState, p tp, ps *partState, end, lag int64) *Health {
	if !ps.hasCommitted || end < 0 {
		return nil
	}
	from := c.now.Add(-c.opts.HealthWindow)
	if c.first.After(from) {
		return nil // a whole window not seen yet: no judgment
	}
	var then *healthSample
	for i := range ps.samples {
		if !ps.samples[i].at.After(from) {
			then = &ps.samples[i]
		}
	}
	if then == nil || then.end < 0 {
		return nil // the partition not seen at the window's start
	}
	h := &Health{State: HealthOK, WindowMillis: c.now.Sub(from).Milliseconds()}
	// The commits of the window.
	var accepted, rejected, same int
	var lastErr int16
	prev, rewound := then.committed, false
	for _, r := range ps.commits.all() {
		if r.at.Before(from) {
			continue
		}
		if r.code != 0 {
			rejected++
			if r.code > 0 {
				lastErr = r.code
			}
			continue
		}
		if prev >= 0 && r.offset < prev {
			rewound = true
		}
		prev = r.offset
		accepted++
		if r.offset == then.committed {
			same++
		}
	}
	if accepted == 0 && !ps.committedAt.Before(from) {
		// Committed in the window without a commit of its history: a
		// transaction's offsets, an OffsetFetch answer.
		accepted = 1
		if ps.committed == then.committed {
			same = 1
		}
	}
	if then.committed >= 0 {
		h.LagThen = i64(then.end - then.committed)
	}
	endMoved := end > then.end
	switch {
	case rewound:
		h.State, h.Evidence = HealthRewind, "a commit in the window went back"
	case lag <= 0:
	case accepted == 0 && endMoved:
		h.State, h.Evidence = HealthStopped, c.stoppedEvidence(g, from, rejected, lastErr)
	case accepted > 1 && same == accepted && ps.committed == then.committed && endMoved:
		h.State = HealthStalled
		h.Evidence = fmt.Sprintf("%d commits in the window, all of offset %d, while the end moved from %d to %d", accepted, then.committed, then.end, end)
	case h.LagThen != nil && *h.LagThen > 0 && lag > *h.LagThen:
		// As Burrow's WARN: behind at the window's start already, and
		// further behind now (a consumer that keeps up and is a record
		// behind at one moment is not lagging).
		h.State, h.Evidence = HealthLagging, fmt.Sprintf("commits move, but the lag grew from %d to %d", *h.LagThen, lag)
	}
	return h
}

// stoppedEvidence says what the wire shows of a group that committed
// nothing in the window from from.
func (c *Correlator) stoppedEvidence(g *groupState, from time.Time, rejected int, lastErr int16) string {
	alive := false
	for _, m := range g.members {
		if !m.lastSeen.Before(from) {
			alive = true
		}
	}
	fetching := !g.lastFetch.Before(from) && !g.lastFetch.IsZero()
	switch {
	case rejected > 0:
		e := fmt.Sprintf("%d commits refused in the window", rejected)
		if lastErr != 0 {
			e += " (" + errName(lastErr) + ")"
		}
		return "commits failing: " + e
	case fetching:
		return "fetches answered, no commits: commits failing or disabled"
	case alive:
		return "heartbeats, no fetches: processing stuck"
	}
	return "no traffic from its members: the consumer is gone"
}

// worseHealth returns the worse of a and b.
func worseHealth(a, b *Health) *Health {
	switch {
	case a == nil:
		return b
	case b == nil || healthRank[b.State] <= healthRank[a.State]:
		return a
	}
	return b
}

// healthSamples samples every group partition when the capture clock
// crosses a step of the sampling grid (a quarter window, at most
// healthEvery), before the exchange that crossed it is taken: on a grid,
// so that correlators that see other exchanges (shards, an aggregator of
// some groups) sample a group's partitions at the same times, in the same
// state.
func (c *Correlator) healthSamples() {
	step := min(healthEvery, c.opts.HealthWindow/4)
	if step <= 0 {
		return
	}
	at := c.now.Truncate(step)
	if !at.After(c.lastSample) {
		return
	}
	c.lastSample = at
	for _, g := range c.groups {
		for p, ps := range g.parts {
			end, ok := c.partEnd(ps, p)
			c.sample(ps, at, end, ok)
		}
	}
}
