package gen

import (
	"context"
	"fmt"
	"time"
)

var hNonOwnerFetch = Scenario{
	Name: "h_non_owner_fetch",
	Doc: "hnof-group (range) on hnof-orders (2 partitions): member 1 in process, member 2 in a child; with the group " +
		"caught up, member 2 is SIGSTOPped past its 6s session timeout and expires (member 1 takes partition 1); 50 " +
		"more records are written and consumed by member 1; member 2 is SIGCONTed and, before it notices it was " +
		"removed, fetches partition 1 from its old position with its old member id: the records arrive twice",
	Options:  oneTopic("hnof-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hnof-orders", "hnof-group"
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("hnof-member-%d", i), Group: group, Topics: []string{topic}, Balancers: []string{"range"}}
		}
		m1, ch, _, err := startPair(ctx, c, group, topic, 2, args, "hnof-producer")
		if err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond)
		id2 := c.scriptGone(group, "hnof-member-2", CauseMemberExpired, 6*time.Second)
		_, oldGen := c.groups.lastGeneration(group, id2)
		if err := ch.Stop(); err != nil {
			return err
		}
		if err := c.checkExpired(ctx, group, id2, ReasonSessionTimeout); err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 1, 2)
		if err != nil {
			return err
		}
		if err := produceN(ctx, c, "hnof-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		resumed := time.Now()
		if err := ch.Cont(); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, 2); err != nil {
			return err
		}
		read := c.fetchedBy(group, "hnof-member-2", topic, 1, resumed)
		if read == 0 {
			return fmt.Errorf("the resumed member read nothing of partition 1: %w", ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "non_owner_fetch", Group: group, Topic: topic, Partition: i32(1), MemberID: id2, ClientID: "hnof-member-2",
			Generation: i32(oldGen), Numbers: map[string]int64{"records": read, "owner_generation": int64(gi.Epoch)},
			Note: "after SIGCONT, the expired member fetched partition 1, owned by hnof-member-1 since the owner generation; " +
				"a commit it tries with its old identity is refused (see notes)"})
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id2, ClientID: "hnof-member-2", Generation: i32(oldGen),
			Reason: ReasonSessionTimeout, Numbers: map[string]int64{"session_timeout_ms": 6000}, Note: "SIGSTOPped past its session timeout"})
		c.Note("h_non_owner_fetch: hnof-member-2 (member id %s) was SIGSTOPped, then SIGCONTed at %s", id2, resumed.Format(time.RFC3339Nano))
		c.scriptGone(group, "hnof-member-2", CauseMemberLeft, 0)
		if err := ch.Terminate(ctx); err != nil {
			return fmt.Errorf("child member: %w", err)
		}
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		m1.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hMemberExpired = Scenario{
	Name: "h_member_expired",
	Doc: "hme-group on hme-orders (2 partitions): member 1 in process, member 2 in a child; with the group caught " +
		"up, member 2 is SIGKILLed (no LeaveGroup) and expires after its 6s session timeout; member 1 takes over " +
		"and reads 50 more records",
	Options: oneTopic("hme-orders", 2),
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hme-orders", "hme-group"
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("hme-member-%d", i), Group: group, Topics: []string{topic}}
		}
		m1, ch, _, err := startPair(ctx, c, group, topic, 2, args, "hme-producer")
		if err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond)
		id2 := c.scriptGone(group, "hme-member-2", CauseMemberExpired, 6*time.Second)
		_, gen := c.groups.lastGeneration(group, id2)
		killed := time.Now()
		if err := ch.Kill(); err != nil {
			return err
		}
		if err := c.checkExpired(ctx, group, id2, ReasonSessionTimeout); err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 1, 2)
		if err != nil {
			return err
		}
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id2, ClientID: "hme-member-2", Generation: i32(gen), Reason: ReasonSessionTimeout,
			Numbers: map[string]int64{"session_timeout_ms": 6000, "next_generation": int64(gi.Epoch),
				"killed_to_stable_ms": time.Since(killed).Milliseconds()},
			Note: "SIGKILLed: silent until the broker expired it; its partitions were idle meanwhile"})
		if err := produceN(ctx, c, "hme-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		m1.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hHeartbeatLate = Scenario{
	Name: "h_heartbeat_late",
	Doc: "hhl-group on hhl-orders (2 partitions), 6s session timeouts: member 1 heartbeats every 2.5s (more than " +
		"a third of its session timeout); member 2 (a child, heartbeat 300ms) is SIGSTOPped for 4.5s and resumed, " +
		"a heartbeat gap close to its session timeout, without expiring; a producer writes throughout",
	Options: oneTopic("hhl-orders", 2),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hhl-orders", "hhl-group"
		prod, err := startProducer(ctx, c, "hhl-producer", topic, 10, 60, 200*time.Millisecond)
		if err != nil {
			return err
		}
		m1, err := startGMember(ctx, c, GMemberArgs{ClientID: "hhl-member-1", Group: group, Topics: []string{topic}, HeartbeatMillis: 2500})
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		ch, err := startGChild(ctx, c, GMemberArgs{ClientID: "hhl-member-2", Group: group, Topics: []string{topic}})
		if err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 2, 2)
		if err != nil {
			return err
		}
		sleepCtx(ctx, 6*time.Second)
		id1, _ := m1.cl.GroupMetadata()
		id2 := c.groups.lastMember(group, "hhl-member-2")
		if err := ch.Stop(); err != nil {
			return err
		}
		sleepCtx(ctx, 4500*time.Millisecond)
		if err := ch.Cont(); err != nil {
			return err
		}
		sleepCtx(ctx, 2*time.Second)
		if gi2 := c.kf.GroupInfo(group); gi2 == nil || gi2.Epoch != gi.Epoch {
			return fmt.Errorf("the paused member was expired or the group rebalanced: %+v", gi2)
		}
		c.AddHazard(Hazard{Kind: "heartbeat_late", Group: group, MemberID: id1, ClientID: "hhl-member-1", Generation: i32(gi.Epoch),
			Numbers: map[string]int64{"heartbeat_interval_ms": 2500, "session_timeout_ms": 6000},
			Note:    "heartbeats every 2.5s, above a third of the 6s session timeout"})
		c.AddHazard(Hazard{Kind: "heartbeat_late", Group: group, MemberID: id2, ClientID: "hhl-member-2", Generation: i32(gi.Epoch),
			Numbers: map[string]int64{"paused_ms": 4500, "heartbeat_interval_ms": 300, "session_timeout_ms": 6000},
			Note:    "SIGSTOPped for 4.5s: a heartbeat gap of about 4.5-4.8s, close to the session timeout, no expiry"})
		if err := prod.halt(); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		c.scriptGone(group, "hhl-member-2", CauseMemberLeft, 0)
		if err := ch.Terminate(ctx); err != nil {
			return fmt.Errorf("child member: %w", err)
		}
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		m1.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hRebalanceSlow = Scenario{
	Name: "h_rebalance_slow",
	Doc: "hrsl-group (range, 10s rebalance and session timeouts) on hrsl-orders (2 partitions) while a producer " +
		"writes: member 1 blocks rebalances while it polls (kgo BlockRebalanceOnPoll) and sleeps 7s in its poll " +
		"loop after each batch; member 2 joins just as member 1 starts sleeping: the rebalance lasts about 7s",
	Options: oneTopic("hrsl-orders", 2),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hrsl-orders", "hrsl-group"
		prod, err := startProducer(ctx, c, "hrsl-producer", topic, 10, 60, 200*time.Millisecond)
		if err != nil {
			return err
		}
		a := GMemberArgs{ClientID: "hrsl-member-1", Group: group, Topics: []string{topic}, Balancers: []string{"range"},
			SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 10000, BlockRebalance: true, PollSleepMillis: 7000}
		m1, err := startBusyMember(ctx, c, a, 2)
		if err != nil {
			return err
		}
		start := time.Now()
		m2, err := startGMember(ctx, c, GMemberArgs{ClientID: "hrsl-member-2", Group: group, Topics: []string{topic},
			Balancers: []string{"range"}, SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 10000})
		if err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 2, 2)
		if err != nil {
			return err
		}
		took := time.Since(start)
		if took < 4*time.Second {
			return fmt.Errorf("rebalance took only %v: %w", took, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "rebalance_slow", Group: group, MemberID: m1.memberID(), ClientID: "hrsl-member-1", Generation: i32(gi.Epoch),
			Numbers: map[string]int64{"rebalance_timeout_ms": 10000, "poll_sleep_ms": 7000, "duration_ms_client": took.Milliseconds()},
			Note: "hrsl-member-1 rejoined only after its 7s poll sleep: the rebalance (generation " + fmt.Sprint(gi.Epoch) +
				") took most of the rebalance timeout while every partition was idle"})
		if err := prod.halt(); err != nil {
			return err
		}
		m1.leave() // first: its sleep ends with its context
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		m2.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
	Attempts: 2,
}
