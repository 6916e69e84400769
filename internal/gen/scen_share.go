package gen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932, queues for Kafka) against kfake: kgo share
// consumers (kgo.ShareGroup) that ShareGroupHeartbeat, ShareFetch (acquiring
// records under an acquisition lock, with a delivery count) and acknowledge
// them (accept, release, reject) on their next ShareFetch or in a
// ShareAcknowledge.
func init() {
	for _, s := range []Scenario{shareClean, hShareRedelivery, hShareAckLost, hShareExpired} {
		Register(s)
	}
	RegisterChild("share-member", childShareMember)
}

// shareOpts is a cluster with topic and the broker's share group settings
// (KIP-932 group.share.*, not on the wire): heartbeats every 500ms and
// more.
func shareOpts(topic string, parts int32, more map[string]string) Options {
	cfg := map[string]string{"group.share.heartbeat.interval.ms": "500"}
	for k, v := range more {
		cfg[k] = v
	}
	return Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(parts, topic), kfake.BrokerConfigs(cfg)}}
}

// shareEarliest sets the share group's share.auto.offset.reset to earliest
// (IncrementalAlterConfigs on the GROUP resource, in the capture), so the
// group reads records written before it joined.
func (c *Cluster) shareEarliest(ctx context.Context, group string) error {
	cl, err := c.truthClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("set %s share.auto.offset.reset: %w", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("set %s share.auto.offset.reset: %w", group, err)
		}
	}
	return nil
}

// shareClient returns a kgo share consumer of group on topics.
func shareClient(c *Cluster, clientID, group string, topics ...string) (*kgo.Client, error) {
	return c.Kgo(kgo.ClientID(clientID), kgo.ShareGroup(group), kgo.ConsumeTopics(topics...))
}

// shareDone accepts every record of cl's last poll, flushes the acks and
// closes cl (which leaves the group): records still unacknowledged at
// Close would be released back to the group instead.
func shareDone(ctx context.Context, cl *kgo.Client) error {
	cl.MarkAcks(kgo.AckAccept)
	err := cl.FlushAcks(ctx)
	cl.Close()
	return err
}

// shareAcquisition is one acquired-records range of a ShareFetch answer on
// the tap.
type shareAcquisition struct {
	at            time.Time
	clientID      string
	member        string
	partition     int32
	first, last   int64
	deliveryCount int16
	lockMillis    int32
}

// shareAcquisitions returns, in order, the acquired-records ranges the
// broker gave group's members in ShareFetch answers on the tap.
func (c *Cluster) shareAcquisitions(group string) []shareAcquisition {
	var out []shareAcquisition
	for _, x := range c.tapExchanges(int16(kmsg.ShareFetch)) {
		req, _ := x.Req.(*kmsg.ShareFetchRequest)
		resp, _ := x.Resp.(*kmsg.ShareFetchResponse)
		if req == nil || resp == nil || req.GroupID == nil || *req.GroupID != group || req.MemberID == nil {
			continue
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				for _, a := range p.AcquiredRecords {
					out = append(out, shareAcquisition{at: x.RespTime, clientID: x.ClientID, member: *req.MemberID,
						partition: p.Partition, first: a.FirstOffset, last: a.LastOffset, deliveryCount: a.DeliveryCount,
						lockMillis: resp.AcquisitionLockTimeoutMillis})
				}
			}
		}
	}
	return out
}

// shareAcks counts, per acknowledge type, the offsets group's members
// acknowledged in ShareFetch and ShareAcknowledge requests on the tap.
func (c *Cluster) shareAcks(group string) map[int8]int64 {
	out := map[int8]int64{}
	add := func(first, last int64, types []int8) {
		for o := first; o <= last; o++ {
			switch {
			case len(types) == 1:
				out[types[0]]++
			case int(o-first) < len(types):
				out[types[o-first]]++
			}
		}
	}
	for _, x := range c.tapExchanges(int16(kmsg.ShareFetch), int16(kmsg.ShareAcknowledge)) {
		switch req := x.Req.(type) {
		case *kmsg.ShareFetchRequest:
			if req.GroupID == nil || *req.GroupID != group {
				continue
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					for _, b := range p.AcknowledgementBatches {
						add(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
					}
				}
			}
		case *kmsg.ShareAcknowledgeRequest:
			if req.GroupID == nil || *req.GroupID != group {
				continue
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					for _, b := range p.AcknowledgementBatches {
						add(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
					}
				}
			}
		}
	}
	return out
}

