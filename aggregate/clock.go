package aggregate

import (
	"cmp"
	"slices"
	"time"
)

// Clocks that lie (docs/aggregate.md, "Hostile agents"). The merge waits
// for the agent whose clock is least advanced, and correlates items at
// their times: one agent whose capture clock reads 1970 would hold every
// other agent's items forever, and one that reads 2099 would move the
// correlator's clock (every member expired) at the end. So the aggregator
// takes each run's clock offset: the latest time of its latest batch
// minus the aggregator's wall clock when that batch came (hosts' clocks
// and the transport's delay; it does not age, so a run that stopped still
// counts). Each poll it finds the largest set of runs whose offsets are
// within --clock-window of each other (a tie: the set with the run heard
// first): the consensus. A run outside it is off clock: it holds nothing
// back, and its items are held back alone (bounded, counted), as are the
// items of any run whose offset falls outside the window around the
// consensus. A run that comes back within it has its held items merged
// (late) then; what is still held at the end is dropped, not correlated.
// Stderr says when a run goes off clock and when it comes back.

// maxHeld bounds the items held back, every run together; beyond, they
// are dropped (counted).
const maxHeld = 1 << 16

// clock is a merger's view of the agents' clocks.
type clock struct {
	window time.Duration // 0: off
	// lo and hi are the consensus offsets (known once a poll found one).
	lo, hi time.Duration
	known  bool
	held   int // items held, all runs
	// heldItems counts the items held back, dropped those of them never
	// merged (beyond maxHeld, outside the window when their run came
	// back, or at the end); outliers the times a run went off clock.
	heldItems, dropped, outliers int64
	returns                      int64 // runs back within the window
}

// claimAt notes the time of item seq of a, which came when a was last
// heard: a run's offset is that of the latest time in its latest batch
// (one odd item does not set it for good).
func (a *agentState) claimAt(seq uint64, at time.Time) {
	if seq > a.claimSeq || (seq == a.claimSeq && at.After(a.claim)) {
		a.claimSeq, a.claim, a.offset = seq, at, at.Sub(a.heard)
	}
}

// offWindow reports whether offset d is outside the window around the
// consensus.
func (m *merger) offWindow(d time.Duration) bool {
	c := &m.clock
	return c.window > 0 && c.known && (d < c.lo-c.window || d > c.hi+c.window)
}

// hold keeps p back: its run is off clock, or its time off the window.
func (m *merger) hold(p *pendingItem) {
	c := &m.clock
	c.heldItems++
	if a := p.agent; !a.offclock && !a.clockSaid {
		a.clockSaid = true
		c.outliers++
		m.caps.report(c.outliers, "agent %s: its clock reads %s, %s from the aggregator's, outside --clock-window %s of the other agents' (%s to %s): its items are held back, not waited for",
			a.name, p.it.At.UTC().Format(time.RFC3339Nano), p.off, c.window, c.lo, c.hi)
	}
	if c.held >= maxHeld {
		c.dropped++
		return
	}
	p.agent.held = append(p.agent.held, p)
	c.held++
}

// judge finds the consensus of the runs' offsets (every run but those
// restarted: a stopped one's offset still stands) and marks each run off
// clock or not, merging the held items of those back within it. now is
// unused: offsets do not age.
func (m *merger) judge(now time.Time) {
	c := &m.clock
	if c.window <= 0 {
		return
	}
	type run struct {
		offset time.Duration
		order  uint64 // heard first: lowest
	}
	runs := make([]run, 0, len(m.agents))
	for _, a := range m.agents {
		if !a.claim.IsZero() && !a.restarted {
			runs = append(runs, run{a.offset, a.order})
		}
	}
	if len(runs) == 0 {
		return
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(a.offset, b.offset) })
	// The largest window [i, j] of offsets within c.window; on a tie the
	// one with the run heard first (a sliding minimum of order).
	best, bi, bj, bOrder := 0, 0, 0, uint64(0)
	var mins []int // indexes of runs, order increasing
	j := -1
	for i := range runs {
		for j+1 < len(runs) && runs[j+1].offset-runs[i].offset <= c.window {
			j++
			for len(mins) > 0 && runs[mins[len(mins)-1]].order >= runs[j].order {
				mins = mins[:len(mins)-1]
			}
			mins = append(mins, j)
		}
		for mins[0] < i {
			mins = mins[1:]
		}
		n, o := j-i+1, runs[mins[0]].order
		if n > best || (n == best && o < bOrder) {
			best, bi, bj, bOrder = n, i, j, o
		}
	}
	c.lo, c.hi, c.known = runs[bi].offset, runs[bj].offset, true
	for _, a := range m.agents {
		if a.claim.IsZero() || a.restarted {
			continue // not judged: it holds nothing back
		}
		off := a.offset < c.lo || a.offset > c.hi
		switch {
		case off && !a.offclock:
			a.offclock = true
			if a.clockSaid {
				break
			}
			a.clockSaid = true
			c.outliers++
			m.caps.report(c.outliers, "agent %s: its clock reads %s, %s from the aggregator's, outside --clock-window %s of the other agents' (%s to %s): its items are held back, not waited for",
				a.name, a.claim.UTC().Format(time.RFC3339Nano), a.offset, c.window, c.lo, c.hi)
		case !off && a.offclock:
			a.offclock, a.clockSaid = false, false
			merged, dropped := m.releaseHeld(a, false)
			c.returns++
			m.caps.report(c.returns, "agent %s: its clock is back within --clock-window %s of the other agents': %d items held back merged, %d dropped",
				a.name, c.window, merged, dropped)
		case !off && len(a.held) > 0:
			m.releaseHeld(a, false) // single items off the window
		}
	}
}

// releaseHeld merges a's held items that are within the window (all are
// dropped with drop), and returns how many went each way.
func (m *merger) releaseHeld(a *agentState, drop bool) (merged, dropped int) {
	held := a.held
	a.held = nil
	m.clock.held -= len(held)
	for _, p := range held {
		if drop || m.offWindow(p.off) {
			dropped++
			continue
		}
		merged++
		m.accept(p)
	}
	m.clock.dropped += int64(dropped)
	return merged, dropped
}

// dropHeld drops every item still held (the input ended): correlated
// now, they would move the story to their run's clock.
func (m *merger) dropHeld() {
	for _, a := range m.agents {
		if len(a.held) > 0 {
			m.releaseHeld(a, true)
		}
	}
}

// offClock counts the runs off clock now.
func (m *merger) offClock() int {
	n := 0
	for _, a := range m.agents {
		if a.offclock {
			n++
		}
	}
	return n
}
