package correlate

import (
	"fmt"
	"time"
)

// Consumer health, Burrow's evaluation from wire evidence (issue 41).
//
// Each group partition with a committed offset is judged over the last
// Options.HealthWindow of capture time (--health-window, 60 s): its
// committed offset and its end then (the last commit before the window,
// the end offset seen last before it) and now. A capture shorter than the
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

// health judges ps (its lag now lag, its end now end) over the window.
func (c *Correlator) health(g *groupState, p tp, ps *partState, end, lag int64) *Health {
	if !ps.hasCommitted || end < 0 {
		return nil
	}
	from := c.now.Add(-c.opts.HealthWindow)
	if c.first.After(from) {
		return nil // a whole window not seen yet: no judgment
	}
	h := &Health{State: HealthOK, WindowMillis: c.now.Sub(from).Milliseconds()}
	// The commits of the window, and the committed offset before it.
	then, haveThen := int64(-1), false
	var accepted, rejected, same int
	var lastErr int16
	prev, rewound := int64(-1), false
	for _, r := range ps.commits.all() {
		if r.at.Before(from) {
			if r.code == 0 {
				then, haveThen = r.offset, true
			}
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
		if haveThen && r.offset == then {
			same++
		}
	}
	if !haveThen && accepted > 0 { // the history does not reach back: its oldest commit stands in
		for _, r := range ps.commits.all() {
			if r.code == 0 && !r.at.Before(from) {
				then, haveThen = r.offset, true
				break
			}
		}
		same = 0
		for _, r := range ps.commits.all() {
			if r.code == 0 && !r.at.Before(from) && r.offset == then {
				same++
			}
		}
	}
	if accepted == 0 && !ps.committedAt.Before(from) {
		// Committed in the window without a commit of its history: a
		// transaction's offsets, an OffsetFetch answer.
		accepted = 1
		if !haveThen {
			then, haveThen = ps.committed, true
		}
		if ps.committed == then {
			same = 1
		}
	}
	endThen, haveEnd := c.endAt(p, from)
	if haveThen && haveEnd {
		h.LagThen = i64(endThen - then)
	}
	endMoved := haveEnd && end > endThen
	switch {
	case rewound:
		h.State, h.Evidence = HealthRewind, "a commit in the window went back"
	case lag <= 0:
	case accepted == 0 && endMoved:
		h.State, h.Evidence = HealthStopped, c.stoppedEvidence(g, from, rejected, lastErr)
	case accepted > 1 && same == accepted && ps.committed == then && endMoved:
		h.State = HealthStalled
		h.Evidence = fmt.Sprintf("%d commits in the window, all of offset %d, while the end moved from %d to %d", accepted, then, endThen, end)
	case h.LagThen != nil && lag > *h.LagThen:
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

// endAt returns the end of p known at time t: the last end mark seen at
// or before it.
func (c *Correlator) endAt(p tp, t time.Time) (int64, bool) {
	s := c.ends[p]
	if s == nil {
		return -1, false
	}
	ms := t.UnixMilli()
	end, ok := int64(-1), false
	for _, m := range s.marks {
		if m.ms <= ms {
			end, ok = m.end, true
		}
	}
	if !ok && len(s.marks) > 0 { // seen only since: its first mark stands in
		end, ok = s.marks[0].end, true
	}
	return end, ok
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
