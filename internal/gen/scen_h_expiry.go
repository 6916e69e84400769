package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func init() {
	for _, s := range []Scenario{h848Expired, h848Zombie, hRebalanceTimeout} {
		Register(s)
	}
}

// opts848 is a KIP-848 cluster with topic: heartbeats every 500ms, and
// the broker's consumer session timeout (group.consumer.session.timeout.ms,
// not on the wire: KIP-848 members do not send one) at 6s.
func opts848(topic string, parts int32) Options {
	return Options{Link: LinkEthernet, Kfake: []kfake.Opt{
		kfake.SeedTopics(parts, topic),
		kfake.BrokerConfigs(map[string]string{
			"group.consumer.heartbeat.interval.ms": "500",
			"group.consumer.session.timeout.ms":    "6000",
		}),
	}}
}

// expiryOf waits until the broker has removed memberID from group and
// returns why (see Cluster.expiries).
func (c *Cluster) expiryOf(ctx context.Context, group, memberID string) (Expiry, error) {
	var e Expiry
	err := waitFor(ctx, "the broker to drop "+memberID, func() bool {
		es, _ := c.expiries(group)
		for _, x := range es {
			if x.MemberID == memberID {
				e = x
				return true
			}
		}
		return false
	})
	if err == nil {
		_, notes := c.expiries(group)
		for _, n := range notes {
			c.Note("%s", n)
		}
	}
	return e, err
}

// checkExpired waits until the broker removed memberID from group and
// fails unless it was for reason (the scenario's member_expired hazard
// states it).
func (c *Cluster) checkExpired(ctx context.Context, group, memberID, reason string) error {
	e, err := c.expiryOf(ctx, group, memberID)
	if err == nil && e.Reason != reason {
		err = fmt.Errorf("the broker dropped %s for %s, not %s: %w", memberID, e.Reason, reason, ErrRetry)
	}
	return err
}

// expiredHazard is the member_expired hazard of e.
func expiredHazard(group string, e Expiry, nums map[string]int64, note string) Hazard {
	if nums == nil {
		nums = map[string]int64{}
	}
	if e.SessionTimeoutMillis > 0 {
		nums["session_timeout_ms"] = int64(e.SessionTimeoutMillis)
	}
	if e.Reason == ReasonRebalanceTimeout && e.RebalanceTimeoutMillis > 0 {
		nums["rebalance_timeout_ms"] = int64(e.RebalanceTimeoutMillis)
	}
	return Hazard{Kind: "member_expired", Group: group, MemberID: e.MemberID, ClientID: e.ClientID, Generation: i32(e.Generation),
		Reason: e.Reason, Numbers: nums, Note: note}
}

