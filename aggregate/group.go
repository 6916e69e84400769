package aggregate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/route"
)

// kwire aggregate --group NAME: several instances split the work
// (docs/aggregate.md, "Several aggregators"). Each instance runs two
// stages, each a member of a Kafka consumer group:
//
//   - the router (consumer group NAME.route over the agents' topic,
//     router.go, route_stage.go) sends every item to the partitions of the routed
//     topic TOPIC.NAME whose owners need it;
//   - the owner (consumer group NAME over TOPIC.NAME) merges and
//     correlates what its partitions hold, and writes the lines of the
//     keys (groups, clients, hosts, agents) its partitions own.

// groupMerged caps the routed items remembered to merge each once (an
// item sent to two partitions of one owner comes twice).
const groupMerged = 1 << 20

// groupAgg is one instance's owner stage.
type groupAgg struct {
	ag     *Aggregator
	parts  int32
	name   string
	hook   *Hook
	routed string
	// work is held while a poll's records are merged, correlated and
	// written, and by the rebalance callbacks: a partition changes hands
	// between polls, when what was written of it is known.
	work   sync.Mutex
	mu     sync.Mutex
	owned  map[int32]bool
	ps     map[int32]*partState // of the partitions owned
	gone   map[int32]bool       // revoked once frozen: no record committed
	frozen bool
	fp     *fingerprinter
	// fresh gives the owner a new merger and correlator: on every
	// assignment it correlates its partitions again from their start.
	fresh func()
	// final is the position of lines written once the input ended.
	final time.Time
	// Handover counters (docs/aggregate.md): records found on taking a
	// partition over, clean and not; lines left out as the previous
	// owner's; lines written that a drift of positions could duplicate;
	// lines written after an unclean handover that its owner may have
	// written; commits that failed.
	handovers, uncleanHandovers, suppressed, uncertain, maybeDup int64
	commitErrors                                                 atomic.Int64
	maxSrc                                                       map[[2]int32]int64 // (agents' topic partition, routed partition): the latest offset read
	merged                                                       map[itemRef]mergedItem
	order                                                        []itemRef
	homes                                                        map[*decode.Anomaly]int32
	// passing are the ticks, and the whole copies of items merged as
	// ticks before, not yet passed on (group_ticks.go): by the item's
	// exchange or anomaly.
	passing map[any]passing
	// redelivered counts routed records read again (a router took a
	// partition over); corrupt those that do not decode.
	redelivered, corrupt int64
}

type itemRef struct {
	agent wire.Agent
	seq   uint64
	index int
}

// runGroup is kwire aggregate --group: one instance of group opts.Group.
func runGroup(ctx context.Context, opts *Options, stdout io.Writer) error {
	topic, stderr := opts.Topic, cmp.Or[io.Writer](opts.Stderr, io.Discard)
	routed := topic + "." + opts.Group
	parts, err := ensureRouted(ctx, opts.Client, topic, routed)
	if err != nil {
		return err
	}
	g := &groupAgg{parts: parts, name: opts.Group, hook: opts.Hook, routed: routed, owned: map[int32]bool{}, ps: map[int32]*partState{}, gone: map[int32]bool{},
		fp: newFingerprinter()}
	rs := &routeStage{opts: opts.Client, topic: topic, routed: routed, group: opts.Group + ".route", parts: parts, hook: opts.Hook, stderr: stderr,
		verify: newVerifier(opts.Keys, stderr), newer: newNewerFormats(stderr), decode: opts.decodeOptions()}
	cl, err := kgo.NewClient(append(slices.Clone(opts.Client), kgo.ConsumeTopics(routed), kgo.ConsumerGroup(opts.Group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Eager: every rebalance revokes every partition, and the owner
		// correlates what it is given from scratch, in capture-time order
		// (a partition's history correlated into a correlator already
		// ahead in time invents hazards).
		kgo.Balancers(kgo.StickyBalancer()), kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(fromStart(routed)),
		kgo.OnOffsetsFetched(g.fetched),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { g.revoke(ctx, cl, m[routed], true) }),
		kgo.OnPartitionsLost(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) { g.revoke(ctx, cl, m[routed], false) }),
	)...)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	g.ag = New(opts, stdout)
	g.fresh = func() {
		g.ag.m = opts.merger(g.item)
		g.ag.corr = correlate.New(opts.Correlate, correlate.SinkFunc(g.event))
		g.forget()
	}
	g.fresh()
	fmt.Fprintf(stderr, "kwire: aggregating %s as group %s (%d partitions of %s)\n", opts.Source, opts.Group, parts, routed)

	var wg sync.WaitGroup
	var routeErr error
	wg.Add(1)
	// The router stops with the owner (idle, an error, or ctx done): it
	// would otherwise poll until ctx is done, and the instance wait for it.
	rctx, stopRoute := context.WithCancel(ctx)
	defer stopRoute()
	go func() { defer wg.Done(); routeErr = rs.run(rctx) }()
	runErr := g.consume(ctx, cl, opts.IdleExit, rs)
	stopRoute()
	// What this instance writes is decided by what it owns now: a
	// rebalance while it closes (another instance leaving) is not taken.
	g.mu.Lock()
	g.frozen = true
	g.mu.Unlock()
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		runErr = nil
	}
	wg.Wait()
	if errors.Is(routeErr, context.Canceled) {
		routeErr = nil
	}
	if g.hook.crashes() {
		cl.AllowRebalance()
		cl.Close()
		return nil
	}
	// The partitions' handover: claimed before the last lines are
	// written, given up (clean) once they are, and only then the group
	// left, so that the next owner finds what this one wrote.
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.claim(cctx, cl, true)
	g.ag.m.release(time.Now(), releaseAll)
	err = g.finish(stdout, rs)
	g.handOver(cctx, cl, g.final)
	cl.AllowRebalance() // a blocked rebalance would keep Close from leaving the group
	cl.Close()
	return errors.Join(runErr, routeErr, err)
}

