package gen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var hRebalanceStorm = Scenario{
	Name: "h_rebalance_storm",
	Doc: "field report 3's loop: hrst-group (range, 3s rebalance timeout, 10s session) on hrst-orders (2 " +
		"partitions) while a producer writes; both members block rebalances while polling (kgo " +
		"BlockRebalanceOnPoll) and sleep 4s in the poll loop after each batch, longer than the rebalance timeout: " +
		"each rebalance drops whoever is busy (the broker's rebalance timeout: a member_expired each), who rejoins and " +
		"starts the next one; after ~12s the producer stops, polls come back empty, and the group settles",
	Options: oneTopic("hrst-orders", 2),
	Timeout: 60 * time.Second,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hrst-orders", "hrst-group"
		c.watchGroup(group)
		args := func(i int) GMemberArgs {
			return GMemberArgs{ClientID: fmt.Sprintf("hrst-member-%d", i), Group: group, Topics: []string{topic}, Balancers: []string{"range"},
				SessionTimeoutMillis: 10000, RebalanceTimeoutMillis: 3000, BlockRebalance: true, PollSleepMillis: 4000}
		}
		prod, err := startProducer(ctx, c, "hrst-producer", topic, 10, 60, 200*time.Millisecond)
		if err != nil {
			return err
		}
		busy := make(chan struct{}, 1)
		a1 := args(1)
		a1.OnRecords = func([]*kgo.Record) {
			select {
			case busy <- struct{}{}:
			default:
			}
		}
		m1, err := startGMember(ctx, c, a1)
		if err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 1, 2); err != nil {
			return err
		}
		select { // drop a stale signal: wait for a poll that starts sleeping now
		case <-busy:
		default:
		}
		select {
		case <-busy:
		case <-ctx.Done():
			return ctx.Err()
		}
		// Join once member 1 is well into its sleep: it cannot rejoin
		// within the rebalance timeout, so it is dropped, and from then
		// on each rejoin finds the other member asleep.
		sleepCtx(ctx, 700*time.Millisecond)
		start := time.Now()
		m2, err := startGMember(ctx, c, args(2))
		if err != nil {
			return err
		}
		sleepCtx(ctx, 12*time.Second)
		if err := prod.halt(); err != nil {
			return err
		}
		if _, err := c.waitStable(ctx, group, 2, 2); err != nil {
			return err
		}
		end := time.Now()
		first, last, n := c.groups.planRange(group, start, end)
		if n < 4 {
			return fmt.Errorf("only %d generations in the storm window: %w", n, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "rebalance_storm", Group: group, ClientID: "hrst-member-1,hrst-member-2",
			Numbers: map[string]int64{"first_generation": int64(first), "last_generation": int64(last), "generations": int64(n),
				"window_ms": end.Sub(start).Milliseconds(), "rebalance_timeout_ms": 3000, "poll_sleep_ms": 4000},
			Note: "members busy longer than the rebalance timeout are dropped from each rebalance and rejoin, starting the next one"})
		// Each drop, as the broker made it (see Cluster.expiries).
		es, notes := c.expiries(group)
		for _, n := range notes {
			c.Note("%s", n)
		}
		for _, e := range es {
			c.groups.script(group, CauseMemberExpired, e.MemberID, e.At)
			c.AddHazard(expiredHazard(group, e, map[string]int64{"poll_sleep_ms": 4000, "silent_ms": e.SilentMillis},
				"dropped by the broker: blocked in its poll loop past the rebalance timeout, still heartbeating"))
		}
		if c.rejectedCommits(group, start, "OffsetCommit refused by the broker after the member was dropped") == 0 {
			c.Note("h_rebalance_storm: the broker refused no OffsetCommit (its answers on the tap): no commit_rejected hazard")
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
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
	Attempts: 2,
}

