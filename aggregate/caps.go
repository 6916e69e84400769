package aggregate

import (
	"cmp"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
)

// Anything that writes to the agents' topic decides what the aggregator
// keeps: agent runs (a host name and a run id in every record), their
// connections, their clocks. The aggregator bounds each (docs/aggregate.md,
// "Hostile agents"), counts what a bound cut, and says so on stderr.

// Defaults of the bounds (Options; kwire aggregate's flags).
const (
	DefaultMaxAgents   = 10000
	DefaultMaxRuns     = 64
	DefaultMaxConns    = 1 << 20
	DefaultClockWindow = 5 * time.Minute
)

// caps are a merger's bounds and what they cut.
type caps struct {
	maxAgents, maxRuns, maxConns int
	stderr                       io.Writer
	// evicted counts agent runs forgotten (not sending, to make room);
	// refused the batches of new runs dropped while every run known was
	// still sending; connsForgotten the connections whose ids were
	// forgotten (a connection seen again gets a new id); panics the
	// records (or items) whose handling panicked, counted corrupt too.
	evicted, refused, connsForgotten, panics int64
	rotations                                int64 // of the connection ids' generations
	// evictedMissing are the missing batches of the runs evicted.
	evictedMissing uint64
	// evictAt: no run can be evicted before then (the earliest a run
	// still sending may go quiet), so that a flood of new runs does not
	// scan the known ones for each.
	evictAt time.Time
}

// report writes a line to stderr the first time a counter moves and then
// at each power of two, so that a flood says so without flooding.
func (c *caps) report(n int64, format string, args ...any) {
	if c.stderr == nil || n <= 0 || bits.OnesCount64(uint64(n)) != 1 {
		return
	}
	fmt.Fprintf(c.stderr, "kwire: aggregate: "+format+"\n", args...)
}

// room makes room for a new agent run of host at wall time now: the
// host's oldest runs that no longer send beyond maxRuns, and, at
// maxAgents, every run that no longer sends, are forgotten. false: every
// run known is still sending, and the new one is refused.
func (m *merger) room(host string, now time.Time) bool {
	if runs := m.cover.hosts[host]; len(runs) >= m.caps.maxRuns {
		// The oldest first (they are appended as heard), keeping half.
		var drop []*agentState
		for _, r := range runs {
			if len(drop) == len(runs)-m.caps.maxRuns/2 {
				break
			}
			if !m.holds(r, now) {
				drop = append(drop, r)
			}
		}
		for _, r := range drop {
			m.forget(r)
		}
	}
	if len(m.agents) < m.caps.maxAgents {
		return true
	}
	if now.Before(m.caps.evictAt) {
		return false
	}
	// Runs that no longer send, those with the fewest batches first, and
	// none with more than the median (a flood of new runs sends a batch or
	// two each; an agent that ran for long sent more), until a tenth of
	// the cap is free: a flood costs a sort per tenth, not a walk per run.
	var idle []*agentState
	gots := make([]uint64, 0, len(m.agents))
	next := time.Time{}
	for _, a := range m.agents {
		gots = append(gots, a.got)
		if !m.holds(a, now) {
			idle = append(idle, a)
			continue
		}
		if q := a.heard.Add(m.quietAfter); next.IsZero() || q.Before(next) {
			next = q
		}
	}
	slices.Sort(gots)
	median := gots[len(gots)/2]
	slices.SortFunc(idle, func(a, b *agentState) int {
		return cmp.Or(cmp.Compare(a.got, b.got), a.heard.Compare(b.heard), cmp.Compare(a.order, b.order))
	})
	left := false
	for _, a := range idle {
		if a.got > median {
			break
		}
		if len(m.agents) < m.caps.maxAgents-m.caps.maxAgents/10 {
			left = true
			break
		}
		m.forget(a)
	}
	if !left {
		// No run left to forget: none before a run still sending may go
		// quiet, and not again for a tenth of --quiet-after (runs go
		// quiet one by one: a walk for each would be one per new run).
		m.caps.evictAt = next
		if at := now.Add(m.quietAfter / 10); at.After(next) {
			m.caps.evictAt = at
		}
	}
	return len(m.agents) < m.caps.maxAgents
}

