package aggregate

import (
	"time"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// Ticks (docs/aggregate.md, "Several aggregators"): the router sends
// each partition a tick of every exchange and anomaly it does not send it
// whole, and the owner gives those to the correlator's Tick (an anomaly:
// its loss only), so that every owner's clock, partition ends, health
// samples and loss are the single aggregator's, as route.Shards' shards'
// are. An owner may get an item both ways (through two of its
// partitions, or whole later: a client binding to a group gets its
// earlier items sent to it again): it takes the first copy, and a whole
// one after a tick; a tick not yet passed on when the whole copy came is
// dropped, and a whole copy of a tick passed on is not counted again
// (ExchangeAfterTick; an anomaly's loss is not taken again).

// mergedItem is what an owner merged of an item.
type mergedItem struct {
	key    time.Time // merge key (zero: not decoded)
	whole  bool      // a whole copy
	ticked bool      // a tick passed on to the correlator
}

// passing is an item pushed as a tick (or whole after one), until it is
// passed on.
type passing struct {
	ref  itemRef
	tick bool
}

// passKey is it's key in groupAgg.passing (nil for counters).
func passKey(it *wire.Item) any {
	switch {
	case it.Exchange != nil:
		return it.Exchange
	case it.Anomaly != nil:
		return it.Anomaly
	}
	return nil
}

// forget forgets every item merged (a fresh correlator).
func (g *groupAgg) forget() {
	g.maxSrc, g.merged, g.order = map[[2]int32]int64{}, map[itemRef]mergedItem{}, nil
	g.homes, g.passing = map[*decode.Anomaly]int32{}, map[any]passing{}
}

// wanted reports whether a copy of item ref is to be merged: the first
// one, or a whole one of an item merged as a tick only. One that is not
// still moves what its partition was read to.
func (g *groupAgg) wanted(ps *partState, ref itemRef, tick bool) bool {
	mi, ok := g.merged[ref]
	if !ok || !tick && !mi.whole {
		return true
	}
	if ps != nil {
		ps.readMax = maxTime(ps.readMax, mi.key)
	}
	return false
}

// note records what was merged of ref, remembering groupMerged items.
func (g *groupAgg) note(ref itemRef, mi mergedItem) {
	if _, ok := g.merged[ref]; !ok {
		if len(g.order) >= groupMerged {
			delete(g.merged, g.order[0])
			g.order = g.order[1:]
		}
		g.order = append(g.order, ref)
	}
	g.merged[ref] = mi
}

// addTicks merges the ticks of tk not merged yet.
func (g *groupAgg) addTicks(ps *partState, tk *wire.RoutedTicks, now time.Time) {
	var want []int // positions in the batch
	for k, i := range tk.Indexes {
		if g.wanted(ps, itemRef{tk.Agent, tk.Seq, i}, true) {
			want = append(want, k)
		}
	}
	if len(want) == 0 {
		return
	}
	b, err := wire.Decode(tk.Batch, g.ag.decode)
	if err != nil || len(b.Items) != len(tk.Indexes) || b.Agent != tk.Agent {
		g.corrupt++
		for _, k := range want {
			g.note(itemRef{tk.Agent, tk.Seq, tk.Indexes[k]}, mergedItem{})
		}
		return
	}
	seen := map[*capture.Conn]bool{}
	for _, k := range want {
		ref := itemRef{tk.Agent, tk.Seq, tk.Indexes[k]}
		if _, ok := g.merged[ref]; !ok { // an index given twice: once
			g.push(ps, ref, b, k, true, now, seen)
		}
	}
}

// tick passes a tick of ref on, unless its whole copy came meanwhile.
func (g *groupAgg) tick(it *wire.Item, ref itemRef) {
	mi, ok := g.merged[ref]
	if mi.whole {
		return
	}
	if ok {
		mi.ticked = true
		g.merged[ref] = mi
	}
	switch {
	case it.Exchange != nil:
		g.ag.withRecords(it, g.ag.corr.Tick)
	case it.Anomaly != nil:
		g.ag.corr.Anomaly(it.Anomaly)
	}
}
