package aggregate

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// How the owner stage takes partitions of the routed topic over and gives
// them up: the handover records of handover.go, committed
// as offset commit metadata of the owner group.

// fromStart starts every partition of topic assigned at its start: the
// owner correlates a partition's whole history (its committed offset only
// carries the handover record).
func fromStart(topic string) func(context.Context, map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	return func(_ context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
		for p := range m[topic] {
			m[topic][p] = kgo.NewOffset().AtStart()
		}
		return m, nil
	}
}

// fetched takes the partitions assigned, with the handover records their
// previous owners committed. Their lines are written from here on
// (OnOffsetsFetched runs before they are consumed).
func (g *groupAgg) fetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	g.work.Lock()
	defer g.work.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.frozen {
		return nil
	}
	take := func(topic string, q int32, meta *string) {
		if topic != g.routed {
			return
		}
		ps := &partState{}
		if meta != nil {
			if h, err := parseHandover(*meta); err == nil {
				ps.prev, ps.prevRaw, ps.unclean = h, *meta, !h.clean
				if h.clean {
					g.handovers++
				} else {
					g.uncleanHandovers++
				}
			}
		}
		g.ps[q], g.owned[q] = ps, true
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			take(t.Topic, p.Partition, p.Metadata)
		}
	}
	for _, gr := range resp.Groups {
		for _, t := range gr.Topics {
			for _, p := range t.Partitions {
				take(t.Topic, p.Partition, p.Metadata)
			}
		}
	}
	g.hook.set("own", ownedList(g.owned))
	return nil
}

// revoke gives partitions up: their lines are no longer written and, when
// revoked (not lost: the group moved on without this member, and a commit
// would be refused), what was written of them is flushed and committed as
// a clean handover record before the rebalance goes on.
func (g *groupAgg) revoke(ctx context.Context, cl *kgo.Client, qs []int32, revoked bool) {
	g.work.Lock()
	defer g.work.Unlock()
	g.mu.Lock()
	if g.frozen {
		// It still writes their last lines (the successor found its
		// unclean record, and counts), but commits no record over the
		// successor's.
		for _, q := range qs {
			g.gone[q] = true
		}
		g.mu.Unlock()
		return
	}
	metas, offs := map[int32]string{}, map[int32]int64{}
	for _, q := range qs {
		if ps := g.ps[q]; ps != nil && ps.claimed {
			metas[q], offs[q] = ps.record(ps.at(g.ag.m.released), true), ps.offset
		}
		delete(g.owned, q)
		delete(g.ps, q)
	}
	g.hook.set("own", ownedList(g.owned))
	g.mu.Unlock()
	defer g.fresh() // what it is given next is correlated from scratch
	if !revoked {
		return
	}
	if err := g.ag.out.Flush(); err != nil {
		g.commitErrors.Add(1) // not written: no record says it was
		return
	}
	g.commit(ctx, cl, metas, offs, true)
}

// claim commits an unclean record for every partition taken over and not
// yet claimed (all owned partitions when final: the last lines follow).
func (g *groupAgg) claim(ctx context.Context, cl *kgo.Client, final bool) {
	g.mu.Lock()
	metas, offs := map[int32]string{}, map[int32]int64{}
	for q, ps := range g.ps {
		if ps.claimed || (!final && !g.owned[q]) {
			continue
		}
		if ps.prev != nil {
			h, _ := parseHandover(ps.prevRaw)
			h.clean = false
			metas[q] = h.encode()
		} else {
			metas[q] = (&handover{lines: map[uint64]int{}}).encode()
		}
		offs[q] = ps.offset
		ps.claimed = true
	}
	g.mu.Unlock()
	g.commit(ctx, cl, metas, offs, true)
}

// records returns an unclean record for every owned partition with lines
// accounted since its last one (under g.work, after the output's flush).
func (g *groupAgg) records(clean bool) (map[int32]string, map[int32]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	metas, offs := map[int32]string{}, map[int32]int64{}
	for q, ps := range g.ps {
		if !ps.claimed || !(ps.dirty || clean) {
			continue
		}
		ps.dirty = false
		metas[q], offs[q] = ps.record(ps.at(g.ag.m.released), clean), ps.offset
	}
	return metas, offs
}

// caughtUp ends the counting of possible duplicates of partitions taken
// over from an unclean record once everything they held when taken over
// was correlated (under g.work).
func (g *groupAgg) caughtUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ps := range g.ps {
		if ps.unclean && ps.offset >= ps.hwm {
			ps.unclean = false
		}
	}
}

// handOver commits a clean record of every partition still owned, once
// its last lines are written (at position end), but of those the group
// gave to another member meanwhile.
func (g *groupAgg) handOver(ctx context.Context, cl *kgo.Client, end time.Time) {
	g.mu.Lock()
	metas, offs := map[int32]string{}, map[int32]int64{}
	for q, ps := range g.ps {
		if ps.claimed && !g.gone[q] {
			metas[q], offs[q] = ps.record(end, true), ps.offset
		}
	}
	g.mu.Unlock()
	g.commit(ctx, cl, metas, offs, true)
}

var errNothingToCommit = errors.New("no partition of the commit is owned")

// commit commits records (offsets offs) of partitions of the routed topic.
// Only partitions still in g.ps when the commit is issued are kept (kgo
// orders commits: a record built before a revoke never overwrites the
// revoke's), but for sync commits (revoke, claim, the last one), built for
// exactly what they name.
func (g *groupAgg) commit(ctx context.Context, cl *kgo.Client, metas map[int32]string, offs map[int32]int64, sync bool) {
	if len(metas) == 0 || (!sync && g.hook.skipsPeriodic()) {
		return
	}
	m := map[string]map[int32]kgo.EpochOffset{g.routed: {}}
	for q := range metas {
		m[g.routed][q] = kgo.EpochOffset{Epoch: -1, Offset: offs[q]}
	}
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		n := 0
		for i := range req.Topics {
			t := &req.Topics[i]
			keep := t.Partitions[:0]
			for _, p := range t.Partitions {
				meta, ok := metas[p.Partition]
				if t.Topic != g.routed || !ok || (!sync && (g.ps[p.Partition] == nil || g.frozen)) {
					continue
				}
				p.Metadata = &meta
				keep = append(keep, p)
			}
			t.Partitions = keep
			n += len(keep)
		}
		if n == 0 {
			return errNothingToCommit
		}
		return nil
	})
	done := func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			if !errors.Is(err, errNothingToCommit) {
				g.commitErrors.Add(1)
			}
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					g.commitErrors.Add(1)
				}
			}
		}
	}
	if sync {
		cl.CommitOffsetsSync(ctx, m, done)
	} else {
		cl.CommitOffsets(ctx, m, done)
	}
}