var h848Expired = Scenario{
	Name: "h_848_expired",
	Doc: "a KIP-848 group h848x-group (ConsumerGroupHeartbeat, uniform assignor, broker consumer session timeout 6s, " +
		"heartbeat interval 500ms) on h848x-orders (4 partitions): member 1 in process, member 2 in a child; with " +
		"the group caught up, member 2 is SIGKILLed (no leave heartbeat); the broker fences it after 6s without a " +
		"heartbeat and member 1 takes all 4 partitions at a new group epoch and reads 50 more records",
	Options:  opts848("h848x-orders", 4),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts = "h848x-orders", "h848x-group", 4
		c.kip848(group, "uniform")
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("h848x-member-%d", i), Group: group, Topics: []string{topic}, ServerSide: true}
		}
		m1, ch, _, err := startPair(ctx, c, group, topic, parts, args, "h848x-producer")
		if err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond)
		id2 := c.scriptGone(group, "h848x-member-2", CauseMemberExpired, 6*time.Second)
		killed := time.Now()
		if err := ch.Kill(); err != nil {
			return err
		}
		e, err := c.expiryOf(ctx, group, id2)
		if err != nil {
			return err
		}
		if e.Reason != ReasonSessionTimeout {
			return fmt.Errorf("the broker fenced %s for %s, not its session timeout: %w", id2, e.Reason, ErrRetry)
		}
		gi, err := c.waitStable(ctx, group, 1, parts)
		if err != nil {
			return err
		}
		e.ClientID = "h848x-member-2"
		c.AddHazard(expiredHazard(group, e, map[string]int64{"session_timeout_ms": 6000, "next_generation": int64(gi.Epoch),
			"killed_to_fenced_ms": e.At.Sub(killed).Milliseconds()},
			"SIGKILLed: no heartbeat reached the broker, which fenced it (kfake consumerSessionTimeout) at its last member epoch"))
		if err := produceN(ctx, c, "h848x-producer", topic, 100, 50); err != nil {
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

// rejectedCommits adds a commit_rejected hazard for every OffsetCommit of
// group the broker refused (from its answers on the tap) since since, and
// returns how many there were.
func (c *Cluster) rejectedCommits(group string, since time.Time, note string) int {
	n := 0
	for _, cm := range c.tapCommits(group, since) {
		if cm.Code == 0 {
			continue
		}
		n++
		c.AddHazard(Hazard{Kind: "commit_rejected", Group: group, Topic: cm.Topic, Partition: i32(cm.Partition), MemberID: cm.MemberID,
			ClientID: cm.ClientID, Generation: i32(cm.Generation), Numbers: map[string]int64{"offset": cm.Offset, "error_code": int64(cm.Code)},
			Note: note + " (" + errName(cm.Code) + ")"})
	}
	return n
}

var hRebalanceTimeout = Scenario{
	Name: "h_rebalance_timeout",
	Doc: "hrt-group (range; both members: 3s rebalance timeout, 10s session timeout, heartbeat 300ms) on hrt-orders " +
		"(2 partitions) while a producer writes: member A blocks rebalances while it polls (kgo BlockRebalanceOnPoll) " +
		"and sleeps 6s in its poll loop after each batch; member B joins as A starts sleeping; A keeps heartbeating " +
		"(answered REBALANCE_IN_PROGRESS) but cannot rejoin, so after the 3s rebalance timeout the broker forms the " +
		"next generation without A; when A wakes it learns it is unknown and rejoins as a new member",
	Options:  oneTopic("hrt-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hrt-orders", "hrt-group"
		c.watchGroup(group)
		prod, err := startProducer(ctx, c, "hrt-producer", topic, 10, 60, 200*time.Millisecond)
		if err != nil {
			return err
		}
		args := func(name string) GMemberArgs {
			return GMemberArgs{ClientID: name, Group: group, Topics: []string{topic}, Balancers: []string{"range"},
				SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 3000}
		}
		a := args("hrt-member-a")
		a.BlockRebalance, a.PollSleepMillis = true, 6000
		ma, err := startBusyMember(ctx, c, a, 2)
		if err != nil {
			return err
		}
		idA := ma.memberID()
		start := time.Now()
		mb, err := startGMember(ctx, c, args("hrt-member-b"))
		if err != nil {
			return err
		}
		e, err := c.expiryOf(ctx, group, idA)
		if err != nil {
			return err
		}
		if e.Reason != ReasonRebalanceTimeout {
			return fmt.Errorf("the broker dropped %s for %s: %w", idA, e.Reason, ErrRetry)
		}
		c.groups.script(group, CauseMemberExpired, idA, e.At)
		e.ClientID = "hrt-member-a"
		c.AddHazard(expiredHazard(group, e, map[string]int64{"rebalance_timeout_ms": 3000, "session_timeout_ms": 10000,
			"poll_sleep_ms": 6000, "silent_ms": e.SilentMillis, "join_to_drop_ms": e.At.Sub(start).Milliseconds()},
			"blocked in its poll loop (6s) during a rebalance with a 3s rebalance timeout: still heartbeating, so not a "+
				"session expiry; the broker completed the rebalance without it"))
		// A wakes, finds itself unknown and rejoins under a new id.
		if err := waitFor(ctx, "hrt-member-a to rejoin", func() bool { id := ma.memberID(); return id != "" && id != idA }); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, 2); err != nil {
			return err
		}
		if err := prod.halt(); err != nil {
			return err
		}
		ma.leave() // first: its sleep ends with its context
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		mb.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		if c.rejectedCommits(group, start, "OffsetCommit refused by the broker after the member was dropped") == 0 {
			c.Note("h_rebalance_timeout: the broker refused no OffsetCommit (its answers on the tap): no commit_rejected hazard")
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}
