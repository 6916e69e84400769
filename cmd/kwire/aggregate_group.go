package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/wire"
	"github.com/kwire/kwire/jsonout"
)

// kwire aggregate --group NAME: several instances split the work
// (docs/aggregate.md, "Several aggregators"). Each instance runs two
// stages, each a member of a Kafka consumer group:
//
//   - the router (consumer group NAME.route over the agents' topic,
//     aggregate_route.go) sends every item to the partitions of the routed
//     topic TOPIC.NAME whose owners need it;
//   - the owner (consumer group NAME over TOPIC.NAME) merges and
//     correlates what its partitions hold, and writes the lines of the
//     keys (groups, clients, hosts, agents) its partitions own.

// groupMerged caps the routed items remembered to merge each once (an
// item sent to two partitions of one owner comes twice).
const groupMerged = 1 << 20

// groupAgg is one instance's owner stage.
type groupAgg struct {
	ag     *aggregator
	parts  int32
	name   string
	hook   *groupHook
	mu     sync.Mutex
	owned  map[int32]bool
	frozen bool
	maxSrc map[[2]int32]int64 // (agents' topic partition, routed partition): the latest offset read
	merged map[itemRef]bool
	order  []itemRef
	homes  map[*decode.Anomaly]int32
	// redelivered counts routed records read again (a router took a
	// partition over); corrupt those that do not decode.
	redelivered, corrupt int64
}

type itemRef struct {
	agent wire.Agent
	seq   uint64
	index int
}

var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// runAggregateGroup is kwire aggregate --group.
func runAggregateGroup(ctx context.Context, f *aggregateFlags, stdout, stderr io.Writer) error {
	opts, topic, err := f.from.options()
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	routed := topic + "." + f.group
	if !topicName.MatchString(routed) {
		return fmt.Errorf("--group %q: the routed topic %q is not a legal Kafka topic name: use letters, digits, '.', '_' and '-'", f.group, routed)
	}
	parts, err := ensureRouted(ctx, opts, topic, routed)
	if err != nil {
		return err
	}
	g := &groupAgg{parts: parts, name: f.group, hook: f.hook, owned: map[int32]bool{}, maxSrc: map[[2]int32]int64{},
		merged: map[itemRef]bool{}, homes: map[*decode.Anomaly]int32{}}
	rs := &routeStage{opts: opts, topic: topic, routed: routed, group: f.group + ".route", parts: parts, hook: f.hook, stderr: stderr}
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumeTopics(routed), kgo.ConsumerGroup(f.group),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.assign(ctx, m[routed], true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.assign(ctx, m[routed], false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { g.assign(ctx, m[routed], false) }),
	)...)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	p := newPipeline(&f.common, stdout, false)
	p.out = jsonout.New(stdout, &jsonout.Options{Text: p.text, LineFlush: true})
	g.ag = &aggregator{p: p}
	g.ag.m = newMerger(f.maxLateness, f.quietAfter, g.item)
	g.ag.m.maxSkew = f.maxSkew
	co := f.common.limits.correlate()
	co.ConsumerSessionTimeout = f.common.consumerSession
	co.Hazards.FetchGrace = 2*time.Second + 2*f.maxSkew
	p.corr = correlate.New(co, correlate.SinkFunc(g.event))
	fmt.Fprintf(stderr, "kwire: aggregating %s as group %s (%d partitions of %s)\n", f.from.url, f.group, parts, routed)

	var wg sync.WaitGroup
	var routeErr error
	wg.Add(1)
	go func() { defer wg.Done(); routeErr = rs.run(ctx) }()
	runErr := g.consume(ctx, cl, f.idleExit)
	// What this instance writes is decided by what it owns now: a
	// rebalance while it closes (another instance leaving) is not taken.
	g.mu.Lock()
	g.frozen = true
	g.mu.Unlock()
	cl.Close()
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		runErr = nil
	}
	wg.Wait()
	if errors.Is(routeErr, context.Canceled) {
		routeErr = nil
	}
	g.ag.m.release(time.Now(), releaseAll)
	return errors.Join(runErr, routeErr, g.finish(stdout, rs))
}

// assign notes partitions of the routed topic gained or lost.
func (g *groupAgg) assign(ctx context.Context, ps []int32, gained bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.frozen || ctx.Err() != nil {
		return
	}
	for _, q := range ps {
		if gained {
			g.owned[q] = true
		} else {
			delete(g.owned, q)
		}
	}
	g.hook.set("own", ownedList(g.owned))
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
func (g *groupAgg) owns(key string) bool { return g.ownsPart(routeHash(key, g.parts)) }

func (g *groupAgg) ownsPart(q int32) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.owned[q]
}