func ownedList(m map[int32]bool) []int32 {
	var out []int32
	for q := range m {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// owns reports whether this instance writes the lines of key.
func (g *groupAgg) owns(key string) bool { return g.ownsPart(route.Shard(key, g.parts)) }

func (g *groupAgg) part(key string) int32 { return route.Shard(key, g.parts) }

func (g *groupAgg) ownsPart(q int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.owned[q]
}

// consume polls the routed topic until ctx is done (or idle for
// idleExit: see idle), as aggregator.consume does the agents' topic.
func (g *groupAgg) consume(ctx context.Context, cl *kgo.Client, idleExit time.Duration, rs *routeStage) error {
	ag := g.ag
	lastNew := time.Now()
	for ctx.Err() == nil {
		fetches, closed := poll(ctx, cl, g.ag.stderr, "consuming")
		if closed {
			return nil
		}
		now := time.Now()
		n := 0
		// A partition taken over is claimed before anything of it is
		// written: a successor then knows this instance may have.
		g.claim(ctx, cl, false)
		g.work.Lock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if ps := g.state(p.Partition); ps != nil {
				ps.hwm = p.HighWatermark
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			g.hook.count(hookConsumed)
			ps := g.state(r.Partition)
			if ps != nil {
				ps.offset = r.Offset + 1
			}
			rt, err := wire.DecodeRouted(r.Value)
			if err != nil {
				g.corrupt++
				return
			}
			g.add(r.Partition, ps, rt, now)
		})
		mode := releaseWatermark
		if n == 0 {
			mode = releaseCaughtUp
		}
		ag.m.release(now, mode)
		if n == 0 {
			g.caughtUp()
		}
		err := ag.out.Flush()
		metas, offs := g.records(false)
		g.work.Unlock()
		if err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		g.commit(ctx, cl, metas, offs, false)
		cl.AllowRebalance()
		if n == 0 {
			g.hook.idle("own")
		}
		if n > 0 {
			lastNew = now
		} else if idleExit > 0 && g.idle(now, lastNew, idleExit, rs) {
			return nil
		}
	}
	return ctx.Err()
}

// idle says whether an instance whose owner found nothing new since
// lastNew may stop (--exit-idle): as the single aggregator, once no agent
// is still sending (every agent's counters reach every owner) and nothing
// new came for idleExit; and once its router too is caught up (its last
// poll read nothing of the agents' topic, and what it routed before was
// acknowledged), for idleExit: what the agents published is then routed,
// and read by the owners. Each instance decides alone: one that stops
// first hands its partitions over (clean), and the others take them over
// and stop once idle again.
func (g *groupAgg) idle(now, lastNew time.Time, idleExit time.Duration, rs *routeStage) bool {
	routed, caughtUp := rs.lastActive()
	return caughtUp && now.Sub(lastNew) >= idleExit && now.Sub(routed) >= idleExit && !g.ag.m.sending(now)
}

// add merges routed record rt of partition q: each item once (but a
// whole copy of one merged as a tick, group_ticks.go), each receipt
// counted.
func (g *groupAgg) add(q int32, ps *partState, rt *wire.Routed, now time.Time) {
	m := g.ag.m
	defer m.guard(nil, 0)
	k := [2]int32{rt.SrcPartition, q}
	if last, ok := g.maxSrc[k]; ok && rt.SrcOffset <= last {
		g.redelivered++
		return
	}
	g.maxSrc[k] = rt.SrcOffset
	for _, rc := range rt.Receipts {
		if a := m.agent(rc.Agent, now); a != nil {
			m.receive(a, rc.Seq)
			a.heard = now
		}
	}
	for _, ri := range rt.Items {
		ref := itemRef{ri.Agent, ri.Seq, ri.Index}
		if !g.wanted(ps, ref, false) {
			continue
		}
		b, err := wire.Decode(ri.Batch, g.ag.decode)
		if err != nil || len(b.Items) != 1 || b.Agent != ri.Agent {
			g.corrupt++
			g.note(ref, mergedItem{whole: true})
			continue
		}
		if it := b.Items[0]; it.Kind == wire.KindAnomaly && it.Anomaly != nil {
			g.homes[it.Anomaly] = ri.Home
		}
		g.push(ps, ref, b, 0, false, now, map[*capture.Conn]bool{})
	}
	for i := range rt.Ticks {
		g.addTicks(ps, &rt.Ticks[i], now)
	}
}

// push merges item i of b, of ref, a tick or whole.
func (g *groupAgg) push(ps *partState, ref itemRef, b *wire.Batch, i int, tick bool, now time.Time, seen map[*capture.Conn]bool) {
	m := g.ag.m
	it := b.Items[i]
	key := m.mergeKey(&it)
	before, again := g.merged[ref]
	g.note(ref, mergedItem{key: key, whole: !tick || before.whole, ticked: before.ticked})
	if ps != nil {
		ps.readMax = maxTime(ps.readMax, key)
	}
	if k := passKey(&it); k != nil && (tick || again) {
		g.passing[k] = passing{ref, tick}
	}
	a := m.agent(ref.agent, now)
	if a == nil {
		return
	}
	a.heard, a.kwire = now, b.Kwire
	m.push(a, ref.seq, ref.index, it, seen)
	m.restarts(a)
}

// item passes one merged item on: as the single aggregator does, but an
// anomaly's line only from the owner of its home partition, and a tick
// to the correlator's Tick (group_ticks.go).
func (g *groupAgg) item(it *wire.Item, a *agentState) {
	afterTick := false
	if p, ok := g.passing[passKey(it)]; ok {
		delete(g.passing, passKey(it))
		if p.tick {
			g.tick(it, p.ref)
			return
		}
		afterTick = g.merged[p.ref].ticked
	}
	switch {
	case it.Kind == wire.KindExchange && it.Exchange != nil && afterTick:
		g.ag.exchange(it, a, g.ag.corr.ExchangeAfterTick)
		return
	case it.Kind != wire.KindAnomaly || it.Anomaly == nil:
		g.ag.item(it, a)
		return
	}
	home, ok := g.homes[it.Anomaly]
	delete(g.homes, it.Anomaly)
	if ok && home >= 0 {
		if ps := g.writer(home); ps != nil {
			ts, fp := g.fp.anomaly(it.Anomaly)
			if g.account(ps, g.pos(), ts, fp) {
				g.ag.out.Anomaly(it.Anomaly)
			}
		}
	}
	if !afterTick { // its loss was taken with its tick
		g.ag.corr.Anomaly(it.Anomaly)
	}
}

// event passes on the events of what this instance owns, through the
// coverage filter.
func (g *groupAgg) event(ev correlate.Event) {
	if g.ag.m.cover.filter(ev, g.emit) {
		g.emit(ev)
	}
}

// emit writes an event if this instance owns its partition and the
// partition's previous owner did not write it (account).
func (g *groupAgg) emit(ev correlate.Event) {
	ps := g.writer(g.eventPart(ev))
	if ps == nil {
		return
	}
	ts, fp := g.fp.event(ev)
	if g.account(ps, g.pos(), ts, fp) {
		g.ag.write(ev)
	}
}

// pos is the merge position of what is being correlated: the key of the
// item released (a partition taken over is correlated again from its
// start: its items' own positions), or the end once the input ended.
func (g *groupAgg) pos() time.Time {
	if !g.final.IsZero() {
		return g.final
	}
	return g.ag.m.cur
}

// writer returns the state of partition q if this instance writes its
// lines, else nil.
func (g *groupAgg) writer(q int32) *partState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.owned[q] {
		return nil
	}
	return g.ps[q]
}

// state returns the state of partition q if owned (under g.work).
func (g *groupAgg) state(q int32) *partState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ps[q]
}

// eventPart is the partition whose owner writes an event (route.EventKey;
// 0 for an event of no key).
func (g *groupAgg) eventPart(ev correlate.Event) int32 {
	if k, ok := route.EventKey(ev); ok {
		return g.part(k)
	}
	return 0
}
