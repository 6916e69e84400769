package gen

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var newestScenario = Scenario{
	Name: "newest",
	Doc: "every newest version kfake advertises: a transactional kgo producer commits two transactions of 200 " +
		"records and aborts one of 50 on events (4 partitions); a KIP-848 group events-848 (ConsumerGroupHeartbeat, " +
		"server-side assignor) grows to 2 members one at a time, reads committed records and commits; an admin " +
		"client sends DescribeCluster, DescribeConfigs, ListGroups, ConsumerGroupDescribe, DescribeTopicPartitions",
	Options: Options{
		Link: LinkEthernet,
		Kfake: []kfake.Opt{
			kfake.SeedTopics(4, "events"),
			kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "500"}),
		},
	},
	Run: runNewest,
}

func runNewest(ctx context.Context, c *Cluster) error {
	const topic, group = "events", "events-848"
	txn, err := c.Kgo(kgo.ClientID("txn-producer"), kgo.TransactionalID("kwire-txn"), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	committed := 0
	for i, t := range []struct {
		n      int
		commit bool
	}{{200, true}, {50, false}, {200, true}} {
		if err := txn.BeginTransaction(); err != nil {
			return err
		}
		if err := produce(ctx, txn, topic, i*1000, t.n, 120, 50); err != nil {
			return err
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(t.commit)); err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		if t.commit {
			committed += t.n
		}
	}
	txn.Close()

	prog := newProgress(committed)
	var members []*member
	for i := range 2 {
		opts := append(groupOpts(fmt.Sprintf("events-member-%d", i+1), group, topic),
			kgo.ServerSideBalancer(), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		m, err := startMember(ctx, c, prog, opts...)
		if err != nil {
			return err
		}
		members = append(members, m)
		if err := m.waitAssigned(ctx); err != nil {
			return err
		}
	}
	if err := prog.wait(ctx, "kip-848 consume"); err != nil {
		return err
	}
	if err := adminRequests(ctx, c, topic, group); err != nil {
		return err
	}
	for i := len(members) - 1; i >= 0; i-- {
		members[i].stop()
	}
	reqs := c.BrokerRequests()
	if reqs["ConsumerGroupHeartbeat"] > 0 && reqs["JoinGroup"] == 0 {
		c.Note("KIP-848: the group ran the consumer protocol (%d ConsumerGroupHeartbeat, no JoinGroup)", reqs["ConsumerGroupHeartbeat"])
	} else {
		c.Note("KIP-848: NOT used (%d ConsumerGroupHeartbeat, %d JoinGroup)", reqs["ConsumerGroupHeartbeat"], reqs["JoinGroup"])
	}
	if err := noteVersions(ctx, c); err != nil {
		return err
	}
	c.Note("produced counts the 50 records of the aborted transaction too; end offsets count one control record " +
		"(commit or abort marker) per transaction per partition it touched, so committed offsets can sit below them")
	if err := c.RecordCommitted(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

// adminRequests sends a few admin requests, at the newest versions, the
// way a monitoring tool would.
func adminRequests(ctx context.Context, c *Cluster, topic, group string) error {
	cl, err := c.Kgo(kgo.ClientID("kwire-gen-admin"))
	if err != nil {
		return err
	}
	defer cl.Close()

	dc := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	dc.Resources = append(dc.Resources, r)

	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{group}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	t := kmsg.NewDescribeTopicPartitionsRequestTopic()
	t.Topic = topic
	dtp.Topics = append(dtp.Topics, t)
	dtp.ResponsePartitionLimit = 100

	for _, req := range []kmsg.Request{kmsg.NewPtrDescribeClusterRequest(), dc, kmsg.NewPtrListGroupsRequest(), cgd, dtp} {
		if _, err := cl.Request(ctx, req); err != nil {
			return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	return nil
}

// noteVersions notes, for every API on the wire so far, the highest version
// used and whether it is the highest kfake advertises (from an ApiVersions
// request; kgo uses min(its own, the broker's) maximum).
func noteVersions(ctx context.Context, c *Cluster) error {
	cl, err := c.truthClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	kresp, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	advertised := map[int16]int16{}
	for _, k := range kresp.(*kmsg.ApiVersionsResponse).ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	used := map[int16]int16{}
	for _, conn := range c.Conns() {
		c.rec.mu.Lock()
		for _, f := range conn.framers[ToServer].frames {
			if v, ok := used[f.Key]; !ok || f.Version > v {
				used[f.Key] = f.Version
			}
		}
		c.rec.mu.Unlock()
	}
	var newest, older []string
	for _, k := range slices.Sorted(maps.Keys(used)) {
		s := fmt.Sprintf("%s v%d", kmsg.NameForKey(k), used[k])
		if used[k] >= advertised[k] {
			newest = append(newest, s)
		} else {
			older = append(older, fmt.Sprintf("%s (kfake advertises v%d)", s, advertised[k]))
		}
	}
	c.Note("versions at kfake's newest: %s", strings.Join(newest, ", "))
	if len(older) > 0 {
		c.Note("versions below kfake's newest (kgo v1.22.3 does not go higher): %s", strings.Join(older, ", "))
	}
	return nil
}