// consume polls the routed topic until ctx is done (or idle for
// idleExit), as aggregator.consume does the agents' topic.
func (g *groupAgg) consume(ctx context.Context, cl *kgo.Client, idleExit time.Duration) error {
	ag := g.ag
	lastNew := time.Now()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		now := time.Now()
		n := 0
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "kwire: consuming %s[%d]: %v\n", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			g.hook.count(hookConsumed)
			rt, err := wire.DecodeRouted(r.Value)
			if err != nil {
				g.corrupt++
				return
			}
			g.add(r.Partition, rt, now)
		})
		mode := releaseWatermark
		if n == 0 {
			mode = releaseCaughtUp
		}
		ag.m.release(now, mode)
		if n == 0 {
			g.hook.idle("own")
		}
		if n > 0 {
			lastNew = now
		} else if idleExit > 0 && now.Sub(lastNew) >= idleExit {
			return nil
		}
		if err := ag.p.out.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return ctx.Err()
}

// add merges routed record rt of partition q: each item once, each
// receipt counted.
func (g *groupAgg) add(q int32, rt *wire.Routed, now time.Time) {
	m := g.ag.m
	k := [2]int32{rt.SrcPartition, q}
	if last, ok := g.maxSrc[k]; ok && rt.SrcOffset <= last {
		g.redelivered++
		return
	}
	g.maxSrc[k] = rt.SrcOffset
	for _, rc := range rt.Receipts {
		a := m.agent(rc.Agent)
		m.receive(a, rc.Seq)
		a.heard = now
	}
	for _, ri := range rt.Items {
		ref := itemRef{ri.Agent, ri.Seq, ri.Index}
		if g.merged[ref] {
			continue
		}
		if len(g.order) >= groupMerged {
			delete(g.merged, g.order[0])
			g.order = g.order[1:]
		}
		g.merged[ref] = true
		g.order = append(g.order, ref)
		b, err := wire.Decode(ri.Batch, nil)
		if err != nil || len(b.Items) != 1 || b.Agent != ri.Agent {
			g.corrupt++
			continue
		}
		it := b.Items[0]
		if it.Kind == wire.KindAnomaly && it.Anomaly != nil {
			g.homes[it.Anomaly] = ri.Home
		}
		a := m.agent(ri.Agent)
		a.heard = now
		m.push(a, ri.Seq, ri.Index, it, map[*capture.Conn]bool{})
		m.restarts(a)
	}
}

// item passes one merged item on: as the single aggregator does, but an
// anomaly's line only from the owner of its home partition.
func (g *groupAgg) item(it *wire.Item, a *agentState) {
	if it.Kind != wire.KindAnomaly || it.Anomaly == nil {
		g.ag.item(it, a)
		return
	}
	home, ok := g.homes[it.Anomaly]
	delete(g.homes, it.Anomaly)
	if ok && home >= 0 && g.ownsPart(home) {
		g.ag.p.out.Anomaly(it.Anomaly)
	}
	g.ag.p.corr.Anomaly(it.Anomaly)
}

// event passes on the events of what this instance owns, through the
// coverage filter.
func (g *groupAgg) event(ev correlate.Event) {
	if g.ag.m.cover.filter(ev, g.emit) {
		g.emit(ev)
	}
}

func (g *groupAgg) emit(ev correlate.Event) {
	if g.ownsEvent(ev) {
		g.ag.p.event(ev)
	}
}

// ownsEvent: an event of a group belongs to the group's owner; a hazard of
// a client (producer_acks_weak) to the client's, of a host
// (client_id_churn) to the host's.
func (g *groupAgg) ownsEvent(ev correlate.Event) bool {
	switch ev := ev.(type) {
	case *correlate.GenerationEvent:
		return g.owns(groupRouteKey(ev.Group))
	case *correlate.MemberEvent:
		return g.owns(groupRouteKey(ev.Group))
	case *correlate.CommitEvent:
		return g.owns(groupRouteKey(ev.Group))
	case *correlate.CoordinatorEvent:
		return g.owns(groupRouteKey(ev.Group))
	case *correlate.HazardEvent:
		return g.owns(hazardRouteKey(ev))
	}
	return g.ownsPart(0)
}

func hazardRouteKey(h *correlate.HazardEvent) string {
	switch {
	case h.Group != "":
		return groupRouteKey(h.Group)
	case h.Kind == correlate.HazardClientIDChurn:
		return hostRouteKey(h.ClientHost)
	}
	return clientRouteKey(clientOf(h.ClientHost, h.ClientID))
}
