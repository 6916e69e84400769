package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var h848Zombie = Scenario{
	Name: "h_848_zombie",
	Doc: "a KIP-848 group h848z-group (uniform, broker consumer session timeout 6s, heartbeat interval 500ms) on " +
		"h848z-orders (2 partitions): member 1 in process, member 2 in a child; with the group caught up, member 2 " +
		"is SIGSTOPped; the broker fences it after 6s and member 1 takes its partition; 50 more records are written " +
		"and consumed by member 1; member 2 is SIGCONTed: what it does before it notices (fetches of the partition " +
		"now owned by member 1, commits with its fenced epoch, heartbeats answered with an error) is taken from the " +
		"broker's answers on the tap",
	Options:  opts848("h848z-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 3,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts = "h848z-orders", "h848z-group", 2
		c.kip848(group, "uniform")
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("h848z-member-%d", i), Group: group, Topics: []string{topic}, ServerSide: true}
		}
		m1, ch, gi, err := startPair(ctx, c, group, topic, parts, args, "h848z-producer")
		if err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond)
		id2 := c.scriptGone(group, "h848z-member-2", CauseMemberExpired, 6*time.Second)
		var p2 int32 = -1 // member 2's partition
		for _, m := range gi.Members {
			if m.MemberID == id2 && len(m.Assignment[topic]) == 1 {
				p2 = m.Assignment[topic][0]
			}
		}
		if p2 < 0 {
			return fmt.Errorf("member 2 (%s) does not own one partition in %+v: %w", id2, gi.Members, ErrRetry)
		}
		if err := ch.Stop(); err != nil {
			return err
		}
		e, err := c.expiryOf(ctx, group, id2)
		if err != nil {
			return err
		}
		if e.Reason != ReasonSessionTimeout {
			return fmt.Errorf("the broker fenced %s for %s, not its session timeout: %w", id2, e.Reason, ErrRetry)
		}
		gi1, err := c.waitStable(ctx, group, 1, parts)
		if err != nil {
			return err
		}
		if err := produceN(ctx, c, "h848z-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		resumed := time.Now()
		if err := ch.Cont(); err != nil {
			return err
		}
		// Member 2 notices and rejoins as a new member (epoch 0).
		if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
			return err
		}
		sleepCtx(ctx, 500*time.Millisecond)
		e.ClientID = "h848z-member-2"
		c.AddHazard(expiredHazard(group, e, map[string]int64{"session_timeout_ms": 6000, "next_generation": int64(gi1.Epoch)},
			"SIGSTOPped: the broker fenced it (kfake consumerSessionTimeout) at its last member epoch"))
		if err := c.zombieHazards(group, topic, id2, e.Generation, p2, gi1.Epoch, resumed); err != nil {
			return err
		}
		c.scriptGone(group, "h848z-member-2", CauseMemberLeft, 0)
		if err := ch.Terminate(ctx); err != nil {
			return fmt.Errorf("child member: %w", err)
		}
		if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
			return err
		}
		m1.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

// zombieHazards lists, from the broker's answers on the tap, what the
// fenced member id did after it was resumed: fetches of partition p (owned
// by another member since ownerEpoch) and commits, before it rejoined.
func (c *Cluster) zombieHazards(group, topic, id string, epoch, p, ownerEpoch int32, resumed time.Time) error {
	client := "h848z-member-2"
	records, from := c.tapFetched(client, topic, p, resumed)
	// Only fetches before the member's new identity owns p again count:
	// take the records the client read before its first heartbeat came
	// back (the tap's view of the same fetches).
	read := c.fetchedBy(group, client, topic, p, resumed)
	c.Note("h_848_zombie: %s (fenced member id %s) was SIGCONTed at %s; the broker's Fetch answers to it for %s/%d since "+
		"carried %d records (lowest fetch offset named: %d; -1: only the fetch session named it), its client read %d", client, id, resumed.Format(time.RFC3339Nano), topic, p, records, from, read)
	if read > 0 {
		c.AddHazard(Hazard{Kind: "non_owner_fetch", Group: group, Topic: topic, Partition: i32(p), MemberID: id, ClientID: client,
			Generation: i32(epoch), Numbers: map[string]int64{"records": read, "owner_generation": int64(ownerEpoch)},
			Note: "after SIGCONT, the fenced member fetched its old partition, owned by h848z-member-1 since the owner generation"})
	} else {
		c.Note("h_848_zombie: the resumed member read nothing of %s/%d before it rejoined: no non_owner_fetch hazard", topic, p)
	}
	var rejected int
	for _, cm := range c.tapCommits(group, resumed) {
		if cm.MemberID != id || cm.Code == 0 {
			continue
		}
		rejected++
		c.AddHazard(Hazard{Kind: "commit_rejected", Group: group, Topic: cm.Topic, Partition: i32(cm.Partition), MemberID: id,
			ClientID: client, Generation: i32(cm.Generation),
			Numbers: map[string]int64{"offset": cm.Offset, "error_code": int64(cm.Code)},
			Note:    "OffsetCommit with the fenced member id refused (" + errName(cm.Code) + "): the commit is lost"})
	}
	if rejected == 0 {
		c.Note("h_848_zombie: the resumed member sent no OffsetCommit with its fenced member id: no commit_rejected hazard")
	}
	var hb []string
	for _, x := range c.tapExchanges(int16(kmsg.ConsumerGroupHeartbeat)) {
		req := x.Req.(*kmsg.ConsumerGroupHeartbeatRequest)
		resp, _ := x.Resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		if req.MemberID != id || x.ReqTime.Before(resumed) || resp == nil {
			continue
		}
		hb = append(hb, fmt.Sprintf("epoch %d -> %s", req.MemberEpoch, errName(resp.ErrorCode)))
	}
	c.Note("h_848_zombie: heartbeats with the fenced member id after SIGCONT, as the broker answered them: %v", hb)
	return nil
}

func errName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.Error()
	}
	return "ok"
}
