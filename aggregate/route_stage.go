package aggregate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/aggregate/wire"
)

// routeStage runs the router of one instance: a member of consumer group
// NAME.route over the agents' topic, producing to the routed topic.
//
// Delivery is at least once: a poll's routed records are all acknowledged
// before its offsets are committed, and a rebalance waits for that
// (BlockRebalanceOnPoll). A router taking over a partition reads it again
// from its start, routing without producing up to the committed offset:
// the bindings and buffers are then those the previous owner had, and
// what it sends from there the same. Routed records sent twice (a router
// that stopped between producing and committing) are dropped by the owner
// stage: each carries the agents' record it was routed for.
type routeStage struct {
	opts          []kgo.Opt
	topic, routed string
	group         string
	parts         int32
	hook          *Hook
	stderr        io.Writer
	verify        *verifier     // the agents' records, before they are routed
	newer         *newerFormats // the agents' records of a newer format
	decode        *wire.Options // record segments kept as read (Encoder.Item)

	mu      sync.Mutex
	routers map[int32]*router // one per partition of the agents' topic owned
	marks   map[int32]int64   // committed offsets: below, replay only

	read, replayed, produced, corrupt atomic.Int64
	panics                            atomic.Int64 // records whose routing panicked
	// active is the wall time (Unix ns) of the router's latest poll that
	// read records, idle whether its latest poll read none (lastActive).
	active atomic.Int64
	idle   atomic.Bool
}

// lastActive returns when the router last read records of the agents'
// topic, and whether its latest poll (done, what it routed acknowledged)
// read none: caught up.
func (rs *routeStage) lastActive() (time.Time, bool) {
	return time.Unix(0, rs.active.Load()), rs.idle.Load()
}

func (rs *routeStage) run(ctx context.Context) error {
	rs.routers, rs.marks = map[int32]*router{}, map[int32]int64{}
	rs.active.Store(time.Now().UnixNano())
	cl, err := kgo.NewClient(append(slices.Clone(rs.opts), kgo.ConsumeTopics(rs.topic), kgo.ConsumerGroup(rs.group),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AdjustFetchOffsetsFn(rs.adjust),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { rs.drop(m[rs.topic]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { rs.drop(m[rs.topic]) }),
		kgo.DefaultProduceTopic(rs.routed), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20),
	)...)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer cl.Close()
	defer cl.AllowRebalance() // a blocked rebalance would keep Close from leaving the group
	for ctx.Err() == nil {
		fetches, closed := poll(ctx, cl, rs.stderr, "routing")
		if closed {
			return nil
		}
		var failed atomic.Pointer[error]
		rs.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) { rs.record(ctx, cl, r, &failed) })
		rs.mu.Unlock()
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		if e := failed.Load(); e != nil {
			return fmt.Errorf("routing to %s: %w", rs.routed, *e)
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(rs.stderr, "kwire: routing: commit: %v\n", err)
		}
		if fetches.NumRecords() > 0 {
			rs.active.Store(time.Now().UnixNano())
		}
		rs.idle.Store(fetches.NumRecords() == 0)
		cl.AllowRebalance()
	}
	return ctx.Err()
}

// record routes one record of the agents' topic. A panic routing it
// counts it corrupt and is said on stderr: the router goes on (every
// instance would stop on the record, again after every restart).
func (rs *routeStage) record(ctx context.Context, cl *kgo.Client, r *kgo.Record, failed *atomic.Pointer[error]) {
	defer func() {
		if v := recover(); v != nil {
			rs.corrupt.Add(1)
			if n := rs.panics.Add(1); n&(n-1) == 0 {
				fmt.Fprintf(rs.stderr, "kwire: routing: record %d of %s[%d]: panic: %v: counted corrupt and skipped (%d so far); please report it, with the record if you can\n",
					r.Offset, rs.topic, r.Partition, v, n)
			}
		}
	}()
	rt := rs.routers[r.Partition]
	if rt == nil {
		rt = newRouter(rs.parts)
		rs.routers[r.Partition] = rt
	}
	replay := r.Offset < rs.marks[r.Partition]
	if !rs.verify.ok(r.Value, replay) {
		return
	}
	b, err := wire.Decode(r.Value, rs.decode)
	if err != nil {
		if !rs.newer.note(err, replay) && !replay {
			rs.corrupt.Add(1)
		}
		return
	}
	out := rt.route(b, r.Partition, r.Offset)
	if replay {
		rs.replayed.Add(1)
		return
	}
	rs.read.Add(1)
	rs.hook.count(hookRead)
	for _, q := range sortedParts(out) {
		rec := &kgo.Record{Partition: q, Value: wire.AppendRouted(nil, out[q])}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			rs.produced.Add(1)
			rs.hook.count(hookProduced)
		})
	}
}

func sortedParts(m map[int32]*wire.Routed) []int32 {
	out := make([]int32, 0, len(m))
	for q, r := range m {
		if len(r.Items) > 0 || len(r.Receipts) > 0 || len(r.Ticks) > 0 {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// adjust starts every partition taken over at its start, remembering the
// committed offset up to which it is only replayed.
func (rs *routeStage) adjust(_ context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for p, o := range m[rs.topic] {
		rs.marks[p] = max(o.EpochOffset().Offset, 0)
		rs.routers[p] = newRouter(rs.parts)
		m[rs.topic][p] = kgo.NewOffset().AtStart()
	}
	var owned []int32
	for p := range rs.routers {
		owned = append(owned, p)
	}
	slices.Sort(owned)
	rs.hook.set("route", owned)
	return m, nil
}

// drop forgets the routing state of partitions revoked or lost.
func (rs *routeStage) drop(ps []int32) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, p := range ps {
		delete(rs.routers, p)
		delete(rs.marks, p)
	}
	var owned []int32
	for p := range rs.routers {
		owned = append(owned, p)
	}
	slices.Sort(owned)
	rs.hook.set("route", owned)
}

// ensureRouted creates the routed topic (as many partitions as the agents'
// topic) unless it exists, and returns its partition count.
func ensureRouted(ctx context.Context, opts []kgo.Opt, topic, routed string) (int32, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, fmt.Errorf("--from: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := topicPartitions(ctx, cl, topic)
	if err != nil {
		return 0, fmt.Errorf("--from: topic %s: %w", topic, err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = routed, n, -1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", routed, err)
	}
	if len(resp.Topics) == 1 {
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("creating %s (or create it with as many partitions as %s): %w", routed, topic, err)
		}
	}
	for {
		n, err := topicPartitions(ctx, cl, routed)
		if err == nil {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("topic %s: %w", routed, err)
		case <-time.After(100 * time.Millisecond): // metadata catching up with the creation
		}
	}
}

// topicPartitions asks the cluster how many partitions topic has.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 {
		return 0, fmt.Errorf("no metadata")
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return 0, err
	}
	if len(resp.Topics[0].Partitions) == 0 {
		return 0, fmt.Errorf("no partitions")
	}
	return int32(len(resp.Topics[0].Partitions)), nil
}
