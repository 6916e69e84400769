package aggregate

import (
	"slices"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/route"
)

// The router is the first stage of kwire aggregate --group
// (docs/aggregate.md, "Several aggregators"). Agents key their batches by
// client (host + client id), so one client's exchanges with every broker
// are in one partition of the agents' topic, and the router that owns the
// partition sees them all: it binds clients to the groups their requests
// name, as the correlator does, and sends each item to the partitions of
// the routed topic whose owners need it (package route; a partition is a
// shard):
//
//   - a client's items to the key of every group it was ever bound to
//     (sticky: the correlator's attribution needs the other groups'
//     requests to call a client ambiguous), to the transactions' once it
//     names a transactional id or fetches a transactional partition, and
//     to its own key until it is bound to a group (then its Produce
//     requests only), what it consumes meanwhile to every partition; a
//     client newly bound to a group gets its buffered earlier items sent
//     to that group too
//     (its Fetches may have been published by another broker's agent
//     before its JoinGroup was);
//   - a request naming groups without binding (LeaveGroup,
//     DescribeGroups) also to those groups;
//   - a client's earliest item so far also to its host's key
//     (client_id_churn counts the client ids a host creates);
//   - what teaches everyone (Metadata: topic names and brokers; ListGroups),
//     every agent's counters (its clock, loss, and that it stopped), and
//     anomalies of connections no exchange named a client of, to every
//     partition;
//   - every other exchange and anomaly, to the partitions it does not go
//     to whole, as a tick (wire.RoutedTicks): what the correlator's Tick
//     reads of an exchange (its times, connection, and the partition ends
//     a Produce, Fetch or ListOffsets shows), an anomaly's loss. Every
//     owner then measures lag against the same ends, samples health at
//     the same times and sees every loss, as route.Shards' shards do.
//
// Every agent batch read is also receipted to its agent's key, whose owner
// alone counts the agent's duplicate and missing batches.

// routeRecent bounds the agent batches a router remembers to drop
// duplicates.
const routeRecent = 1 << 16

// router is the routing state of the partitions of the agents' topic a
// router owns: route's binding of clients to groups, over the partitions
// of the routed topic. It runs on one goroutine.
type router struct {
	parts  int32 // of the routed topic
	rt     *route.Router[wire.Agent, wire.RoutedItem]
	recent map[wire.Receipt]bool
	order  []wire.Receipt // recent's, oldest first
	enc    *wire.Encoder
	encFor wire.Agent
	out    map[int32]*wire.Routed
	// src and srcOff are the agents' topic record being routed.
	src    int32
	srcOff int64
	// batch is the agent batch being routed, cur the index of its item
	// being routed, sent the partitions each of its items went to whole.
	batch *wire.Batch
	cur   int
	sent  [][]int32
}

func newRouter(parts int32) *router {
	r := &router{parts: parts, recent: map[wire.Receipt]bool{}}
	r.rt = route.New[wire.Agent](parts, func(q int32, ri wire.RoutedItem) {
		o := r.record(q)
		o.Items = append(o.Items, ri)
		if b := r.batch; b != nil && ri.Index <= r.cur && ri.Seq == b.Seq && ri.Agent == b.Agent {
			r.sent[ri.Index] = append(r.sent[ri.Index], q) // the item, or one of the batch's replayed
		}
	})
	return r
}

// route returns what b, read at offset off of partition p of the agents'
// topic, sends to each partition of the routed topic.
func (r *router) route(b *wire.Batch, p int32, off int64) map[int32]*wire.Routed {
	r.out, r.src, r.srcOff = map[int32]*wire.Routed{}, p, off
	rc := wire.Receipt{Agent: b.Agent, Seq: b.Seq}
	home := r.rt.Shard(route.AgentKey(b.Agent.String()))
	r.record(home).Receipts = append(r.record(home).Receipts, rc)
	if r.recent[rc] {
		return r.out // a duplicate: its owner counts it, nobody merges it
	}
	r.remember(rc)
	r.batch = b
	defer func() { r.batch = nil }()
	r.sent = slices.Grow(r.sent[:0], len(b.Items))[:len(b.Items)]
	for i := range b.Items {
		r.cur, r.sent[i] = i, r.sent[i][:0]
		r.item(b, i)
	}
	r.ticks(b)
	return r.out
}

