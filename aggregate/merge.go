package aggregate

import (
	"cmp"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// merger puts the items of every agent's batches back into one stream in
// capture-time order: items wait in a heap until the watermark (the
// least latest clock of the agents still sending, minus maxLateness)
// passes them. It drops duplicate batches and counts the missing ones per
// agent. It runs on one goroutine, the aggregator's.
type merger struct {
	agents      map[wire.Agent]*agentState
	cover       *coverage
	pending     itemHeap
	maxLateness time.Duration
	maxSkew     time.Duration // agents' clocks may be this far apart
	quietAfter  time.Duration // wall time without a batch: quiet
	// conns and connsOld are the connections' aggregator-wide ids, in
	// two generations (connID); lastConn the latest id given.
	conns, connsOld map[connRef]uint64
	lastConn        uint64
	// newest is the newest run of each host, newestFirst its first
	// item's time then (restarts).
	newest      map[string]*agentState
	newestFirst map[string]time.Time
	heard       uint64 // agent runs heard, for agentState.order
	caps        caps
	clock       clock
	released    time.Time // At of the latest item released
	cur         time.Time // merge key of the item being released
	end         time.Time // the latest At of any item
	late        int64     // items released after a later one
	duplicates  int64
	corrupt     int64
	next        func(it *wire.Item, a *agentState)
}

type connRef struct {
	agent wire.Agent
	id    uint64
}

// agentState is what the aggregator knows of one agent run.
type agentState struct {
	agent  wire.Agent
	name   string
	next   uint64              // every seq below it was received
	above  map[uint64]struct{} // received seqs at or above next
	maxSeq uint64
	got    uint64    // distinct batches received
	first  time.Time // the earliest At of its items
	latest time.Time // the latest At of its items
	// seen is the latest capture time of the traffic it reported (an
	// exchange's request or response, an anomaly): what coverage rests
	// on. latest may be ahead: counters carry the host's wall clock, and
	// what a live agent gives once stopped carries its stop time, while
	// packets may still wait in its capture ring.
	seen  time.Time
	heard time.Time // wall time of its latest batch
	final bool      // it said it stopped
	// restarted: a later run of the same host was heard: this one ended
	// without saying so (killed, crashed).
	restarted bool
	// kwire is the agent's build, from its latest batch (zero: an agent
	// of a format before 6 does not say).
	kwire   version.Build
	counter *wire.Counters
	drops   uint64 // source drops already given to the correlator
	// duplicates counts its batches received again.
	duplicates int64
	// order: it was the order-th run heard. claim (its clock) is the
	// latest time of its batch claimSeq, the latest; offset is claim's
	// from the aggregator's wall clock. offclock: its clock
	// is outside the window of the others' (clock.go); held are its
	// items held back meanwhile.
	order    uint64
	claim    time.Time
	claimSeq uint64
	offset   time.Duration // claim minus the wall clock when it came
	offclock bool
	held     []*pendingItem
	// clockSaid: stderr said its clock is off (once until it is back).
	clockSaid bool
}

// missing is how many of its batches never arrived (so far).
func (a *agentState) missing() uint64 { return a.maxSeq - a.got }

// maxAbove caps the seqs remembered above a hole: beyond it the oldest
// holes are given up (still counted missing).
const maxAbove = 1 << 16

type pendingItem struct {
	it    wire.Item
	key   time.Time // At, earlier by maxSkew for what only teaches (mergeKey)
	agent *agentState
	seq   uint64
	index int
	off   time.Duration // At's offset from the wall clock when it came (clock.go)
}

// itemHeap orders pending items by key (ties: agent, seq, index). It
// holds pointers, and is not a container/heap: an item is boxed neither
// on push nor on pop, and sifting moves 8 bytes, not the item (the heap
// holds --max-lateness of every agent's items).
type itemHeap []*pendingItem

func (h itemHeap) less(i, j int) bool {
	a, b := h[i], h[j]
	if c := a.key.Compare(b.key); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(a.agent.name, b.agent.name); c != 0 {
		return c < 0
	}
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.index < b.index
}

func (h *itemHeap) push(p *pendingItem) {
	*h = append(*h, p)
	q := *h
	for j := len(q) - 1; j > 0; {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		j = i
	}
}

func (h *itemHeap) pop() *pendingItem {
	q := *h
	n := len(q) - 1
	top := q[0]
	q[0] = q[n]
	q[n] = nil
	q = q[:n]
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && q.less(r, j) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q[i], q[j] = q[j], q[i]
		i = j
	}
	*h = q
	return top
}

