package realgen

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	for _, v := range []struct{ name, assignor, how string }{
		{"r_mixed", "range", "range: eager, they give every partition up and rejoin"},
		{"r_mixed_coop", "cooperative-sticky", "cooperative-sticky: they keep their partitions, rejoin at their epoch and give up " +
			"those the broker moves before the next"},
	} {
		group := "rk-" + strings.ReplaceAll(v.name[2:], "_", "-")
		register(Scenario{
			Name: v.name,
			Doc: "group " + group + " started by two classic Java consumers (" + v.how + "; sync commits); a KIP-848 consumer " +
				"(group.protocol=consumer) joins: the broker converts the group to a consumer group (its epoch the classic " +
				"generation) and the classic members rejoin through JoinGroup/SyncGroup/Heartbeat beside its " +
				"ConsumerGroupHeartbeat (migration policy bidirectional, Kafka 4.4's default, set explicitly); the KIP-848 " +
				"member leaves and the broker converts the group back to a classic group, which rebalances; the classic members close",
			Topics: map[string]int{group: 6},
			Config: mixedConfig(),
			Groups: []string{group},
			Run: func(ctx context.Context, e *Env) error {
				return runMixed(ctx, e, mixed{group: group, assignor: v.assignor})
			},
		})
	}
}

// mixed is a mixed group scenario: its group (and topic) and the
// classic members' assignor.
type mixed struct{ group, assignor string }

// mixedConfig is quietReplicas with the online migration of groups both
// ways (group.consumer.migration.policy, KIP-848): Kafka 4.4's default,
// set so the scenario does not hang on a future default.
func mixedConfig() map[string]string {
	c := maps.Clone(quietReplicas)
	c["group.consumer.migration.policy"] = "bidirectional"
	return c
}

func (x mixed) classic(client string) map[string]any {
	return map[string]any{
		"client_id": client, "group": x.group, "topics": []string{x.group},
		"assignor": x.assignor, "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
}

func runMixed(ctx context.Context, e *Env, x mixed) error {
	mixedTopic, mixedGroup := x.group, x.group
	if err := e.Produce(ctx, "rk-producer-1", mixedTopic, 60); err != nil {
		return err
	}
	c1, err := e.StartReady(ctx, gen.JavaConsumer, x.classic("rk-c1"))
	if err != nil {
		return err
	}
	c2, err := e.StartReady(ctx, gen.JavaConsumer, x.classic("rk-c2"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-c1 and rk-c2 in one classic generation, owning the six partitions",
		all(sameGen("rk-c1", "rk-c2"), owns848(6, "rk-c1", "rk-c2"))); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records committed", committedBy(mixedTopic, 60, "rk-c1", "rk-c2")); err != nil {
		return err
	}
	classicGen := lastGen(e.Reports(), "rk-c1")
	if err := e.describe(ctx, mixedGroup); err != nil {
		return err
	}
	// The upgrade: a ConsumerGroupHeartbeat to the classic group converts it.
	n1, err := e.StartReady(ctx, gen.JavaConsumer, map[string]any{
		"client_id": "rk-n1", "group": mixedGroup, "topics": []string{mixedTopic},
		"group_protocol": "consumer", "commit": "sync",
	})
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "six partitions owned by the two classic and the KIP-848 member",
		all(owns848(6, "rk-c1", "rk-c2", "rk-n1"), func(rs []Report) bool {
			return lastGen(rs, "rk-c1") > classicGen && lastGen(rs, "rk-c2") > classicGen
		})); err != nil {
		return err
	}
	if err := e.describe(ctx, mixedGroup); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-2", mixedTopic, 60); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "120 records committed", committedBy(mixedTopic, 120, "rk-c1", "rk-c2", "rk-n1")); err != nil {
		return err
	}
	mixedEpoch := max(lastGen(e.Reports(), "rk-c1"), lastGen(e.Reports(), "rk-c2"))
	// The downgrade: the last KIP-848 member leaves a group of classic members.
	if err := n1.Terminate(ctx); err != nil {
		return fmt.Errorf("rk-n1 close: %w", err)
	}
	if err := e.WaitFor(ctx, "rk-c1 and rk-c2 in a classic generation after rk-n1 left, owning the six partitions",
		all(sameGen("rk-c1", "rk-c2"), owns848(6, "rk-c1", "rk-c2"), func(rs []Report) bool {
			return lastGen(rs, "rk-c1") > mixedEpoch
		})); err != nil {
		return err
	}
	if err := e.describe(ctx, mixedGroup); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", mixedTopic, 60); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "180 records committed", committedBy(mixedTopic, 180, "rk-c1", "rk-c2", "rk-n1")); err != nil {
		return err
	}
	for _, c := range []*gen.Child{c2, c1} {
		if err := c.Terminate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// all: every condition holds.
func all(conds ...func([]Report) bool) func([]Report) bool {
	return func(rs []Report) bool {
		for _, c := range conds {
			if !c(rs) {
				return false
			}
		}
		return true
	}
}