var hInconsistentProtocol = Scenario{
	Name: "h_inconsistent_group_protocol",
	Doc: "hig-group's member uses the range assignor on hig-orders (2 partitions); a second kgo member offering " +
		"only roundrobin tries to join for 2s, as during a deploy that changes the assignor: every JoinGroup is " +
		"answered INCONSISTENT_GROUP_PROTOCOL",
	Options: oneTopic("hig-orders", 2),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hig-orders", "hig-group"
		var joins atomic.Int64
		c.OnFrame(func(_ *Conn, d Dir, f Frame) {
			if d == ToServer && f.Key == int16(kmsg.JoinGroup) && f.ClientID == "hig-member-2" {
				joins.Add(1)
			}
		})
		m1, err := startGMember(ctx, c, GMemberArgs{ClientID: "hig-member-1", Group: group, Topics: []string{topic}, Balancers: []string{"range"}})
		if err != nil {
			return err
		}
		gi, err := c.waitStable(ctx, group, 1, 2)
		if err != nil {
			return err
		}
		m2, err := startGMember(ctx, c, GMemberArgs{ClientID: "hig-member-2", Group: group, Topics: []string{topic}, Balancers: []string{"roundrobin"}})
		if err != nil {
			return err
		}
		sleepCtx(ctx, 2*time.Second)
		m2.stop()
		if joins.Load() == 0 {
			return fmt.Errorf("hig-member-2 sent no JoinGroup")
		}
		if gi2 := c.kf.GroupInfo(group); gi2 == nil || gi2.Epoch != gi.Epoch || len(gi2.Members) != 1 {
			return fmt.Errorf("the roundrobin member changed the group: %+v", gi2)
		}
		c.AddHazard(Hazard{Kind: "inconsistent_group_protocol", Group: group, ClientID: "hig-member-2",
			Numbers: map[string]int64{"error_code": int64(kerr.InconsistentGroupProtocol.Code), "join_attempts": joins.Load()},
			Note:    "offers only roundrobin; the group's members use range"})
		m1.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hOffsetReset = Scenario{
	Name: "h_offset_reset",
	Doc: "hor-orders (1 partition): hor-lagging reads and commits 50 records and stops; 150 more arrive and an " +
		"admin client deletes records below 150 (DeleteRecords); hor-lagging's next member fetches at 50, gets " +
		"OFFSET_OUT_OF_RANGE, asks ListOffsets for the earliest offset and resumes at 150 (100 records skipped); " +
		"hor-fresh, with no committed offset and reset to latest, starts at 200 and reads 20 new records",
	Options: oneTopic("hor-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic = "hor-orders"
		var mu sync.Mutex
		firsts := map[string]int64{}
		first := func(name string) func([]*kgo.Record) {
			return func(rs []*kgo.Record) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := firsts[name]; !ok {
					firsts[name] = rs[0].Offset
				}
			}
		}
		if err := produceN(ctx, c, "hor-producer", topic, 0, 50); err != nil {
			return err
		}
		m1, err := startGMember(ctx, c, GMemberArgs{ClientID: "hor-member-1", Group: "hor-lagging", Topics: []string{topic}})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, "hor-lagging", topic); err != nil {
			return err
		}
		m1.leave()
		// Two batches, so that the deletion ends at a batch boundary.
		if err := produceN(ctx, c, "hor-producer", topic, 50, 100); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hor-producer", topic, 150, 50); err != nil {
			return err
		}
		if err := deleteRecords(ctx, c, topic, 0, 150); err != nil {
			return err
		}
		m2, err := startGMember(ctx, c, GMemberArgs{ClientID: "hor-member-2", Group: "hor-lagging", Topics: []string{topic},
			OnRecords: first("hor-member-2")})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, "hor-lagging", topic); err != nil {
			return err
		}
		id2, gen2 := m2.cl.GroupMetadata()
		m3, err := startGMember(ctx, c, GMemberArgs{ClientID: "hor-member-3", Group: "hor-fresh", Topics: []string{topic},
			ResetLatest: true, OnRecords: first("hor-member-3")})
		if err != nil {
			return err
		}
		if err := m3.waitAssigned(ctx); err != nil {
			return err
		}
		// kgo resets lazily: give it time to list the end offset before
		// new records exist.
		sleepCtx(ctx, time.Second)
		if err := produceN(ctx, c, "hor-producer", topic, 200, 20); err != nil {
			return err
		}
		for _, g := range []string{"hor-lagging", "hor-fresh"} {
			if err := c.waitCaughtUp(ctx, g, topic); err != nil {
				return err
			}
		}
		id3, gen3 := m3.cl.GroupMetadata()
		mu.Lock()
		f2, f3 := firsts["hor-member-2"], firsts["hor-member-3"]
		mu.Unlock()
		if f2 != 150 || f3 != 200 {
			return fmt.Errorf("first offsets read: hor-member-2 %d (want 150), hor-member-3 %d (want 200)", f2, f3)
		}
		c.AddHazard(Hazard{Kind: "offset_reset", Group: "hor-lagging", Topic: topic, Partition: i32(0), MemberID: id2, ClientID: "hor-member-2",
			Generation: i32(gen2), Numbers: map[string]int64{"from": 50, "to": 150, "skipped": 100, "log_start_offset": 150},
			Note: "committed 50 was deleted under the group: OFFSET_OUT_OF_RANGE, ListOffsets earliest, resumed at 150"})
		c.AddHazard(Hazard{Kind: "offset_reset", Group: "hor-fresh", Topic: topic, Partition: i32(0), MemberID: id3, ClientID: "hor-member-3",
			Generation: i32(gen3), Numbers: map[string]int64{"from": -1, "to": 200, "skipped": 50},
			Note: "no committed offset: reset to latest (ListOffsets -1) skipped the 50 records 150..199 still in the log"})
		m2.leave()
		m3.leave()
		if err := c.RecordGroups(ctx, "hor-lagging", "hor-fresh"); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

