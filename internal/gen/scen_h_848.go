package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	RegisterChild("gmember-slowcommit", childSlowCommit)
	for _, s := range []Scenario{h848Late, h848RejectedCommit} {
		Register(s)
	}
}

// childSlowCommit is the gmember child that processes before it commits:
// after a poll that returned records it sleeps PollSleepMillis (the
// records' processing) and only then commits them (its Commit mode is
// ignored; it never commits on revoke). Frozen during that sleep, it
// commits as soon as it thaws, with the member id and epoch it had when
// it froze, before its heartbeat learns it was fenced.
func childSlowCommit(ctx context.Context, env *ChildEnv) error {
	var a GMemberArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	a.Commit = "none"
	p := newProbe(a.Group, a.ClientID, a.InstanceID, env.report)
	opts, err := a.opts(p)
	if err != nil {
		return err
	}
	cl, err := env.Kgo(opts...)
	if err != nil {
		return err
	}
	p.cl.Store(cl)
	go func() {
		select {
		case <-p.assigned:
			env.Ready()
		case <-ctx.Done():
		}
	}()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		if len(fs.Records()) == 0 {
			continue
		}
		sleepCtx(ctx, time.Duration(a.PollSleepMillis)*time.Millisecond)
		p.commitErr(cl.CommitUncommittedOffsets(ctx))
	}
	p.closing.Store(true)
	cl.Close()
	return nil
}

// startChildAs starts a GMemberArgs member as the registered child name
// and waits until it owns partitions.
func startChildAs(ctx context.Context, c *Cluster, name string, a GMemberArgs) (*Child, error) {
	return c.startReady(ctx, name, a, "child member "+a.ClientID, "owning partitions")
}

// beat is one request of a KIP-848 member that kept its session alive
// (ConsumerGroupHeartbeat, OffsetCommit), as the broker read it off its
// tap and answered it.
type beat struct {
	at    time.Time
	key   int16
	epoch int32 // the broker's answer (heartbeat) or the request's (commit)
	code  int16
}

// beatsOf returns member id's heartbeats and commits in group, in order.
func (c *Cluster) beatsOf(group, id string) []beat {
	var out []beat
	for _, x := range c.tapExchanges(int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.OffsetCommit)) {
		switch req := x.Req.(type) {
		case *kmsg.ConsumerGroupHeartbeatRequest:
			resp, _ := x.Resp.(*kmsg.ConsumerGroupHeartbeatResponse)
			if req.Group != group || req.MemberID != id || resp == nil {
				continue
			}
			out = append(out, beat{at: x.ReqTime, key: req.Key(), epoch: resp.MemberEpoch, code: resp.ErrorCode})
		case *kmsg.OffsetCommitRequest:
			if req.Group != group || req.MemberID != id {
				continue
			}
			out = append(out, beat{at: x.ReqTime, key: req.Key(), epoch: req.Generation})
		}
	}
	return out
}