// consumeShare polls cl until done is closed, accepting each poll's
// records on the next poll (kgo's default), and counts them in n.
func consumeShare(ctx context.Context, cl *kgo.Client, n *atomic.Int64, done <-chan struct{}) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-pctx.Done():
		}
	}()
	for pctx.Err() == nil {
		fs := cl.PollFetches(pctx)
		if fs.IsClientClosed() {
			return
		}
		n.Add(int64(len(fs.Records())))
	}
}

var shareClean = Scenario{
	Name: "share_clean",
	Doc: "a share group shc-group (KIP-932, broker share heartbeat interval 500ms, share.auto.offset.reset earliest) " +
		"on shc-orders (2 partitions): two kgo share consumers, shc-consumer-1 and shc-consumer-2, read 60 records " +
		"between them, accepting every record; each accepts its last poll, flushes its acks and leaves: nothing above " +
		"info is a hazard",
	Options:  shareOpts("shc-orders", 2, nil),
	Timeout:  45 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, total = "shc-orders", "shc-group", 60
		if err := c.shareEarliest(ctx, group); err != nil {
			return err
		}
		if err := produceN(ctx, c, "shc-producer", topic, 0, total/2); err != nil {
			return err
		}
		var n atomic.Int64
		done := make(chan struct{})
		var wg sync.WaitGroup
		var cls []*kgo.Client
		for i := 1; i <= 2; i++ {
			cl, err := shareClient(c, fmt.Sprintf("shc-consumer-%d", i), group, topic)
			if err != nil {
				return err
			}
			cls = append(cls, cl)
			wg.Add(1)
			go func() { defer wg.Done(); consumeShare(ctx, cl, &n, done) }()
			sleepCtx(ctx, time.Second) // one member at a time: a fixed sequence of epochs
		}
		if err := produceN(ctx, c, "shc-producer", topic, total/2, total/2); err != nil {
			return err
		}
		err := waitFor(ctx, "the share consumers to read every record", func() bool { return n.Load() >= total })
		close(done)
		wg.Wait()
		if err != nil {
			return err
		}
		for _, cl := range cls {
			if err := shareDone(ctx, cl); err != nil {
				return fmt.Errorf("share consumer flush: %w", err)
			}
		}
		acks := c.shareAcks(group)
		c.Note("share_clean: the consumers read %d records; acknowledgements on the tap: %d accept, %d release, %d reject",
			n.Load(), acks[1], acks[2], acks[3])
		if acks[2] > 0 || acks[3] > 0 {
			return fmt.Errorf("records released or rejected in a clean run (%v): %w", acks, ErrRetry)
		}
		for _, a := range c.shareAcquisitions(group) {
			if a.deliveryCount > 1 {
				return fmt.Errorf("offsets %d-%d of partition %d delivered %d times in a clean run: %w",
					a.first, a.last, a.partition, a.deliveryCount, ErrRetry)
			}
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hShareRedelivery = Scenario{
	Name: "h_share_redelivery",
	Doc: "a share group hsr-group (broker share delivery count limit 5) on hsr-orders (1 partition): its one " +
		"consumer, hsr-consumer, accepts every record but the poison one (key k3), which it releases each time it is " +
		"delivered: the broker delivers it again with its delivery count one higher, 5 times, then archives it " +
		"(never processed)",
	Options:  shareOpts("hsr-orders", 1, map[string]string{"group.share.delivery.count.limit": "5"}),
	Timeout:  45 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group, limit = "hsr-orders", "hsr-group", 5
		if err := c.shareEarliest(ctx, group); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsr-producer", topic, 0, 10); err != nil {
			return err
		}
		cl, err := shareClient(c, "hsr-consumer", group, topic)
		if err != nil {
			return err
		}
		poison, maxCount := int64(-1), int32(0)
		for maxCount < limit {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			for _, r := range fs.Records() {
				if string(r.Key) != "k3" {
					r.Ack(kgo.AckAccept)
					continue
				}
				poison, maxCount = r.Offset, max(maxCount, r.DeliveryCount())
				r.Ack(kgo.AckRelease)
			}
		}
		// The last release goes out with the next ShareFetch; the broker
		// archives the record instead of delivering it a sixth time.
		if err := cl.FlushAcks(ctx); err != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
		if err := shareDone(ctx, cl); err != nil {
			return err
		}
		deliveries := 0
		for _, a := range c.shareAcquisitions(group) {
			if a.first <= poison && poison <= a.last {
				deliveries++
			}
		}
		c.Note("h_share_redelivery: the poison record (offset %d) was delivered %d times on the tap, the client saw delivery count %d",
			poison, deliveries, maxCount)
		if deliveries != limit {
			return fmt.Errorf("the poison record was delivered %d times, not %d: %w", deliveries, limit, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "share_redelivery", Group: group, Topic: topic, Partition: i32(0), ClientID: "hsr-consumer",
			Numbers: map[string]int64{"offset": poison},
			Note: fmt.Sprintf("the consumer released the record each of the %d times it was delivered (ShareFetch acquired "+
				"records with delivery counts 1..%d); kfake archived it at the limit", limit, limit)})
		return c.RecordEndOffsets(ctx, topic)
	},
}

