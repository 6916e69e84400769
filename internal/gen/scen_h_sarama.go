package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Field report 3 with its own client: sarama consumer group members the
// broker removes without a LeaveGroup (issue 15), for its session timeout
// (a member that dies) and for its rebalance timeout (a member whose
// handler holds up its rejoin). The reasons are the broker's, from the
// broker-side records (Cluster.expiries).

func init() {
	for _, s := range []Scenario{hSaramaExpired, hSaramaRebalanceTimeout} {
		Register(s)
	}
}

// saramaTopic is a cluster capped at Kafka 2.8 (as g_sarama: the versions
// sarama is configured for) with topic.
func saramaTopic(topic string, parts int32) Options {
	return Options{Link: LinkEthernet, MaxVersions: kversion.V2_8_0(), Kfake: []kfake.Opt{kfake.SeedTopics(parts, topic)}}
}

var hSaramaExpired = Scenario{
	Name: "h_sarama_expired",
	Doc: "sarama consumer group hsx-group (range, 6s session timeout, heartbeat 1s) on hsx-orders (4 partitions): " +
		"member 1 in process, member 2 in a child; with the group caught up, member 2 is SIGKILLed (no LeaveGroup); " +
		"the broker expires it after its 6s session timeout and member 1 takes all 4 partitions at the next " +
		"generation and reads 50 more records (records are written by a kgo producer)",
	Options:  saramaTopic("hsx-orders", 4),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts = "hsx-orders", "hsx-group", 4
		c.watchGroup(group)
		args := func(i int) SaramaMemberArgs {
			return SaramaMemberArgs{ClientID: fmt.Sprintf("hsx-member-%d", i), Group: group, Topics: []string{topic},
				SessionTimeoutMillis: 6000, HeartbeatMillis: 1000}
		}
		m1, err := startSaramaGMember(ctx, c, args(1))
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
			return err
		}
		ch, err := startSaramaChild(ctx, c, args(2))
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsx-producer", topic, 0, 100); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond)
		id2 := c.groups.lastMember(group, "hsx-member-2")
		_, gen2 := c.groups.lastGeneration(group, id2)
		killed := time.Now()
		if err := ch.Kill(); err != nil {
			return err
		}
		e, err := c.expiryOf(ctx, group, id2)
		if err != nil {
			return err
		}
		if e.Reason != ReasonSessionTimeout {
			return fmt.Errorf("the broker dropped %s for %s, not its session timeout: %w", id2, e.Reason, ErrRetry)
		}
		if e.Generation != gen2 {
			return fmt.Errorf("the broker dropped %s at generation %d, its last Setup was for %d: %w", id2, e.Generation, gen2, ErrRetry)
		}
		c.groups.script(group, CauseMemberExpired, id2, e.At)
		gi, err := c.waitStable(ctx, group, 1, parts)
		if err != nil {
			return err
		}
		c.AddHazard(expiredHazard(group, e, map[string]int64{"next_generation": int64(gi.Epoch), "heartbeat_interval_ms": 1000,
			"silent_ms": e.At.Sub(c.lastHeard(group, id2, e.At)).Milliseconds(), "killed_to_expired_ms": e.At.Sub(killed).Milliseconds()},
			"sarama member SIGKILLed: no LeaveGroup and no heartbeat reached the broker, which removed it after its "+
				"session timeout; its partitions were idle meanwhile"))
		if err := produceN(ctx, c, "hsx-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		if err := m1.leave(c); err != nil {
			return err
		}
		c.Note("h_sarama_expired: groups.hsx-group.fetched counts the messages sarama parsed out of Fetch responses " +
			"(a consumer interceptor; sarama has no batch hook); members commit whole batches before anything else " +
			"happens, so every fetch starts at a batch and that is every record the Fetch responses carried")
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