var h848Late = Scenario{
	Name: "h_848_late",
	Doc: "a KIP-848 group h848l-group (uniform, broker consumer session timeout 6s, heartbeat interval 500ms) on " +
		"h848l-orders (2 partitions): member 1 in process, member 2 in a child; with the group caught up, member 2 " +
		"is SIGSTOPped for 3s (six heartbeat intervals, half the session timeout) and SIGCONTed: its next heartbeat " +
		"is accepted at its old epoch, it is never fenced and goes on consuming 50 more records with member 1",
	Options:  opts848("h848l-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 3,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts = "h848l-orders", "h848l-group", 2
		c.kip848(group, "uniform")
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("h848l-member-%d", i), Group: group, Topics: []string{topic}, ServerSide: true}
		}
		m1, ch, gi, err := startPair(ctx, c, group, topic, parts, args, "h848l-producer")
		if err != nil {
			return err
		}
		sleepCtx(ctx, 1500*time.Millisecond) // a few heartbeats at the interval first
		id2 := c.groups.lastMember(group, "h848l-member-2")
		stopped := time.Now()
		if err := ch.Stop(); err != nil {
			return err
		}
		sleepCtx(ctx, 3*time.Second)
		if err := ch.Cont(); err != nil {
			return err
		}
		sleepCtx(ctx, 2*time.Second) // a few heartbeats after the gap
		if es, _ := c.expiries(group); len(es) > 0 {
			return fmt.Errorf("the broker fenced %+v during a 3s pause: %w", es, ErrRetry)
		}
		gi2 := c.kf.GroupInfo(group)
		if gi2 == nil || gi2.Epoch != gi.Epoch || len(gi2.Members) != 2 || !slices.ContainsFunc(gi2.Members, func(m kfake.GroupMember) bool { return m.MemberID == id2 }) {
			return fmt.Errorf("member 2 (%s) left the group or it rebalanced during a 3s pause: %+v: %w", id2, gi2, ErrRetry)
		}
		gap, after, err := c.lateGap(group, id2, stopped)
		if err != nil {
			return err
		}
		c.AddHazard(Hazard{Kind: "heartbeat_late", Group: group, MemberID: id2, ClientID: "h848l-member-2", Generation: i32(after.epoch),
			Numbers: map[string]int64{"heartbeat_gap_ms": gap.Milliseconds(), "paused_ms": 3000, "heartbeat_interval_ms": 500,
				"session_timeout_ms": 6000},
			Note: fmt.Sprintf("SIGSTOPped for 3s: the broker heard nothing from it for %dms (its heartbeat and commit "+
				"arrival times on the tap), six heartbeat intervals and half the broker's 6s consumer session timeout "+
				"(group.consumer.session.timeout.ms, not on the wire); its next heartbeat was answered %s at member epoch %d: "+
				"not fenced, not a member_expired", gap.Milliseconds(), errName(after.code), after.epoch)})
		if err := produceN(ctx, c, "h848l-producer", topic, 100, 50); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		c.scriptGone(group, "h848l-member-2", CauseMemberLeft, 0)
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

// lateGap returns the longest silence of member id (between two of its
// requests that keep a session alive, on the tap) around a pause that
// began at stopped, and the first heartbeat after it, which the broker
// must have accepted.
func (c *Cluster) lateGap(group, id string, stopped time.Time) (time.Duration, beat, error) {
	var gap time.Duration
	var after beat
	bs := c.beatsOf(group, id)
	for i := 1; i < len(bs); i++ {
		if bs[i].at.Before(stopped) {
			continue
		}
		if d := bs[i].at.Sub(bs[i-1].at); d > gap {
			gap = d
			after = bs[i]
			for _, b := range bs[i:] {
				if b.key == int16(kmsg.ConsumerGroupHeartbeat) {
					after = b
					break
				}
			}
		}
	}
	switch {
	case after.key != int16(kmsg.ConsumerGroupHeartbeat) || after.code != 0:
		return 0, after, fmt.Errorf("no heartbeat of %s accepted after its pause (%+v): %w", id, after, ErrRetry)
	case gap < 2500*time.Millisecond || gap >= 6*time.Second:
		return 0, after, fmt.Errorf("a silence of %v, not 3-6s: %w", gap, ErrRetry)
	}
	return gap, after, nil
}