// forget drops agent run a (it holds nothing back): it leaves the
// aggregate line (its missing batches still counted) and its host's
// coverage. Items of it waiting in the merge still go.
func (m *merger) forget(a *agentState) {
	delete(m.agents, a.agent)
	runs := m.cover.hosts[a.agent.Host]
	for i, r := range runs {
		if r == a {
			runs = append(runs[:i], runs[i+1:]...)
			break
		}
	}
	if len(runs) == 0 {
		delete(m.cover.hosts, a.agent.Host)
		delete(m.newest, a.agent.Host)
	} else {
		m.cover.hosts[a.agent.Host] = runs
		if m.newest[a.agent.Host] == a {
			m.newestOf(a.agent.Host)
		}
	}
	m.releaseHeld(a, true)
	m.caps.evicted++
	m.caps.evictedMissing += a.missing()
	m.caps.report(m.caps.evicted, "%d agent runs forgotten (the latest %s), to stay within --max-agents %d and --max-runs %d per host: they no longer sent",
		m.caps.evicted, a.name, m.caps.maxAgents, m.caps.maxRuns)
}

// refuse counts a batch of a new agent run dropped: every run known is
// still sending.
func (m *merger) refuse(ag wire.Agent) {
	m.caps.refused++
	m.caps.report(m.caps.refused, "%d batches of new agent runs dropped (the latest %s): %d runs known, all still sending (--max-agents)",
		m.caps.refused, ag, len(m.agents))
}

// restarts marks the runs of a's host that began before another one as
// restarted: they no longer hold the watermark. The newest run of each
// host is kept, so that each batch costs O(1), not a walk over every run
// of its host.
func (m *merger) restarts(a *agentState) {
	host := a.agent.Host
	n := m.newest[host]
	switch {
	case n == nil:
		m.newest[host] = a
		a.restarted = false
	case n == a:
		if a.first.Before(m.newestFirst[host]) {
			m.newestOf(host) // it began earlier than thought: another may be newer
			return
		}
	case a.first.After(n.first):
		n.restarted = !n.final
		a.restarted = false
		m.newest[host] = a
	default:
		a.restarted = !a.final
		return
	}
	m.newestFirst[host] = m.newest[host].first
}

// newestOf finds host's newest run again (the one whose first item is
// latest; on a tie the first heard) and marks the others restarted.
func (m *merger) newestOf(host string) {
	var newest *agentState
	runs := m.cover.hosts[host]
	for _, r := range runs {
		if newest == nil || r.first.After(newest.first) {
			newest = r
		}
	}
	for _, r := range runs {
		r.restarted = r != newest && !r.final
	}
	m.newest[host] = newest
	if newest != nil {
		m.newestFirst[host] = newest.first
	}
}

// connID returns the aggregator-wide id of connection id of agent run
// a. Ids are kept in two generations: beyond maxConns/2 connections the
// older is forgotten (a connection of it seen again gets a new id), so
// that the connections of the latest maxConns/2 at least keep theirs.
func (m *merger) connID(a *agentState, id uint64) uint64 {
	k := connRef{a.agent, id}
	if v, ok := m.conns[k]; ok {
		return v
	}
	v, ok := m.connsOld[k]
	if ok {
		delete(m.connsOld, k)
	} else {
		m.lastConn++
		v = m.lastConn
	}
	if len(m.conns) >= max(m.caps.maxConns/2, 1) {
		m.caps.connsForgotten += int64(len(m.connsOld))
		m.caps.rotations++
		m.caps.report(m.caps.rotations, "%d connection ids forgotten, to stay within --max-conns %d: a connection of theirs seen again gets a new id",
			m.caps.connsForgotten, m.caps.maxConns)
		m.connsOld, m.conns = m.conns, make(map[connRef]uint64)
	}
	m.conns[k] = v
	return v
}

// guard, deferred by the handling of one record (a nil a) or of item
// seq of run a, recovers a panic: the record counts as corrupt and is
// skipped, and stderr says so. Whatever a record holds, the aggregator
// goes on: it reads the topic from its start when restarted, and one
// record that stops it would stop it again every time.
func (m *merger) guard(a *agentState, seq uint64) {
	v := recover()
	if v == nil {
		return
	}
	m.corrupt++
	m.caps.panics++
	what := "a record"
	if a != nil {
		what = fmt.Sprintf("batch %d of agent %s", seq, a.name)
	}
	m.caps.report(m.caps.panics, "%s: panic: %v: counted corrupt and skipped (%d so far); please report it, with the record if you can",
		what, v, m.caps.panics)
}
