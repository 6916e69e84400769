package gen

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var groupScenario = Scenario{
	Name: "group",
	Doc: "kgo producer writes 3000 small records to orders (6 partitions) in three rounds; a kgo consumer group " +
		"orders-group grows to 3 members, one at a time (cooperative-sticky), each committing after every poll; " +
		"when everything is committed the members close one at a time, last first (LeaveGroup)",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(6, "orders")}},
	Run:     runGroup,
}

var altportScenario = Scenario{
	Name: "altport",
	Doc: "brokers on 19092-19094 instead of 9092: a kgo producer writes 300 records to alt (3 partitions) and a " +
		"one-member group alt-group reads and commits them; one combined file plus one file per broker",
	Options: Options{
		Link:  LinkSLL2,
		Ports: []int{19092, 19093, 19094},
		Split: CombinedAndPerBroker,
		Kfake: []kfake.Opt{kfake.SeedTopics(3, "alt")},
	},
	Run: runAltport,
}

func runGroup(ctx context.Context, c *Cluster) error {
	const (
		topic  = "orders"
		group  = "orders-group"
		rounds = 3
		per    = 1000
	)
	prod, err := c.Kgo(kgo.ClientID("orders-producer"))
	if err != nil {
		return err
	}
	prog := newProgress(rounds * per)
	var members []*member
	for i := range rounds {
		if err := produce(ctx, prod, topic, i*per, per, 40, 100); err != nil {
			return err
		}
		m, err := startMember(ctx, c, prog, groupOpts(fmt.Sprintf("orders-member-%d", i+1), group, topic)...)
		if err != nil {
			return err
		}
		members = append(members, m)
		if err := m.waitAssigned(ctx); err != nil {
			return err
		}
	}
	prod.Close()
	if err := prog.wait(ctx, "group consume"); err != nil {
		return err
	}
	for i := len(members) - 1; i >= 0; i-- {
		members[i].stop()
	}
	if err := c.RecordCommitted(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

func runAltport(ctx context.Context, c *Cluster) error {
	const topic, group, n = "alt", "alt-group", 300
	prod, err := c.Kgo(kgo.ClientID("alt-producer"))
	if err != nil {
		return err
	}
	if err := produce(ctx, prod, topic, 0, n, 60, 50); err != nil {
		return err
	}
	prod.Close()
	prog := newProgress(n)
	m, err := startMember(ctx, c, prog, groupOpts("alt-member", group, topic)...)
	if err != nil {
		return err
	}
	if err := prog.wait(ctx, "alt consume"); err != nil {
		return err
	}
	m.stop()
	if err := c.RecordCommitted(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
