package gen

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Share group members that stop or die (issue 31): one silence is one
// finding, and records go back to the queue for the reason the broker had.
func init() {
	for _, s := range []Scenario{hShareStopped, hShareKilledHeld} {
		Register(s)
	}
}

var hShareStopped = Scenario{
	Name: "h_share_stopped",
	Doc: "a share group hst-group (broker share session timeout 6s, heartbeat interval 500ms) on hst-orders (2 " +
		"partitions): hst-member-1 in process and hst-member-2 in a child share the partitions; member 2 is " +
		"SIGSTOPped for 10s: the broker fences it after 6s and member 1 gets both partitions; member 2, resumed, " +
		"is answered FENCED_MEMBER_EPOCH and rejoins with its member id; both read 20 more records, then member 2 " +
		"is terminated (it leaves)",
	Options:  shareOpts("hst-orders", 2, map[string]string{"group.share.session.timeout.ms": "6000"}),
	Timeout:  75 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hst-orders", "hst-group"
		duo, err := startShareDuo(ctx, c, "hst", topic, group)
		if err != nil {
			return err
		}
		m1, n, done, wg, ch, id2, epoch := duo.m1, &duo.n, duo.done, &duo.wg, duo.ch, duo.id2, duo.epoch
		stopped := time.Now()
		if err := ch.Stop(); err != nil {
			return err
		}
		err = waitFor(ctx, "hst-member-1 to own both partitions", func() bool { return c.shareOwnsAll(group, "hst-member-1", 2, stopped) })
		if err != nil {
			return err
		}
		took := time.Since(stopped)
		sleepCtx(ctx, 10*time.Second-took)
		if err := ch.Cont(); err != nil {
			return err
		}
		resumed := time.Now()
		if err := waitFor(ctx, "hst-member-2 to rejoin", func() bool { return c.shareOwnsAny(group, "hst-member-2", resumed) }); err != nil {
			return err
		}
		before := n.Load()
		if err := produceN(ctx, c, "hst-producer", topic, 1000, 20); err != nil {
			return err
		}
		// Member 2 reads some of them too; member 1's count is enough to
		// know they were delivered.
		_ = waitFor(ctx, "hst-member-1 to read new records", func() bool { return n.Load() > before })
		sleepCtx(ctx, 2*time.Second)
		if err := ch.Terminate(ctx); err != nil {
			c.Note("h_share_stopped: hst-member-2 exit: %v", err)
		}
		close(done)
		wg.Wait()
		if err := shareDone(ctx, m1); err != nil {
			return err
		}
		c.Note("h_share_stopped: hst-member-2 (member %s, epoch %d) SIGSTOPped for 10s; hst-member-1 owned both partitions %v later",
			id2, epoch, took.Round(time.Millisecond))
		if took < 5*time.Second {
			return fmt.Errorf("member 1 got member 2's partition %v after the stop, before the 6s session timeout: %w", took, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id2, ClientID: "hst-member-2", Reason: ReasonSessionTimeout,
			Note: "SIGSTOPped 10s: no heartbeat; kfake fenced it at the share session timeout (6s, not on the wire); resumed, it " +
				"rejoined with the same member id: the silence is this one finding, not also a heartbeat_late"})
		return c.RecordEndOffsets(ctx, topic)
	},
}

// shareOwnsAny reports whether a ShareGroupHeartbeat answer to client after
// since assigned it a partition.
func (c *Cluster) shareOwnsAny(group, client string, since time.Time) bool {
	for p := 1; p <= 2; p++ {
		if c.shareOwnsAll(group, client, p, since) {
			return true
		}
	}
	return false
}

var hShareKilledHeld = Scenario{
	Name: "h_share_killed_held",
	Doc: "a share group hsk-group (broker acquisition lock 15s, share session timeout 6s) on hsk-orders (1 " +
		"partition, 20 records): hsk-holder, a share consumer in a child, acquires records and is SIGKILLed before " +
		"it acknowledges any: its connections close and the broker releases them at once, long before their lock " +
		"would run out; hsk-consumer acquires them again (delivery count 2) and accepts them; the broker fences " +
		"hsk-holder at its session timeout",
	Options: shareOpts("hsk-orders", 1, map[string]string{
		"group.share.record.lock.duration.ms": "15000",
		"group.share.session.timeout.ms":      "6000",
	}),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hsk-orders", "hsk-group"
		if err := c.shareEarliest(ctx, group); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsk-producer", topic, 0, 20); err != nil {
			return err
		}
		ch, err := startShareChild(ctx, c, ShareMemberArgs{ClientID: "hsk-holder", Group: group, Topics: []string{topic}, Hold: true})
		if err != nil {
			return err
		}
		holder, _ := c.shareMemberOf(group, "hsk-holder")
		killed := time.Now()
		if err := ch.Kill(); err != nil {
			return err
		}
		_ = ch.Wait(ctx)
		cl, err := shareClient(c, "hsk-consumer", group, topic)
		if err != nil {
			return err
		}
		var n atomic.Int64
		done := make(chan struct{})
		go func() {
			_ = waitFor(ctx, "hsk-consumer to read every record", func() bool { return n.Load() >= 20 })
			close(done)
		}()
		consumeShare(ctx, cl, &n, done)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var held *shareAcquisition
		var again []shareAcquisition
		for _, a := range c.shareAcquisitions(group) {
			if a.clientID == "hsk-holder" && held == nil {
				held = &a
			}
			if a.clientID == "hsk-consumer" && a.deliveryCount > 1 {
				again = append(again, a)
			}
		}
		switch {
		case held == nil:
			return fmt.Errorf("hsk-holder acquired nothing on the tap: %w", ErrRetry)
		case len(again) == 0:
			return fmt.Errorf("hsk-consumer got no record again: %w", ErrRetry)
		case again[0].at.Sub(held.at) >= time.Duration(held.lockMillis)*time.Millisecond:
			return fmt.Errorf("the records came again %v after their acquisition, not before the %dms lock ran out: %w",
				again[0].at.Sub(held.at), held.lockMillis, ErrRetry)
		}
		// The broker fences the dead member at its session timeout.
		sleepCtx(ctx, 6500*time.Millisecond-time.Since(killed))
		if err := shareDone(ctx, cl); err != nil {
			return err
		}
		c.Note("h_share_killed_held: hsk-holder (member %s) acquired offsets %d-%d (lock %dms) and was SIGKILLed; hsk-consumer "+
			"acquired them again %v after that acquisition, in %d ranges", holder, held.first, held.last, held.lockMillis,
			again[0].at.Sub(held.at).Round(time.Millisecond), len(again))
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: holder, ClientID: "hsk-holder", Reason: ReasonSessionTimeout,
			Note: "SIGKILLed: no heartbeat; kfake fenced it at the share session timeout (6s, not on the wire)"})
		c.AddHazard(Hazard{Kind: "share_member_died", Group: group, Topic: topic, Partition: i32(0), MemberID: holder,
			ClientID: "hsk-holder", Note: "SIGKILLed holding the records it acquired: its connection closed, and hsk-consumer " +
				"acquired them again before their lock ran out"})
		return c.RecordEndOffsets(ctx, topic)
	},
}