// lastHeard is when the broker last heard from memberID of group before
// t, counting what restarts kfake's session timer: Heartbeat, JoinGroup,
// SyncGroup (Cluster.expiries) and also an accepted OffsetCommit (on the
// tap), which Expiry.SilentMillis leaves out.
func (c *Cluster) lastHeard(group, memberID string, t time.Time) time.Time {
	b := c.bgroups
	b.mu.Lock()
	last, _ := b.heardBefore(group+"/"+memberID, t)
	b.mu.Unlock()
	for _, cm := range c.tapCommits(group, last) {
		if cm.MemberID == memberID && cm.Code == 0 && cm.At.Before(t) && cm.At.After(last) {
			last = cm.At
		}
	}
	return last
}

var hSaramaRebalanceTimeout = Scenario{
	Name: "h_sarama_rebalance_timeout",
	Doc: "sarama consumer group hsrt-group (range; both members: 3s rebalance timeout, 10s session timeout, " +
		"heartbeat 1s) on hsrt-orders (2 partitions): member A reads 100 records, commits, and its ConsumeClaim then " +
		"blocks for 6s, deaf to the session's end; member B joins as A starts blocking; sarama's heartbeat goroutine " +
		"keeps A's session alive (answered REBALANCE_IN_PROGRESS) but A cannot rejoin, so after the 3s rebalance " +
		"timeout the broker forms the next generation without A; when A's handler returns, A rejoins under a new " +
		"member id and the group reads 50 more records",
	Options:  saramaTopic("hsrt-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts = "hsrt-orders", "hsrt-group", 2
		c.watchGroup(group)
		args := func(name string) SaramaMemberArgs {
			return SaramaMemberArgs{ClientID: name, Group: group, Topics: []string{topic},
				SessionTimeoutMillis: 10000, HeartbeatMillis: 1000, RebalanceTimeoutMillis: 3000}
		}
		a := args("hsrt-member-a")
		a.StallMillis = 6000
		ma, err := startSaramaGMember(ctx, c, a)
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsrt-producer", topic, 0, 100); err != nil {
			return err
		}
		select {
		case <-ma.h.stalled:
		case <-ctx.Done():
			return fmt.Errorf("hsrt-member-a never blocked: %w", ctx.Err())
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil { // every claim committed: all of A's goroutines blocked
			return err
		}
		idA := ma.memberID()
		start := time.Now()
		mb, err := startSaramaGMember(ctx, c, args("hsrt-member-b"))
		if err != nil {
			return err
		}
		e, err := c.expiryOf(ctx, group, idA)
		if err != nil {
			return err
		}
		if e.Reason != ReasonRebalanceTimeout {
			return fmt.Errorf("the broker dropped %s for %s, not its rebalance timeout: %w", idA, e.Reason, ErrRetry)
		}
		if e.SilentMillis >= 3000 {
			return fmt.Errorf("the broker had not heard from %s for %dms when it dropped it: not a heartbeating member: %w",
				idA, e.SilentMillis, ErrRetry)
		}
		c.groups.script(group, CauseMemberExpired, idA, e.At)
		c.AddHazard(expiredHazard(group, e, map[string]int64{"stall_ms": 6000, "heartbeat_interval_ms": 1000,
			"silent_ms": e.SilentMillis, "join_to_drop_ms": e.At.Sub(start).Milliseconds()},
			"sarama member whose ConsumeClaim blocked (6s) through a rebalance with a 3s rebalance timeout: sarama kept "+
				"heartbeating, so not a session expiry; the broker completed the rebalance without it"))
		// A's handler returns, its Consume ends, and the next one finds
		// it unknown: it rejoins under a new member id.
		if err := waitFor(ctx, "hsrt-member-a to rejoin", func() bool { id := ma.memberID(); return id != "" && id != idA }); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsrt-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		if err := mb.leave(c); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
			return err
		}
		if err := ma.leave(c); err != nil {
			return err
		}
		if c.rejectedCommits(group, start, "OffsetCommit refused by the broker after the member was dropped") == 0 {
			c.Note("h_sarama_rebalance_timeout: the broker refused no OffsetCommit (its answers on the tap): no commit_rejected hazard")
		}
		c.Note("h_sarama_rebalance_timeout: groups.hsrt-group.fetched counts the messages sarama parsed out of Fetch " +
			"responses (a consumer interceptor; sarama has no batch hook); members commit whole batches, and A blocks " +
			"only once it committed up to the high watermark, so every fetch starts at a batch")
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}
