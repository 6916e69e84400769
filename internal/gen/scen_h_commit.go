package gen

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	for _, s := range []Scenario{hCommitRegression, hCommitGap, hCommitBeyondFetch, hCommitRejected, hNonOwnerCommit,
		hCommitOnReceive, hNonOwnerFetch, hMemberExpired, hHeartbeatLate, hRebalanceStorm, hRebalanceSlow,
		hInconsistentProtocol, hOffsetReset, hProducerAcksWeak, hClientIDChurn} {
		Register(s)
	}
}

func i32(v int32) *int32 { return &v }

// commitOne commits off for topic/p through cl's group membership (kgo
// CommitOffsetsSync, which does not refuse to go backwards) and returns
// the broker's error code.
func commitOne(ctx context.Context, cl *kgo.Client, topic string, p int32, off int64) (int16, error) {
	var code int16
	var rerr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {p: {Epoch: -1, Offset: off}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				rerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, pr := range t.Partitions {
					code = pr.ErrorCode
				}
			}
		})
	return code, rerr
}

// rawCommit sends a hand-built OffsetCommit through cl (kgo routes it to
// the coordinator on the client's own connection) and returns the
// broker's error code for the partition.
func (c *Cluster) rawCommit(ctx context.Context, cl *kgo.Client, group, memberID string, gen int32, topic string, p int32, off int64) (int16, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	if ti := c.kf.TopicInfo(topic); ti != nil {
		rt.TopicID = ti.TopicID // OffsetCommit v10+ names topics by id
	}
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = p, off, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("offset commit: %w", err)
	}
	resp := kresp.(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("offset commit: answer has %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// waitFor polls cond every 20ms until it holds or ctx is done.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// fetchedBy returns how many records of topic/p the members of group
// reported reading (clientID "" for all members) since since.
func (c *Cluster) fetchedBy(group, clientID, topic string, p int32, since time.Time) int64 {
	c.groups.mu.Lock()
	defer c.groups.mu.Unlock()
	var n int64
	for _, r := range c.groups.reports {
		if r.Kind == "fetch" && r.Group == group && r.Topic == topic && r.Partition == p &&
			(clientID == "" || r.ClientID == clientID) && r.Nanos >= since.UnixNano() {
			n += r.Records
		}
	}
	return n
}

// committedNow is the broker's committed offset for group topic/p, or -1.
func (c *Cluster) committedNow(group, topic string, p int32) int64 {
	gi := c.kf.GroupInfo(group)
	if gi == nil {
		return -1
	}
	if oc, ok := gi.Commits[topic][p]; ok {
		return oc.Offset
	}
	return -1
}

func oneTopic(name string, parts int32) Options {
	return Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(parts, name)}}
}

// produceN produces n records of 60 bytes to topic in one batch per
// partition (kgo batches by partition).
func produceN(ctx context.Context, c *Cluster, clientID, topic string, from, n int) error {
	cl, err := c.Kgo(kgo.ClientID(clientID))
	if err != nil {
		return err
	}
	defer cl.Close()
	return produce(ctx, cl, topic, from, n, 60, n)
}