var h848RejectedCommit = Scenario{
	Name: "h_848_rejected_commit",
	Doc: "a KIP-848 group h848r-group (uniform, broker consumer session timeout 6s, heartbeat interval 500ms) on " +
		"h848r-orders (2 partitions): member 1 in process, member 2 in a child that processes each poll for 1.5s " +
		"before it commits it; 20 more records are written and member 2 is SIGSTOPped while it processes its share; " +
		"the broker fences it after 6s and member 1 takes its partition (reading those records again from the last " +
		"commit); member 2 is SIGCONTed: its commit goes out at once with its fenced member id and epoch and the " +
		"broker refuses it (the broker's answer on the tap), then its heartbeat learns it was fenced and it rejoins",
	Options:  opts848("h848r-orders", 2),
	Timeout:  60 * time.Second,
	Attempts: 3,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, parts, client = "h848r-orders", "h848r-group", 2, "h848r-member-2"
		c.kip848(group, "uniform")
		c.watchGroup(group)
		m1, err := startGMember(ctx, c, GMemberArgs{ClientID: "h848r-member-1", Group: group, Topics: []string{topic}, ServerSide: true})
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
			return err
		}
		ch, err := startChildAs(ctx, c, "gmember-slowcommit", GMemberArgs{ClientID: client, Group: group, Topics: []string{topic},
			ServerSide: true, PollSleepMillis: 1500})
		if err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 2, parts)
		if err != nil {
			return err
		}
		if err := produceN(ctx, c, "h848r-producer", topic, 0, 100); err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err // member 2 committed its last poll: it is polling again
		}
		id2 := c.groups.lastMember(group, client)
		var p2 int32 = -1 // member 2's partition
		for _, m := range gi.Members {
			if m.MemberID == id2 && len(m.Assignment[topic]) == 1 {
				p2 = m.Assignment[topic][0]
			}
		}
		if p2 < 0 {
			return fmt.Errorf("member 2 (%s) does not own one partition in %+v: %w", id2, gi.Members, ErrRetry)
		}
		sent := time.Now()
		if err := produceN(ctx, c, "h848r-producer", topic, 100, 20); err != nil {
			return err
		}
		if err := waitFor(ctx, client+" to read its new records", func() bool { return c.fetchedBy(group, client, topic, p2, sent) > 0 }); err != nil {
			return err
		}
		sleepCtx(ctx, 300*time.Millisecond) // well inside its 1.5s of processing
		c.scriptGone(group, client, CauseMemberExpired, 6*time.Second)
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
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		resumed := time.Now()
		if err := ch.Cont(); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, parts); err != nil { // rejoined under a new member id
			return err
		}
		sleepCtx(ctx, 500*time.Millisecond)
		e.ClientID = client
		c.AddHazard(expiredHazard(group, e, map[string]int64{"session_timeout_ms": 6000, "next_generation": int64(gi1.Epoch)},
			"SIGSTOPped while processing a poll: the broker fenced it (kfake consumerSessionTimeout) at its last member epoch"))
		if err := c.fencedCommits(group, topic, client, id2, p2, resumed); err != nil {
			return err
		}
		c.scriptGone(group, client, CauseMemberLeft, 0)
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

// fencedCommits adds a commit_rejected hazard for each partition of an
// OffsetCommit with the fenced member id that the broker refused after
// the member was resumed (its answers on the tap), and a non_owner_fetch
// if the member read records of its old partition p meanwhile; ErrRetry
// when there was no refused commit.
func (c *Cluster) fencedCommits(group, topic, client, id string, p int32, resumed time.Time) error {
	var rejected int
	for _, cm := range c.tapCommits(group, resumed) {
		if cm.MemberID != id {
			continue
		}
		c.Note("h_848_rejected_commit: OffsetCommit %s/%d offset %d with the fenced member id %s epoch %d: %s",
			cm.Topic, cm.Partition, cm.Offset, id, cm.Generation, errName(cm.Code))
		if cm.Code == 0 {
			continue
		}
		rejected++
		c.AddHazard(Hazard{Kind: "commit_rejected", Group: group, Topic: cm.Topic, Partition: i32(cm.Partition), MemberID: id,
			ClientID: client, Generation: i32(cm.Generation), Numbers: map[string]int64{"offset": cm.Offset, "error_code": int64(cm.Code)},
			Note: "the commit of the records it was processing when it froze, sent as it thawed with its fenced member id " +
				"and epoch, refused (" + errName(cm.Code) + "): the commit is lost, member 1 already read them again"})
	}
	if rejected == 0 {
		return fmt.Errorf("%s sent no OffsetCommit with its fenced member id %s that the broker refused: %w", client, id, ErrRetry)
	}
	if read := c.fetchedBy(group, client, topic, p, resumed); read > 0 {
		return fmt.Errorf("%s read %d records of %s/%d after it thawed: %w", client, read, topic, p, ErrRetry)
	}
	c.Note("h_848_rejected_commit: %s read no record of %s/%d after it thawed (nothing was written since it froze): "+
		"no non_owner_fetch", client, topic, p)
	return nil
}