func newMerger(maxLateness, quietAfter time.Duration, next func(*wire.Item, *agentState)) *merger {
	return &merger{agents: make(map[wire.Agent]*agentState), conns: make(map[connRef]uint64), cover: newCoverage(),
		newest: map[string]*agentState{}, newestFirst: map[string]time.Time{},
		caps:        caps{maxAgents: DefaultMaxAgents, maxRuns: DefaultMaxRuns, maxConns: DefaultMaxConns},
		maxLateness: maxLateness, quietAfter: quietAfter, next: next}
}

// add takes a batch that arrived at wall time now. Its connections get
// ids unique across agents.
func (m *merger) add(b *wire.Batch, now time.Time) {
	a := m.agent(b.Agent, now)
	if a == nil {
		return
	}
	if !m.receive(a, b.Seq) {
		return
	}
	a.heard, a.kwire = now, b.Kwire
	seen := map[*capture.Conn]bool{}
	for i, it := range b.Items {
		m.push(a, b.Seq, i, it, seen)
	}
	m.restarts(a)
}

// agent returns the state of agent run ag, new if it was not heard yet
// (at wall time now); nil when a new run is refused (caps.go).
func (m *merger) agent(ag wire.Agent, now time.Time) *agentState {
	a := m.agents[ag]
	if a == nil {
		if !m.room(ag.Host, now) {
			m.refuse(ag)
			return nil
		}
		m.heard++
		a = &agentState{agent: ag, name: ag.String(), next: 1, above: make(map[uint64]struct{}), order: m.heard, heard: now}
		m.agents[ag] = a
		m.cover.hosts[ag.Host] = append(m.cover.hosts[ag.Host], a)
	}
	return a
}

// receive counts batch seq of a as received; false for a duplicate.
func (m *merger) receive(a *agentState, seq uint64) bool {
	if _, dup := a.above[seq]; dup || seq < a.next {
		m.duplicates++
		a.duplicates++
		return false
	}
	a.above[seq] = struct{}{}
	a.got++
	a.maxSeq = max(a.maxSeq, seq)
	for {
		if _, ok := a.above[a.next]; !ok {
			break
		}
		delete(a.above, a.next)
		a.next++
	}
	if len(a.above) > maxAbove {
		a.next = seq + 1 // give up on the holes below
		clear(a.above)
	}
	return true
}

// push queues item index of a's batch seq for the merge, or holds it
// back: its run is off clock, or its time outside the window around the
// others' (clock.go).
func (m *merger) push(a *agentState, seq uint64, index int, it wire.Item, seen map[*capture.Conn]bool) {
	m.renumber(a, it, seen)
	a.claimAt(seq, it.At)
	if it.Kind == wire.KindCounters && it.Counters != nil && it.Counters.Final {
		a.final = true
	}
	p := &pendingItem{it: it, key: m.mergeKey(&it), agent: a, seq: seq, index: index, off: it.At.Sub(a.heard)}
	if a.offclock || m.offWindow(p.off) {
		m.hold(p)
		return
	}
	m.accept(p)
}

// accept queues p for the merge.
func (m *merger) accept(p *pendingItem) {
	a, it := p.agent, &p.it
	if it.At.After(a.latest) {
		a.latest = it.At
	}
	if a.first.IsZero() || it.At.Before(a.first) {
		a.first = it.At
	}
	a.seen = maxTime(a.seen, evidenceTime(it))
	m.pending.push(p)
}

// evidenceTime is the capture time of the traffic an item reports.
func evidenceTime(it *wire.Item) time.Time {
	switch {
	case it.Exchange != nil:
		return maxTime(it.Exchange.ReqTime, it.Exchange.RespTime)
	case it.Anomaly != nil:
		return it.Anomaly.Time
	}
	return time.Time{}
}

// mergeKey is when an item is merged: its At, but maxSkew earlier for
// a Metadata exchange, which only teaches (topic ids' names, brokers):
// another host's request that used what it taught (a KIP-848
// OffsetCommit or a Fetch naming topics by id) may have a capture time
// before it by up to the skew between the two hosts' clocks.
func (m *merger) mergeKey(it *wire.Item) time.Time {
	if it.Kind == wire.KindExchange && it.Exchange != nil && it.Exchange.Key == int16(kmsg.Metadata) {
		return it.At.Add(-m.maxSkew)
	}
	return it.At
}

