package gen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var hNonOwnerCommit = Scenario{
	Name: "h_non_owner_commit",
	Doc: "hnoc-group's member reads and commits all 100 records of hnoc-orders (1 partition); an admin client " +
		"(hnoc-admin, no membership) commits offset 10 with generation -1 and an empty member id: refused " +
		"(UNKNOWN_MEMBER_ID) while the member is in the group; the member leaves, the same commit is accepted on " +
		"the empty group, moving the committed offset back from 100 to 10 (a commit_regression caused by the non-owner " +
		"commit), and the next member resumes at 10 and reads 10..99 again",
	Options: oneTopic("hnoc-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hnoc-orders", "hnoc-group"
		if err := produceN(ctx, c, "hnoc-producer", topic, 0, 100); err != nil {
			return err
		}
		m1, err := startGMember(ctx, c, GMemberArgs{ClientID: "hnoc-member-1", Group: group, Topics: []string{topic}})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		admin, err := c.Kgo(kgo.ClientID("hnoc-admin"))
		if err != nil {
			return err
		}
		defer admin.Close()
		id1, gen1 := m1.cl.GroupMetadata()
		before := c.committedNow(group, topic, 0)
		code, err := c.rawCommit(ctx, admin, group, "", -1, topic, 0, 10)
		if err != nil {
			return err
		}
		if code != 25 {
			return fmt.Errorf("admin commit on a live group: error code %d, want 25 (UNKNOWN_MEMBER_ID)", code)
		}
		c.AddHazard(Hazard{Kind: "commit_rejected", Group: group, Topic: topic, Partition: i32(0), ClientID: "hnoc-admin", Generation: i32(-1),
			Numbers: map[string]int64{"offset": 10, "error_code": 25, "committed": before, "current_generation": int64(gen1)},
			Note:    "admin commit (generation -1, empty member id) refused while " + id1 + " is in the group"})
		sleepCtx(ctx, 300*time.Millisecond)
		m1.leave()
		if err := waitFor(ctx, "empty group", func() bool { gi := c.kf.GroupInfo(group); return gi != nil && gi.State == "Empty" }); err != nil {
			return err
		}
		if code, err = c.rawCommit(ctx, admin, group, "", -1, topic, 0, 10); err != nil || code != 0 {
			return fmt.Errorf("admin commit on the empty group: code %d, %v", code, err)
		}
		sleepCtx(ctx, 300*time.Millisecond)
		since := time.Now()
		m2, err := startGMember(ctx, c, GMemberArgs{ClientID: "hnoc-member-2", Group: group, Topics: []string{topic}})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		read := c.fetchedBy(group, "hnoc-member-2", topic, 0, since)
		c.AddHazard(Hazard{Kind: "non_owner_commit", Group: group, Topic: topic, Partition: i32(0), ClientID: "hnoc-admin", Generation: i32(-1),
			Numbers: map[string]int64{"offset": 10, "previous": before, "error_code": 0, "next_owner_resumed_at": 10, "next_owner_fetched_records": read},
			Note:    "admin commit (generation -1, empty member id) accepted on the empty group: the next owner replays 10..99"})
		if before > 10 {
			c.AddHazard(Hazard{Kind: "commit_regression", Group: group, Topic: topic, Partition: i32(0), ClientID: "hnoc-admin", Generation: i32(-1),
				Numbers: map[string]int64{"committed": 10, "previous": before}, Cause: "non_owner_commit",
				Note: fmt.Sprintf("the accepted admin commit moved the committed offset back from %d (the broker's, before it) to 10", before)})
		}
		m2.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hCommitOnReceive = Scenario{
	Name: "h_commit_on_receive",
	Doc: "hcor-group's member polls hcor-orders (1 partition) and hands records to a worker goroutine that takes " +
		"15ms per record, while kgo autocommits every 200ms what was polled; a producer writes 200 records/s for " +
		"about 4s: every autocommit covers records delivered moments before and not yet processed",
	Options: oneTopic("hcor-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hcor-orders", "hcor-group"
		var (
			mu        sync.Mutex
			processed int64 = -1 // highest offset the worker finished
			commits   int64
			ahead     int64 // autocommits covering unprocessed records
			maxAhead  int64
		)
		work := make(chan *kgo.Record, 10000)
		wctx, stopWork := context.WithCancel(ctx)
		defer stopWork()
		go func() {
			for {
				select {
				case r := <-work:
					sleepCtx(wctx, 15*time.Millisecond)
					mu.Lock()
					processed = r.Offset
					mu.Unlock()
				case <-wctx.Done():
					return
				}
			}
		}()
		onCommit := func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil || len(resp.Topics) == 0 {
				return
			}
			for i, t := range req.Topics {
				for j, p := range t.Partitions {
					if resp.Topics[i].Partitions[j].ErrorCode != 0 {
						continue
					}
					mu.Lock()
					commits++
					if n := p.Offset - (processed + 1); n > 0 {
						ahead++
						maxAhead = max(maxAhead, n)
					}
					mu.Unlock()
				}
			}
		}
		prod, err := startProducer(ctx, c, "hcor-producer", topic, 20, 60, 100*time.Millisecond)
		if err != nil {
			return err
		}
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "hcor-member", Group: group, Topics: []string{topic}, Commit: "auto",
			AutoCommitMillis: 200, Extra: []kgo.Opt{kgo.AutoCommitCallback(onCommit)},
			OnRecords: func(rs []*kgo.Record) {
				for _, r := range rs {
					work <- r
				}
			}})
		if err != nil {
			return err
		}
		if err := m.waitAssigned(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, 4*time.Second)
		if err := prod.halt(); err != nil {
			return err
		}
		id, gen := m.cl.GroupMetadata()
		mu.Lock()
		nums := map[string]int64{"auto_commit_interval_ms": 200, "commits": commits, "commits_ahead_of_processing": ahead,
			"max_unprocessed_committed": maxAhead}
		mu.Unlock()
		if ahead == 0 {
			return fmt.Errorf("no autocommit ran ahead of processing (%v): %w", nums, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "commit_on_receive", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hcor-member",
			Generation: i32(gen), Numbers: nums,
			Note: "kgo autocommit commits what was polled; the worker lags, so commits cover records not processed yet (lost on a crash)"})
		m.leave()
		stopWork()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
	Attempts: 2,
}
