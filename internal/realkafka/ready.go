package realkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadyGroup is the throwaway group WaitReady looks up: it has no members
// and never joins, so it is easy to tell apart in a capture.
const ReadyGroup = "realkafka-ready"

// WaitReady waits until every running node is a registered, unfenced broker
// in the cluster's metadata, __consumer_offsets exists with a leader for
// each partition, and ReadyGroup's coordinator answers an OffsetFetch (so
// its partition is loaded). The first FindCoordinator is what makes the
// brokers create __consumer_offsets. Its client's traffic crosses the
// relays like any other.
func (c *Cluster) WaitReady(ctx context.Context) error {
	want := 0
	for _, n := range c.nodes {
		if n.running() {
			want++
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("realkafka-ready"),
		kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("realkafka: ready client: %w", err)
	}
	defer cl.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = c.ready(ctx, cl, want); last == nil {
			return nil
		}
		for _, n := range c.nodes {
			if n.exited() {
				return fmt.Errorf("realkafka: node %d exited while starting (see %s): %w", n.id, n.logPath(), last)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realkafka: cluster not ready (logs in %s): %w (last: %v)", c.opts.Dir, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// ready is one round of WaitReady's checks.
func (c *Cluster) ready(ctx context.Context, cl *kgo.Client, want int) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("__consumer_offsets")
	meta.Topics = append(meta.Topics, t)
	mr, err := meta.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(mr.Brokers) < want {
		return fmt.Errorf("metadata: %d brokers, want %d", len(mr.Brokers), want)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = ReadyGroup
	fc.CoordinatorKeys = []string{ReadyGroup}
	fr, err := fc.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	code := fr.ErrorCode
	if len(fr.Coordinators) > 0 {
		code = fr.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	if len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != 0 || len(mr.Topics[0].Partitions) == 0 {
		return fmt.Errorf("__consumer_offsets not in metadata yet")
	}
	for _, p := range mr.Topics[0].Partitions {
		if p.Leader < 0 {
			return fmt.Errorf("__consumer_offsets partition %d has no leader", p.Partition)
		}
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = ReadyGroup
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = ReadyGroup
	of.Groups = append(of.Groups, g)
	or, err := of.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("offset fetch: %w", err)
	}
	code = or.ErrorCode
	if len(or.Groups) > 0 {
		code = or.Groups[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("offset fetch: %w", err)
	}
	return nil
}
