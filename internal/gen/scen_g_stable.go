package gen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func init() {
	RegisterChild("gmember", childGMember)
	for _, s := range []Scenario{gStableScenario, gEagerScenario, gChurnScenario, gStaticScenario,
		g848Scenario, gSaramaScenario, gXBrokerScenario,
	} {
		Register(s)
	}
}

var gStableScenario = Scenario{
	Name: "g_stable",
	Doc: "a kgo producer writes 20 small records every 100ms to gs-orders (6 partitions) while a consumer group " +
		"gs-group (cooperative-sticky) grows to 3 kgo members started one at a time, each committing after every " +
		"poll; once all is committed the members close (LeaveGroup) one at a time, last first",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(6, "gs-orders")}},
	Run: func(ctx context.Context, c *Cluster) error {
		return runStable(ctx, c, "gs-orders", "gs-group", "gs-member", "cooperative-sticky")
	},
}

var gEagerScenario = Scenario{
	Name: "g_eager",
	Doc: "g_stable with the eager range assignor: a kgo producer writes to ge-orders (6 partitions) while " +
		"ge-group (range) grows to 3 kgo members one at a time, then they close one at a time, last first",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(6, "ge-orders")}},
	Run: func(ctx context.Context, c *Cluster) error {
		return runStable(ctx, c, "ge-orders", "ge-group", "ge-member", "range")
	},
}

// runStable grows a group to 3 members while a producer runs, lets it
// consume, and shrinks it gracefully.
func runStable(ctx context.Context, c *Cluster, topic, group, prefix, balancer string) error {
	const parts = 6
	prod, err := startProducer(ctx, c, prefix+"-producer", topic, 20, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	var members []*gMember
	for i := range 3 {
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: fmt.Sprintf("%s-%d", prefix, i+1), Group: group,
			Topics: []string{topic}, Balancers: []string{balancer}})
		if err != nil {
			return err
		}
		members = append(members, m)
		if _, err := c.waitStable(ctx, group, i+1, parts); err != nil {
			return err
		}
		sleepCtx(ctx, 1500*time.Millisecond)
	}
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	for i := len(members) - 1; i >= 0; i-- {
		members[i].leave()
		if i > 0 {
			if _, err := c.waitStable(ctx, group, i, parts); err != nil {
				return err
			}
		}
	}
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
