package realgen

import (
	"context"
	"fmt"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_poll",
		Doc: "two Java classic consumers (range, max.poll.interval.ms 5 s) in group rk-poll; rk-p1 blocks its poll loop 9 s after " +
			"its first records: past max.poll.interval.ms its heartbeat thread leaves the group by itself (LeaveGroup with the " +
			"poll-timeout reason, KIP-800), rk-p2 takes every partition, and rk-p1 rejoins under a new member id at its next poll",
		Topics: map[string]int{"rk-poll": 2},
		Config: quietReplicas,
		Groups: []string{"rk-poll"},
		Run:    runPoll,
	})
}

const pollTopic = "rk-poll"

func pollConsumer(client string, slowMs int) map[string]any {
	a := map[string]any{
		"client_id": client, "group": "rk-poll", "topics": []string{pollTopic},
		"assignor": "range", "commit": "sync", "max_poll_interval_ms": 5000,
		"session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
	if slowMs > 0 {
		a["slow_poll_ms"] = slowMs
	}
	return a
}

func runPoll(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", pollTopic, 20); err != nil {
		return err
	}
	p2, err := e.StartReady(ctx, gen.JavaConsumer, pollConsumer("rk-p2", 0))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-p2 committed the first 20 records", committedBy(pollTopic, 20, "rk-p2")); err != nil {
		return err
	}
	// rk-p1 joins with nothing left to read: its slow poll waits for the
	// next records, once both own partitions.
	p1, err := e.StartReady(ctx, gen.JavaConsumer, pollConsumer("rk-p1", 9000))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-p1 and rk-p2 in one generation", sameGen("rk-p1", "rk-p2")); err != nil {
		return err
	}
	g := lastGen(e.Reports(), "rk-p1")
	if err := e.Produce(ctx, "rk-producer-2", pollTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-p1's slow poll", func(rs []Report) bool { return countKind(rs, "rk-p1", "slow_poll") > 0 }); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-p2 alone after rk-p1's poll timeout", func(rs []Report) bool {
		return lastGen(rs, "rk-p2") > g && lastGen(rs, "rk-p1") == g
	}); err != nil {
		return err
	}
	g2 := lastGen(e.Reports(), "rk-p2")
	if err := e.WaitFor(ctx, "rk-p1 back in rk-p2's generation", func(rs []Report) bool {
		return lastGen(rs, "rk-p1") > g2 && sameGen("rk-p1", "rk-p2")(rs)
	}); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", pollTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records committed", committedBy(pollTopic, 60, "rk-p1", "rk-p2")); err != nil {
		return err
	}
	for _, c := range []*gen.Child{p1, p2} {
		if err := c.Terminate(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}