// ShareMemberArgs are the arguments of the share-member child.
type ShareMemberArgs struct {
	ClientID string   `json:"client_id"`
	Group    string   `json:"group"`
	Topics   []string `json:"topics"`
	// Hold: after the first poll that returned records, report ready and
	// poll no more (processing stuck): nothing is acknowledged. Otherwise
	// report ready then and go on consuming, accepting every record.
	Hold bool `json:"hold,omitempty"`
}

// childShareMember runs one kgo share consumer until SIGTERM or its
// deadline. Kill it to model a crash, Stop it to model a long pause.
func childShareMember(ctx context.Context, env *ChildEnv) error {
	var a ShareMemberArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	cl, err := env.Kgo(kgo.ClientID(a.ClientID), kgo.ShareGroup(a.Group), kgo.ConsumeTopics(a.Topics...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ready := false
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		if len(fs.Records()) == 0 || ready {
			continue
		}
		ready = true
		env.Ready()
		if a.Hold {
			<-ctx.Done()
		}
	}
	return nil
}

// startShareChild starts a share-member child and waits until it read
// records.
func startShareChild(ctx context.Context, c *Cluster, a ShareMemberArgs) (*Child, error) {
	return c.startReady(ctx, "share-member", a, "share member "+a.ClientID, "reading records")
}

var hShareAckLost = Scenario{
	Name: "h_share_ack_lost",
	Doc: "a share group hsa-group (broker acquisition lock 3s, swept every 200ms) on hsa-orders (1 partition, 20 " +
		"records): hsa-stuck, a share consumer in a child, acquires records in a ShareFetch and is SIGSTOPped before " +
		"it acknowledges any (a stuck poll loop); the lock runs out, the broker releases them, and hsa-consumer " +
		"acquires them again (delivery count 2) and accepts them; hsa-stuck is then SIGKILLed",
	Options: shareOpts("hsa-orders", 1, map[string]string{
		"group.share.record.lock.duration.ms": "3000",
		"share.record.lock.sweep.interval.ms": "200",
	}),
	Timeout:  45 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hsa-orders", "hsa-group"
		if err := c.shareEarliest(ctx, group); err != nil {
			return err
		}
		if err := produceN(ctx, c, "hsa-producer", topic, 0, 20); err != nil {
			return err
		}
		ch, err := startShareChild(ctx, c, ShareMemberArgs{ClientID: "hsa-stuck", Group: group, Topics: []string{topic}, Hold: true})
		if err != nil {
			return err
		}
		if err := ch.Stop(); err != nil {
			return err
		}
		stopped := time.Now()
		cl, err := shareClient(c, "hsa-consumer", group, topic)
		if err != nil {
			return err
		}
		var n atomic.Int64
		done := make(chan struct{})
		go func() {
			_ = waitFor(ctx, "hsa-consumer to read every record", func() bool { return n.Load() >= 20 })
			close(done)
		}()
		consumeShare(ctx, cl, &n, done)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := shareDone(ctx, cl); err != nil {
			return err
		}
		if err := ch.Kill(); err != nil {
			return err
		}
		_ = ch.Wait(ctx)
		var lost *shareAcquisition
		redelivered := 0
		for _, a := range c.shareAcquisitions(group) {
			if a.clientID == "hsa-stuck" && lost == nil {
				lost = &a
			}
			if a.clientID == "hsa-consumer" && a.deliveryCount > 1 {
				redelivered++
			}
		}
		switch {
		case lost == nil:
			return fmt.Errorf("hsa-stuck acquired nothing on the tap: %w", ErrRetry)
		case lost.at.After(stopped):
			return errors.New("hsa-stuck acquired records after it was stopped")
		case redelivered == 0:
			return fmt.Errorf("hsa-consumer got no record again after the lock timeout: %w", ErrRetry)
		}
		c.Note("h_share_ack_lost: hsa-stuck (member %s) acquired offsets %d-%d (lock %dms) and acknowledged nothing; "+
			"hsa-consumer acquired records again with delivery count > 1 in %d ranges", lost.member, lost.first, lost.last,
			lost.lockMillis, redelivered)
		c.AddHazard(Hazard{Kind: "share_ack_lost", Group: group, Topic: topic, Partition: i32(0), MemberID: lost.member,
			ClientID: "hsa-stuck", Numbers: map[string]int64{"first_offset": lost.first, "acquisition_lock_timeout_ms": int64(lost.lockMillis)},
			Note: "SIGSTOPped after acquiring records and before acknowledging them: the broker's 3s acquisition lock ran out"})
		return c.RecordEndOffsets(ctx, topic)
	},
}

