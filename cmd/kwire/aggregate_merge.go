package main

import (
	"cmp"
	"container/heap"
	"reflect"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/wire"
)

// merger puts the items of every agent's batches back into one stream in
// capture-time order: items wait in a heap until the watermark (the
// least latest clock of the agents still sending, minus maxLateness)
// passes them. It drops duplicate batches and counts the missing ones per
// agent. It runs on one goroutine, the aggregator's.
type merger struct {
	agents      map[wire.Agent]*agentState
	pending     itemHeap
	maxLateness time.Duration
	quietAfter  time.Duration // wall time without a batch: quiet
	conns       map[connRef]uint64
	released    time.Time // At of the latest item released
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
	agent   wire.Agent
	name    string
	next    uint64              // every seq below it was received
	above   map[uint64]struct{} // received seqs at or above next
	maxSeq  uint64
	got     uint64    // distinct batches received
	latest  time.Time // the latest At of its items
	heard   time.Time // wall time of its latest batch
	final   bool      // it said it stopped
	counter *wire.Counters
	drops   uint64 // source drops already given to the correlator
}

// missing is how many of its batches never arrived (so far).
func (a *agentState) missing() uint64 { return a.maxSeq - a.got }

// maxAbove caps the seqs remembered above a hole: beyond it the oldest
// holes are given up (still counted missing).
const maxAbove = 1 << 16

type pendingItem struct {
	it    wire.Item
	agent *agentState
	seq   uint64
	index int
}

type itemHeap []pendingItem

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if c := a.it.At.Compare(b.it.At); c != 0 {
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
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(pendingItem)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newMerger(maxLateness, quietAfter time.Duration, next func(*wire.Item, *agentState)) *merger {
	return &merger{agents: make(map[wire.Agent]*agentState), conns: make(map[connRef]uint64),
		maxLateness: maxLateness, quietAfter: quietAfter, next: next}
}

// add takes a batch that arrived at wall time now. Its connections get
// ids unique across agents.
func (m *merger) add(b *wire.Batch, now time.Time) {
	a := m.agents[b.Agent]
	if a == nil {
		a = &agentState{agent: b.Agent, name: b.Agent.String(), next: 1, above: make(map[uint64]struct{})}
		m.agents[b.Agent] = a
	}
	if _, dup := a.above[b.Seq]; dup || b.Seq < a.next {
		m.duplicates++
		return
	}
	a.above[b.Seq] = struct{}{}
	a.got++
	a.maxSeq = max(a.maxSeq, b.Seq)
	for {
		if _, ok := a.above[a.next]; !ok {
			break
		}
		delete(a.above, a.next)
		a.next++
	}
	if len(a.above) > maxAbove {
		a.next = b.Seq + 1 // give up on the holes below
		clear(a.above)
	}
	a.heard = now
	seen := map[*capture.Conn]bool{}
	for i, it := range b.Items {
		m.renumber(a, it, seen)
		if it.At.After(a.latest) {
			a.latest = it.At
		}
		if it.Kind == wire.KindCounters && it.Counters != nil && it.Counters.Final {
			a.final = true
		}
		heap.Push(&m.pending, pendingItem{it: it, agent: a, seq: b.Seq, index: i})
	}
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
	k := connRef{a.agent, c.ID}
	id, ok := m.conns[k]
	if !ok {
		id = uint64(len(m.conns)) + 1
		m.conns[k] = id
	}
	c.ID = id
}

// watermark is the capture time up to which every agent still sending
// has sent everything (give or take maxLateness); ok is false while no
// agent is sending.
func (m *merger) watermark(now time.Time) (w time.Time, ok bool) {
	for _, a := range m.agents {
		if a.final || now.Sub(a.heard) > m.quietAfter {
			continue
		}
		if t := a.latest.Add(-m.maxLateness); !ok || t.Before(w) {
			w, ok = t, true
		}
	}
	return w, ok
}

// release passes on the items the watermark has passed; all passes on
// everything waiting (the input is caught up or ended).
func (m *merger) release(now time.Time, all bool) {
	w, ok := m.watermark(now)
	for m.pending.Len() > 0 {
		top := &m.pending[0]
		if !all && (!ok || top.it.At.After(w)) {
			return
		}
		p := heap.Pop(&m.pending).(pendingItem)
		if p.it.At.Before(m.released) {
			if p.it.Kind == wire.KindExchange {
				m.late++
			}
		} else {
			m.released = p.it.At
		}
		if p.it.At.After(m.end) {
			m.end = p.it.At
		}
		m.next(&p.it, p.agent)
	}
}

// state says whether an agent is sending, quiet or stopped.
func (m *merger) state(a *agentState, now time.Time) string {
	switch {
	case a.final:
		return "stopped"
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
