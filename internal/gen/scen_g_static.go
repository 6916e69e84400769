package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

var gStaticScenario = Scenario{
	Name: "g_static",
	Doc: "static membership (KIP-345): consumer group gst-group (range) on gst-orders (6 partitions) grows to 3 kgo " +
		"members with group.instance.id gst-instance-1..3, one at a time, while a kgo producer writes; member 3 " +
		"closes (a static member sends no LeaveGroup) and restarts with the same instance id 1s later, within its " +
		"6s session timeout: it gets a new member id and its old assignment with no rebalance; at the end all " +
		"members close without leaving, so the broker still lists them",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(6, "gst-orders")}},
	Run:     runStatic,
}

func runStatic(ctx context.Context, c *Cluster) error {
	const topic, group, parts = "gst-orders", "gst-group", 6
	args := func(i int) GMemberArgs {
		return GMemberArgs{ClientID: fmt.Sprintf("gst-member-%d", i), Group: group, Topics: []string{topic},
			InstanceID: fmt.Sprintf("gst-instance-%d", i), Balancers: []string{"range"}}
	}
	prod, err := startProducer(ctx, c, "gst-producer", topic, 20, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	var ms []*gMember
	for i := 1; i <= 3; i++ {
		m, err := startGMember(ctx, c, args(i))
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if _, err := c.waitStable(ctx, group, i, parts); err != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
	}
	// Restart member 3. It joined last, so its stored JoinGroup metadata
	// (range: topics and generation -1) equals what the restarted client
	// sends: the broker replaces it without a rebalance (kfake follows
	// Kafka: only a changed protocol, or the leader, forces one).
	before := c.kf.GroupInfo(group)
	oldID := ms[2].memberID()
	ms[2].stop()
	sleepCtx(ctx, time.Second)
	m3, err := startGMember(ctx, c, args(3))
	if err != nil {
		return err
	}
	ms[2] = m3
	if err := m3.waitAssigned(ctx); err != nil {
		return err
	}
	after, err := c.waitStable(ctx, group, 3, parts)
	if err != nil {
		return err
	}
	if after.Epoch != before.Epoch {
		return fmt.Errorf("static restart rebalanced the group: generation %d -> %d", before.Epoch, after.Epoch)
	}
	c.Note("g_static: gst-member-3 restarted as a static member: member id %s replaced by %s in generation %d, no rebalance",
		oldID, m3.memberID(), after.Epoch)
	sleepCtx(ctx, 2*time.Second)
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	for i := len(ms) - 1; i >= 0; i-- {
		ms[i].stop() // static: no LeaveGroup
	}
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

var g848Scenario = Scenario{
	Name: "g_848",
	Doc: "a KIP-848 consumer group g848-group (ConsumerGroupHeartbeat, server-side uniform assignor) on g848-orders " +
		"(6 partitions) while a kgo producer writes: 3 kgo members join one at a time, a 4th joins, member 2 leaves " +
		"(heartbeat with epoch -1), then the rest close; generations are the group epochs the broker reported Stable",
	Options: Options{
		Link: LinkEthernet,
		Kfake: []kfake.Opt{
			kfake.SeedTopics(6, "g848-orders"),
			kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "500"}),
		},
	},
	Run: run848,
}

func run848(ctx context.Context, c *Cluster) error {
	const topic, group, parts = "g848-orders", "g848-group", 6
	c.kip848(group, "uniform")
	args := func(i int) GMemberArgs {
		return GMemberArgs{ClientID: fmt.Sprintf("g848-member-%d", i), Group: group, Topics: []string{topic}, ServerSide: true}
	}
	prod, err := startProducer(ctx, c, "g848-producer", topic, 20, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	var ms []*gMember
	for i := 1; i <= 4; i++ {
		m, err := startGMember(ctx, c, args(i))
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if _, err := c.waitStable(ctx, group, i, parts); err != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
	}
	ms[1].leave()
	if _, err := c.waitStable(ctx, group, 3, parts); err != nil {
		return err
	}
	sleepCtx(ctx, time.Second)
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	for _, step := range []struct{ leave, left int }{{3, 2}, {2, 1}} {
		ms[step.leave].leave()
		if _, err := c.waitStable(ctx, group, step.left, parts); err != nil {
			return err
		}
	}
	ms[0].leave()
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