// ticks sends each partition the ticks of the exchanges and anomalies of
// b it did not get whole (one batch for the partitions missing the same
// items: a batch is one client's, mostly whole to its groups' partitions
// and to none of the others).
func (r *router) ticks(b *wire.Batch) {
	var done []wire.RoutedTicks // encoded already
	for q := range r.parts {
		var idx []int
		for i := range b.Items {
			if tickable(&b.Items[i]) && len(r.sent[i]) < int(r.parts) && !slices.Contains(r.sent[i], q) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		j := slices.IndexFunc(done, func(t wire.RoutedTicks) bool { return slices.Equal(t.Indexes, idx) })
		if j < 0 {
			j = len(done)
			done = append(done, wire.RoutedTicks{Agent: b.Agent, Seq: b.Seq, Indexes: idx, Batch: r.encodeTicks(b, idx)})
		}
		o := r.record(q)
		o.Ticks = append(o.Ticks, done[j])
	}
}

// tickable reports whether it is an item the correlator takes a tick of:
// an exchange or an anomaly (counters go to every partition whole).
func tickable(it *wire.Item) bool {
	return it.Kind == wire.KindExchange && it.Exchange != nil || it.Kind == wire.KindAnomaly && it.Anomaly != nil
}

func (r *router) remember(rc wire.Receipt) {
	if len(r.order) >= routeRecent {
		delete(r.recent, r.order[0])
		r.order = r.order[1:]
	}
	r.recent[rc] = true
	r.order = append(r.order, rc)
}

// record returns the routed record being built for partition q.
func (r *router) record(q int32) *wire.Routed {
	o := r.out[q]
	if o == nil {
		o = &wire.Routed{SrcPartition: r.src, SrcOffset: r.srcOff}
		r.out[q] = o
	}
	return o
}

// encoder returns the encoder of a batch of b's agent, reset for it.
func (r *router) encoder(b *wire.Batch) *wire.Encoder {
	if r.enc == nil || r.encFor != b.Agent {
		r.enc, r.encFor = wire.NewEncoder(b.Agent), b.Agent
	}
	e := r.enc
	e.SetBuild(b.Kwire) // the agent's, not the router's
	e.Reset(b.Seq)
	return e
}

// encode re-encodes item i of b alone.
func (r *router) encode(b *wire.Batch, i int) []byte {
	e := r.encoder(b)
	e.Item(&b.Items[i]) // record segments as read (decodeOptions): none rebuilt
	return slices.Clone(e.Bytes())
}

// encodeTicks encodes items idx of b as one batch, for the correlator's
// Tick: of an exchange only the bodies it reads.
func (r *router) encodeTicks(b *wire.Batch, idx []int) []byte {
	e := r.encoder(b)
	for _, i := range idx {
		it := b.Items[i]
		if x := it.Exchange; x != nil && !correlate.TickBodies(x.Key) {
			bare := *x
			bare.Req, bare.Resp = nil, nil
			it.Exchange = &bare
		}
		e.Item(&it)
	}
	return slices.Clone(e.Bytes())
}

// item routes item i of b: an agent's counters to every partition (its
// home the agent's), an anomaly and an exchange as route says (an
// anomaly's home its client's).
func (r *router) item(b *wire.Batch, i int) {
	it := &b.Items[i]
	ri := wire.RoutedItem{Agent: b.Agent, Seq: b.Seq, Index: i, Home: -1}
	switch {
	case it.Kind == wire.KindCounters:
		ri.Home = r.rt.Shard(route.AgentKey(b.Agent.String()))
		ri.Batch = r.encode(b, i)
		r.rt.All(ri)
	case it.Kind == wire.KindAnomaly && it.Anomaly != nil:
		k, _ := r.rt.AnomalyClient(b.Agent, it.Anomaly)
		ri.Home = r.rt.Shard(route.ClientKey(k))
		ri.Batch = r.encode(b, i)
		r.rt.Anomaly(b.Agent, it.Anomaly, ri)
	case it.Kind == wire.KindExchange && it.Exchange != nil:
		ri.Batch = r.encode(b, i)
		r.rt.Exchange(b.Agent, it.At, it.Exchange, ri)
	}
}