// deleteRecords sends DeleteRecords from an admin client (in the capture).
func deleteRecords(ctx context.Context, c *Cluster, topic string, p int32, before int64) error {
	cl, err := c.Kgo(kgo.ClientID("kwire-gen-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, before
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("delete records: %w", err)
	}
	for _, t := range kresp.(*kmsg.DeleteRecordsResponse).Topics {
		for _, pr := range t.Partitions {
			if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
				return fmt.Errorf("delete records %s/%d: %w", t.Topic, pr.Partition, err)
			}
		}
	}
	return nil
}

var hProducerAcksWeak = Scenario{
	Name: "h_producer_acks_weak",
	Doc: "three kgo producers write 100 records each to hpa-orders (3 partitions): hpa-acks0 with acks=0 (no " +
		"responses), hpa-acks1 with acks=1 (leader only), hpa-acksall with acks=-1 (idempotent, the safe " +
		"default); a group-less consumer then reads all 300",
	Options: oneTopic("hpa-orders", 3),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic = "hpa-orders"
		for i, p := range []struct {
			name string
			acks kgo.Acks
			n    int64
		}{{"hpa-acks0", kgo.NoAck(), 0}, {"hpa-acks1", kgo.LeaderAck(), 1}, {"hpa-acksall", kgo.AllISRAcks(), -1}} {
			opts := []kgo.Opt{kgo.ClientID(p.name), kgo.RequiredAcks(p.acks)}
			if p.n != -1 {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
			cl, err := c.Kgo(opts...)
			if err != nil {
				return err
			}
			err = produce(ctx, cl, topic, i*1000, 100, 60, 25)
			cl.Close()
			if err != nil {
				return err
			}
			if p.n != -1 {
				c.AddHazard(Hazard{Kind: "producer_acks_weak", Topic: topic, ClientID: p.name,
					Numbers: map[string]int64{"acks": p.n, "records": 100},
					Note:    fmt.Sprintf("every Produce request of %s carries acks=%d", p.name, p.n)})
			}
		}
		if err := consumeAll(ctx, c, "hpa-reader", 300, nil, topic); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hClientIDChurn = Scenario{
	Name: "h_client_id_churn",
	Doc: "field report 2's broker OOM: one host creates 40 short-lived kgo consumers in a row, each with a new " +
		"auto-generated-style client id consumer-hcc-1..40 (as Java's consumer-<group>-<n>), each reading " +
		"hcc-orders (1 partition) from the start until it has a record, then closing",
	Options: oneTopic("hcc-orders", 1),
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, n = "hcc-orders", 40
		if err := produceN(ctx, c, "hcc-producer", topic, 0, 20); err != nil {
			return err
		}
		start := time.Now()
		for i := 1; i <= n; i++ {
			cl, err := c.Kgo(kgo.ClientID(fmt.Sprintf("consumer-hcc-%d", i)),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
				kgo.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				return err
			}
			for got := 0; got == 0 && ctx.Err() == nil; {
				got = len(cl.PollFetches(ctx).Records())
			}
			cl.Close()
		}
		window := time.Since(start)
		c.AddHazard(Hazard{Kind: "client_id_churn", ClientID: "consumer-hcc-*",
			Numbers: map[string]int64{"distinct_client_ids": n, "window_ms": window.Milliseconds()},
			Note:    "40 distinct client ids from 127.0.0.1, one short-lived consumer after another"})
		return c.RecordEndOffsets(ctx, topic)
	},
}