var hShareExpired = Scenario{
	Name: "h_share_expired",
	Doc: "a share group hsx-group (broker share session timeout 6s, heartbeat interval 500ms) on hsx-orders (2 " +
		"partitions): hsx-member-1 in process and hsx-member-2 in a child share the partitions; member 2 is " +
		"SIGKILLed (no leaving heartbeat); the broker fences it after 6s and member 1 gets both partitions at a new " +
		"epoch and reads 20 more records",
	Options:  shareOpts("hsx-orders", 2, map[string]string{"group.share.session.timeout.ms": "6000"}),
	Timeout:  60 * time.Second,
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hsx-orders", "hsx-group"
		duo, err := startShareDuo(ctx, c, "hsx", topic, group)
		if err != nil {
			return err
		}
		m1, n, done, wg, ch, id2, epoch := duo.m1, &duo.n, duo.done, &duo.wg, duo.ch, duo.id2, duo.epoch
		killed := time.Now()
		if err := ch.Kill(); err != nil {
			return err
		}
		_ = ch.Wait(ctx)
		err = waitFor(ctx, "hsx-member-1 to own both partitions", func() bool { return c.shareOwnsAll(group, "hsx-member-1", 2, killed) })
		if err != nil {
			return err
		}
		took := time.Since(killed)
		before := n.Load()
		if err := produceN(ctx, c, "hsx-producer", topic, 1000, 20); err != nil {
			return err
		}
		if err := waitFor(ctx, "hsx-member-1 to read the new records", func() bool { return n.Load() >= before+20 }); err != nil {
			return err
		}
		close(done)
		wg.Wait()
		if err := shareDone(ctx, m1); err != nil {
			return err
		}
		c.Note("h_share_expired: hsx-member-2 (member %s, epoch %d) SIGKILLed; hsx-member-1's heartbeat was answered with "+
			"both partitions %v later", id2, epoch, took.Round(time.Millisecond))
		if took < 5*time.Second {
			return fmt.Errorf("member 1 got member 2's partition %v after the kill, before the 6s session timeout: %w", took, ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "member_expired", Group: group, MemberID: id2, ClientID: "hsx-member-2", Reason: ReasonSessionTimeout,
			Note: "SIGKILLed: no heartbeat; kfake fenced it at the share session timeout (group.share.session.timeout.ms 6s, not on the wire)"})
		return c.RecordEndOffsets(ctx, topic)
	},
}

