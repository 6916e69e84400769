package realgen

import (
	"context"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_delay",
		Doc: "two Java classic consumers (range) with max.poll.interval.ms 4 s (their rebalance timeout) start together on the empty " +
			"group rk-delay: the first rebalance lasts Kafka's default initial delay (3 s), the broker's own timer, not a slow member",
		Topics: map[string]int{"rk-delay": 2},
		Config: quietReplicas,
		Groups: []string{"rk-delay"},
		Run:    runDelay,
	})
}

func runDelay(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", "rk-delay", 20); err != nil {
		return err
	}
	var cs []*gen.Child
	for _, client := range []string{"rk-d1", "rk-d2"} {
		c, err := e.Start(ctx, gen.JavaConsumer, map[string]any{
			"client_id": client, "group": "rk-delay", "topics": []string{"rk-delay"},
			"assignor": "range", "commit": "sync", "max_poll_interval_ms": 4000,
			"session_timeout_ms": 10000, "heartbeat_ms": 1000,
		})
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if err := e.WaitFor(ctx, "both in one generation", sameGen("rk-d1", "rk-d2")); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "20 records committed", committedBy("rk-delay", 20, "rk-d1", "rk-d2")); err != nil {
		return err
	}
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			return err
		}
	}
	return nil
}