// renumber gives an item's connection its aggregator-wide id (once per
// connection object of a batch).
func (m *merger) renumber(a *agentState, it wire.Item, seen map[*capture.Conn]bool) {
	var c *capture.Conn
	switch {
	case it.Exchange != nil:
		c = it.Exchange.Conn
	case it.Anomaly != nil:
		c = it.Anomaly.Conn
	}
	if c == nil || seen[c] {
		return
	}
	seen[c] = true
	c.ID = m.connID(a, c.ID)
}

// watermark is the capture time up to which every agent still sending
// has sent everything (give or take maxLateness); ok is false while no
// agent is sending.
func (m *merger) watermark(now time.Time) (w time.Time, ok bool) {
	for _, a := range m.agents {
		if !m.holds(a, now) {
			continue
		}
		if t := a.latest.Add(-m.maxLateness); !ok || t.Before(w) {
			w, ok = t, true
		}
	}
	return w, ok
}

// holds reports whether agent a holds the watermark back: it is still
// sending (not stopped, restarted, quiet, or off clock).
func (m *merger) holds(a *agentState, now time.Time) bool {
	return !a.final && !a.restarted && !a.offclock && now.Sub(a.heard) <= m.quietAfter
}

// sending reports whether an agent still holds the watermark: a transport
// that is down for a while makes no agent look done.
func (m *merger) sending(now time.Time) bool {
	for _, a := range m.agents {
		if m.holds(a, now) {
			return true
		}
	}
	return false
}

// Release modes: up to the watermark; caught up (the input had nothing
// new: up to the least latest clock of the agents still sending, since
// what they sent is all there); everything (the input ended).
const (
	releaseWatermark = iota
	releaseCaughtUp
	releaseAll
)

// release passes on the items the watermark (per mode) has passed.
func (m *merger) release(now time.Time, mode int) {
	if mode == releaseAll {
		m.dropHeld()
	} else {
		m.judge(now)
	}
	w, ok := m.watermark(now)
	if mode == releaseCaughtUp && ok {
		w = w.Add(m.maxLateness)
	}
	for len(m.pending) > 0 {
		top := m.pending[0]
		if mode == releaseWatermark && !ok {
			return
		}
		if mode != releaseAll && ok && top.key.After(w) {
			return
		}
		p := m.pending.pop()
		if p.key.Before(m.released) {
			if p.it.Kind == wire.KindExchange {
				m.late++
			}
		} else {
			m.released = p.key
		}
		if p.it.At.After(m.end) {
			m.end = p.it.At
		}
		m.cur = p.key
		m.pass(p)
	}
}

// pass passes p on; a panic counts its batch corrupt (guard).
func (m *merger) pass(p *pendingItem) {
	defer m.guard(p.agent, p.seq)
	m.next(&p.it, p.agent)
}

// state says whether an agent is sending, quiet or stopped.
func (m *merger) state(a *agentState, now time.Time) string {
	switch {
	case a.final:
		return "stopped"
	case a.restarted:
		return "restarted"
	case a.offclock:
		return "off_clock"
	case now.Sub(a.heard) > m.quietAfter:
		return "quiet"
	}
	return "sending"
}

// totals sums the agents' latest counters.
func (m *merger) totals() (cs capture.Stats, ds decode.Stats, ps wire.PublishStats) {
	for _, a := range m.agents {
		if c := a.counter; c != nil {
			addCounts(reflect.ValueOf(&cs).Elem(), reflect.ValueOf(&c.Capture).Elem())
			addCounts(reflect.ValueOf(&ds).Elem(), reflect.ValueOf(&c.Decode).Elem())
			addCounts(reflect.ValueOf(&ps).Elem(), reflect.ValueOf(&c.Publish).Elem())
		}
	}
	return cs, ds, ps
}

// addCounts adds every integer of src to dst's (same type), through
// arrays and pointers to structs.
func addCounts(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		dst.SetInt(dst.Int() + src.Int())
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		dst.SetUint(dst.Uint() + src.Uint())
	case reflect.Struct:
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				addCounts(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Array:
		for i := range src.Len() {
			addCounts(dst.Index(i), src.Index(i))
		}
	case reflect.Pointer:
		if src.IsNil() || src.Elem().Kind() != reflect.Struct {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.New(src.Elem().Type()))
		}
		addCounts(dst.Elem(), src.Elem())
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