var hCommitRegression = Scenario{
	Name: "h_commit_regression",
	Doc: "hcr-group's only member reads 120 records of hcr-orders (1 partition), then commits offset 50 and then " +
		"offset 40 for partition 0 (kgo CommitOffsetsSync): both accepted, the committed offset goes backwards",
	Options: oneTopic("hcr-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hcr-orders", "hcr-group"
		if err := produceN(ctx, c, "hcr-producer", topic, 0, 120); err != nil {
			return err
		}
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "hcr-member", Group: group, Topics: []string{topic}, Commit: "none"})
		if err != nil {
			return err
		}
		if err := waitFor(ctx, "120 records read", func() bool { return c.fetchedBy(group, "", topic, 0, time.Time{}) >= 120 }); err != nil {
			return err
		}
		id, gen := m.cl.GroupMetadata()
		for _, off := range []int64{50, 40} {
			code, err := commitOne(ctx, m.cl, topic, 0, off)
			if err != nil || code != 0 {
				return fmt.Errorf("commit %d: code %d, %v", off, code, err)
			}
			sleepCtx(ctx, 300*time.Millisecond)
		}
		c.AddHazard(Hazard{Kind: "commit_regression", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hcr-member",
			Generation: i32(gen), Numbers: map[string]int64{"previous": 50, "committed": 40},
			Note: "accepted commit 40 after accepted commit 50 by the same member in the same generation: offsets 40..49 will be replayed"})
		m.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hCommitGap = Scenario{
	Name: "h_commit_gap",
	Doc: "field report 4's sequence: a child member of hcg-group reads records 0..31 of hcg-orders (1 partition) " +
		"and commits after each record (committed offset = offset + 1), except record 30; after record 31 it " +
		"commits 32 and is SIGKILLed; 20 more records arrive; once it expired, a successor resumes at 32: record 30 " +
		"was never processed",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(1, "hcg-orders")}},
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hcg-orders", "hcg-group"
		c.watchGroup(group)
		if err := produceN(ctx, c, "hcg-producer", topic, 0, 32); err != nil {
			return err
		}
		ch, err := startGChild(ctx, c, GMemberArgs{ClientID: "hcg-worker", Group: group, Topics: []string{topic},
			Commit: "record", SkipCommit: []int64{30}})
		if err != nil {
			return err
		}
		if err := waitFor(ctx, "commit 32", func() bool { return c.committedNow(group, topic, 0) == 32 }); err != nil {
			return err
		}
		id := c.scriptGone(group, "hcg-worker", CauseMemberExpired, 6*time.Second)
		_, gen := c.groups.lastGeneration(group, id)
		if err := ch.Kill(); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hcg-producer", topic, 32, 20); err != nil {
			return err
		}
		if _, err := c.kf.WaitGroupInfo(ctx, group, func(g *kfake.GroupInfo) bool { return g != nil && g.State == "Empty" }); err != nil {
			return fmt.Errorf("killed member never expired: %w", err)
		}
		if err := c.checkExpired(ctx, group, id, ReasonSessionTimeout); err != nil {
			return err
		}
		since := time.Now()
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "hcg-successor", Group: group, Topics: []string{topic}})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		read := c.fetchedBy(group, "hcg-successor", topic, 0, since)
		m.leave()
		c.AddHazard(Hazard{Kind: "commit_gap", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hcg-worker",
			Generation: i32(gen), Numbers: map[string]int64{"never_committed": 30, "committed_before": 30, "committed": 32,
				"successor_resumed_at": 32, "successor_fetched_records": read},
			Note: "commits 1..30 one record at a time, then 32: offset 30 was delivered and never committed; the successor resumed at 32"})
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id, ClientID: "hcg-worker", Generation: i32(gen),
			Reason: ReasonSessionTimeout, Numbers: map[string]int64{"session_timeout_ms": 6000}, Note: "SIGKILLed after committing 32; no LeaveGroup"})
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hCommitBeyondFetch = Scenario{
	Name: "h_commit_beyond_fetch",
	Doc: "hcb-group's only member reads the 100 records of hcb-orders (1 partition, high watermark 100), then " +
		"commits offset 500: accepted, above anything it was delivered and above the high watermark",
	Options: oneTopic("hcb-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hcb-orders", "hcb-group"
		if err := produceN(ctx, c, "hcb-producer", topic, 0, 100); err != nil {
			return err
		}
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "hcb-member", Group: group, Topics: []string{topic}, Commit: "none"})
		if err != nil {
			return err
		}
		if err := waitFor(ctx, "100 records read", func() bool { return c.fetchedBy(group, "", topic, 0, time.Time{}) >= 100 }); err != nil {
			return err
		}
		id, gen := m.cl.GroupMetadata()
		if code, err := commitOne(ctx, m.cl, topic, 0, 500); err != nil || code != 0 {
			return fmt.Errorf("commit 500: code %d, %v", code, err)
		}
		sleepCtx(ctx, 300*time.Millisecond)
		c.AddHazard(Hazard{Kind: "commit_beyond_fetch", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hcb-member",
			Generation: i32(gen), Numbers: map[string]int64{"committed": 500, "max_delivered_offset": 99, "high_watermark": 100},
			Note: "committed 500 after being delivered offsets 0..99 only"})
		m.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hCommitRejected = Scenario{
	Name: "h_commit_rejected",
	Doc: "hcj-group (range) on hcj-orders (2 partitions): member 1 reads and commits; member 2 joins (generation " +
		"2); member 1 then sends, on its own connection, a hand-built OffsetCommit for partition 0 with its old " +
		"generation 1 (ILLEGAL_GENERATION) and one with an unknown member id (UNKNOWN_MEMBER_ID): both lost",
	Options: oneTopic("hcj-orders", 2),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hcj-orders", "hcj-group"
		if err := produceN(ctx, c, "hcj-producer", topic, 0, 200); err != nil {
			return err
		}
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("hcj-member-%d", i), Group: group, Topics: []string{topic}, Balancers: []string{"range"}}
		}
		m1, err := startGMember(ctx, c, args(1))
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		id1, oldGen := m1.cl.GroupMetadata()
		m2, err := startGMember(ctx, c, args(2))
		if err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 2, 2)
		if err != nil {
			return err
		}
		committed := c.committedNow(group, topic, 0)
		for _, try := range []struct {
			member string
			gen    int32
			code   int16
		}{{id1, oldGen, 22}, {id1 + "-unknown", gi.Epoch, 25}} {
			off := committed + 10
			code, err := c.rawCommit(ctx, m1.cl, group, try.member, try.gen, topic, 0, off)
			if err != nil {
				return err
			}
			if code != try.code {
				return fmt.Errorf("raw commit by %s generation %d: error code %d, want %d", try.member, try.gen, code, try.code)
			}
			c.AddHazard(Hazard{Kind: "commit_rejected", Group: group, Topic: topic, Partition: i32(0), MemberID: try.member,
				ClientID: "hcj-member-1", Generation: i32(try.gen),
				Numbers: map[string]int64{"offset": off, "error_code": int64(code), "committed": committed, "current_generation": int64(gi.Epoch)},
				Note:    "OffsetCommit refused (" + strconv.Itoa(int(code)) + "): the commit is lost, the committed offset stays"})
			sleepCtx(ctx, 200*time.Millisecond)
		}
		m2.leave()
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
