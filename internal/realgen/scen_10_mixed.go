package realgen

import (
	"context"
	"fmt"
	"maps"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_mixed",
		Doc: "group rk-mixed started by two classic Java consumers (range, sync commits); a KIP-848 consumer " +
			"(group.protocol=consumer) joins: the broker converts the group to a consumer group (its epoch the classic " +
			"generation) and the classic members rejoin through JoinGroup/SyncGroup/Heartbeat beside its " +
			"ConsumerGroupHeartbeat (migration policy bidirectional, Kafka 4.4's default, set explicitly); the KIP-848 " +
			"member leaves and the broker converts the group back to a classic group, which rebalances; the classic members close",
		Topics: map[string]int{mixedTopic: 6},
		Config: mixedConfig(),
		Groups: []string{mixedGroup},
		Run:    runMixed,
	})
}

const (
	mixedTopic = "rk-mixed"
	mixedGroup = "rk-mixed"
)

// mixedConfig is quietReplicas with the online migration of groups both
// ways (group.consumer.migration.policy, KIP-848): Kafka 4.4's default,
// set so the scenario does not hang on a future default.
func mixedConfig() map[string]string {
	c := maps.Clone(quietReplicas)
	c["group.consumer.migration.policy"] = "bidirectional"
	return c
}

func mixedClassic(client string) map[string]any {
	return map[string]any{
		"client_id": client, "group": mixedGroup, "topics": []string{mixedTopic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
}

func runMixed(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", mixedTopic, 60); err != nil {
		return err
	}
	c1, err := e.StartReady(ctx, gen.JavaConsumer, mixedClassic("rk-c1"))
	if err != nil {
		return err
	}
	c2, err := e.StartReady(ctx, gen.JavaConsumer, mixedClassic("rk-c2"))
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