// shareMemberOf returns the member id and epoch of client's latest
// accepted ShareGroupHeartbeat of group on the tap.
func (c *Cluster) shareMemberOf(group, client string) (string, int32) {
	var id string
	var epoch int32
	for _, x := range c.tapExchanges(int16(kmsg.ShareGroupHeartbeat)) {
		req, _ := x.Req.(*kmsg.ShareGroupHeartbeatRequest)
		resp, _ := x.Resp.(*kmsg.ShareGroupHeartbeatResponse)
		if req == nil || resp == nil || req.GroupID != group || x.ClientID != client || resp.ErrorCode != 0 || resp.MemberID == nil {
			continue
		}
		id, epoch = *resp.MemberID, resp.MemberEpoch
	}
	return id, epoch
}

// shareOwnsAll reports whether a ShareGroupHeartbeat answer to client after
// since assigned it parts partitions.
func (c *Cluster) shareOwnsAll(group, client string, parts int, since time.Time) bool {
	for _, x := range c.tapExchanges(int16(kmsg.ShareGroupHeartbeat)) {
		req, _ := x.Req.(*kmsg.ShareGroupHeartbeatRequest)
		resp, _ := x.Resp.(*kmsg.ShareGroupHeartbeatResponse)
		if req == nil || resp == nil || req.GroupID != group || x.ClientID != client || x.ReqTime.Before(since) || resp.Assignment == nil {
			continue
		}
		n := 0
		for _, t := range resp.Assignment.TopicPartitions {
			n += len(t.Partitions)
		}
		if n == parts {
			return true
		}
	}
	return false
}

// ShareTruth is one share group's records as the broker's answers on the
// tap show them, per topic and partition (decimal).
type ShareTruth struct {
	Partitions map[string]map[string]*ShareCounts `json:"partitions"`
}

// ShareCounts count a share group partition's records: Acquired every
// record a ShareFetch answer acquired (Redelivered those with a delivery
// count above 1, MaxDeliveryCount the highest count); Accepted, Released
// and Rejected the acknowledgements (ShareFetch, ShareAcknowledge) the
// broker answered without error for the partition.
type ShareCounts struct {
	Acquired         int64 `json:"acquired"`
	Redelivered      int64 `json:"redelivered"`
	Accepted         int64 `json:"accepted"`
	Released         int64 `json:"released"`
	Rejected         int64 `json:"rejected"`
	MaxDeliveryCount int16 `json:"max_delivery_count"`
}

