//go:build linux

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// group is a consumer group scenario: a producer and members started and
// stopped one at a time, each member committing what it consumed.
type group struct {
	watched
	t        *testing.T
	kf       *kfake.Cluster
	name     string
	topic    string
	parts    int32
	prod     *kgo.Client
	produced map[int32]int64           // partition -> next offset
	consumed map[int32]int64           // partition -> next offset consumed
	commit   map[int32]int64           // partition -> highest committed
	assigned map[string]map[int32]bool // member -> partitions held
	members  map[string]context.CancelFunc
	stopped  map[string]chan struct{}
	// memberOpts, when set, gives each kgo member's extra options.
	memberOpts func() []kgo.Opt
}

func newGroup(t *testing.T, kf *kfake.Cluster, name, topic string, parts int32) *group {
	g := &group{t: t, kf: kf, name: name, topic: topic, parts: parts,
		produced: map[int32]int64{}, consumed: map[int32]int64{}, commit: map[int32]int64{},
		assigned: map[string]map[int32]bool{}, members: map[string]context.CancelFunc{}, stopped: map[string]chan struct{}{}}
	g.init()
	g.prod = newClient(t, kf, kgo.ClientID("producer"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	t.Cleanup(g.prod.Close)
	return g
}

// produce writes n records to every partition.
func (g *group) produce(n int) {
	g.t.Helper()
	var rs []*kgo.Record
	for p := range g.parts {
		for i := range n {
			rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "record %d of partition %d", i, p)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := g.prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		g.t.Fatalf("produce: %v", err)
	}
	g.update(func() {
		for p := range g.parts {
			g.produced[p] += int64(n)
		}
	})
}

// join starts member id consuming and committing.
func (g *group) join(id string) {
	g.t.Helper()
	hold := func(f func(map[int32]bool, int32)) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			g.update(func() {
				if g.assigned[id] == nil {
					g.assigned[id] = map[int32]bool{}
				}
				for _, p := range m[g.topic] {
					f(g.assigned[id], p)
				}
			})
		}
	}
	add := func(s map[int32]bool, p int32) { s[p] = true }
	del := func(s map[int32]bool, p int32) { delete(s, p) }
	opts := []kgo.Opt{kgo.ClientID(id), kgo.ConsumerGroup(g.name), kgo.ConsumeTopics(g.topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(hold(add)), kgo.OnPartitionsRevoked(hold(del)), kgo.OnPartitionsLost(hold(del))}
	if g.memberOpts != nil {
		opts = append(opts, g.memberOpts()...)
	}
	cl := newClient(g.t, g.kf, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.members[id], g.stopped[id] = cancel, done
	go func() {
		defer close(done)
		defer cl.Close() // leaves the group
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			g.update(func() {
				fs.EachRecord(func(r *kgo.Record) { g.consumed[r.Partition] = max(g.consumed[r.Partition], r.Offset+1) })
			})
			if err := cl.CommitUncommittedOffsets(ctx); err == nil {
				g.update(func() {
					for p, eo := range cl.CommittedOffsets()[g.topic] {
						g.commit[p] = max(g.commit[p], eo.Offset)
					}
				})
			}
		}
	}()
	g.t.Cleanup(func() { g.leave(id) })
}

// leave stops member id; its client leaves the group.
func (g *group) leave(id string) {
	cancel, ok := g.members[id]
	if !ok {
		return
	}
	delete(g.members, id)
	cancel()
	<-g.stopped[id]
	g.update(func() { delete(g.assigned, id) })
}

// settled waits until the live members hold every partition, each of them
// some, and everything produced was consumed and committed.
func (g *group) settled(what string) {
	g.t.Helper()
	g.wait(g.t, what, func() bool {
		held := map[int32]bool{}
		for id := range g.members {
			if len(g.assigned[id]) == 0 {
				return false
			}
			for p := range g.assigned[id] {
				held[p] = true
			}
		}
		for p := range g.parts {
			if !held[p] || g.consumed[p] != g.produced[p] || g.commit[p] != g.produced[p] {
				return false
			}
		}
		return true
	})
}