// shareTruth counts the records of every share group on the tap (nil:
// none), naming topic ids from the Metadata answers on the tap.
func (c *Cluster) shareTruth() map[string]*ShareTruth {
	names := map[[16]byte]string{}
	for _, x := range c.tapExchanges(int16(kmsg.Metadata)) {
		if r, ok := x.Resp.(*kmsg.MetadataResponse); ok {
			for _, t := range r.Topics {
				if t.Topic != nil {
					names[t.TopicID] = *t.Topic
				}
			}
		}
	}
	out := map[string]*ShareTruth{}
	part := func(group string, id [16]byte, p int32) *ShareCounts {
		g := out[group]
		if g == nil {
			g = &ShareTruth{Partitions: map[string]map[string]*ShareCounts{}}
			out[group] = g
		}
		topic := names[id]
		if topic == "" {
			topic = fmt.Sprintf("id:%x", id)
		}
		ps := sub(g.Partitions, topic)
		k := fmt.Sprint(p)
		if ps[k] == nil {
			ps[k] = &ShareCounts{}
		}
		return ps[k]
	}
	ack := func(sc *ShareCounts, first, last int64, types []int8) {
		if len(types) > 1 && int64(len(types)) != last-first+1 {
			return // refused by the broker (INVALID_REQUEST)
		}
		for o := first; o <= last; o++ {
			t := types[0]
			if len(types) > 1 {
				t = types[o-first]
			}
			switch t {
			case 1:
				sc.Accepted++
			case 2:
				sc.Released++
			case 3:
				sc.Rejected++
			}
		}
	}
	for _, x := range c.tapExchanges(int16(kmsg.ShareFetch), int16(kmsg.ShareAcknowledge)) {
		switch req := x.Req.(type) {
		case *kmsg.ShareFetchRequest:
			resp, _ := x.Resp.(*kmsg.ShareFetchResponse)
			if req.GroupID == nil || resp == nil || resp.ErrorCode != 0 {
				continue
			}
			ok := map[string]bool{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					ok[fmt.Sprint(t.TopicID, p.Partition)] = p.AcknowledgeErrorCode == 0
					sc := part(*req.GroupID, t.TopicID, p.Partition)
					for _, a := range p.AcquiredRecords {
						n := a.LastOffset - a.FirstOffset + 1
						sc.Acquired += n
						if a.DeliveryCount > 1 {
							sc.Redelivered += n
						}
						sc.MaxDeliveryCount = max(sc.MaxDeliveryCount, a.DeliveryCount)
					}
				}
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					for _, b := range p.AcknowledgementBatches {
						if ok[fmt.Sprint(t.TopicID, p.Partition)] && len(b.AcknowledgeTypes) > 0 {
							ack(part(*req.GroupID, t.TopicID, p.Partition), b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
						}
					}
				}
			}
		case *kmsg.ShareAcknowledgeRequest:
			resp, _ := x.Resp.(*kmsg.ShareAcknowledgeResponse)
			if req.GroupID == nil || resp == nil || resp.ErrorCode != 0 {
				continue
			}
			ok := map[string]bool{}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					ok[fmt.Sprint(t.TopicID, p.Partition)] = p.ErrorCode == 0
				}
			}
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					for _, b := range p.AcknowledgementBatches {
						if ok[fmt.Sprint(t.TopicID, p.Partition)] && len(b.AcknowledgeTypes) > 0 {
							ack(part(*req.GroupID, t.TopicID, p.Partition), b.FirstOffset, b.LastOffset, b.AcknowledgeTypes)
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// shareDuo is two members of a share group sharing its partitions:
// <prefix>-member-1 consuming in process (n counts its records; close
// done, then wait wg, to stop it) and <prefix>-member-2 in a child (ch),
// its member id and epoch as the tap saw them accepted.
type shareDuo struct {
	m1    *kgo.Client
	n     atomic.Int64
	done  chan struct{}
	wg    sync.WaitGroup
	ch    *Child
	id2   string
	epoch int32
}

// startShareDuo writes 40 records to topic and starts the two members of
// group: member 1 first; then member 2, while more records are written, a
// few at a time, until it has read some of its share (member 1 holds what
// was written before); then both consume for a few heartbeats.
func startShareDuo(ctx context.Context, c *Cluster, prefix, topic, group string) (*shareDuo, error) {
	if err := c.shareEarliest(ctx, group); err != nil {
		return nil, err
	}
	if err := produceN(ctx, c, prefix+"-producer", topic, 0, 40); err != nil {
		return nil, err
	}
	m1, err := shareClient(c, prefix+"-member-1", group, topic)
	if err != nil {
		return nil, err
	}
	d := &shareDuo{m1: m1, done: make(chan struct{})}
	d.wg.Add(1)
	go func() { defer d.wg.Done(); consumeShare(ctx, m1, &d.n, d.done) }()
	if err := waitFor(ctx, prefix+"-member-1 to read", func() bool { return d.n.Load() > 0 }); err != nil {
		return nil, err
	}
	if d.ch, err = c.StartChild(ctx, "share-member", ShareMemberArgs{ClientID: prefix + "-member-2", Group: group, Topics: []string{topic}}); err != nil {
		return nil, err
	}
	for from := 40; ; from += 4 {
		if err := produceN(ctx, c, prefix+"-producer", topic, from, 4); err != nil {
			return nil, err
		}
		select {
		case <-d.ch.Ready():
		case <-d.ch.Done():
			return nil, fmt.Errorf("share member %s-member-2 exited before reading records: %v", prefix, d.ch.err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
			continue
		}
		break
	}
	sleepCtx(ctx, 1500*time.Millisecond)
	if d.id2, d.epoch = c.shareMemberOf(group, prefix+"-member-2"); d.id2 == "" {
		return nil, fmt.Errorf("no accepted heartbeat of %s-member-2 on the tap: %w", prefix, ErrRetry)
	}
	return d, nil
}
