package realgen

import (
	"context"
	"fmt"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_static",
		Doc: "two static Java classic consumers (group.instance.id, range, 15 s session) in group rk-static; one is SIGKILLed and " +
			"restarted inside its session (same instance id: the broker hands its partitions back, no rebalance), then SIGKILLed " +
			"for good and expires after its session; the other closes (a static member sends no LeaveGroup)",
		Topics: map[string]int{"rk-static": 4},
		Config: quietReplicas,
		Groups: []string{"rk-static"},
		Run:    runStatic,
	})
}

const staticTopic = "rk-static"

func staticConsumer(client string) map[string]any {
	return map[string]any{
		"client_id": client, "instance_id": client, "group": "rk-static", "topics": []string{staticTopic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 15000, "heartbeat_ms": 1000,
	}
}

func runStatic(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", staticTopic, 20); err != nil {
		return err
	}
	s1, err := e.StartReady(ctx, gen.JavaConsumer, staticConsumer("rk-s1"))
	if err != nil {
		return err
	}
	s2, err := e.StartReady(ctx, gen.JavaConsumer, staticConsumer("rk-s2"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-s1 and rk-s2 in one generation", sameGen("rk-s1", "rk-s2")); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "20 records committed", committedBy(staticTopic, 20, "rk-s1", "rk-s2")); err != nil {
		return err
	}
	g := lastGen(e.Reports(), "rk-s2")
	if err := s2.Kill(); err != nil {
		return err
	}
	e.Logf("rk-s2 SIGKILLed in generation %d; restarting it at once", g)
	owned := countKind(e.Reports(), "rk-s2", "owned")
	s2, err = e.StartReady(ctx, gen.JavaConsumer, staticConsumer("rk-s2"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "the restarted rk-s2 owns partitions", func(rs []Report) bool {
		return countKind(rs, "rk-s2", "owned") > owned
	}); err != nil {
		return err
	}
	if g2 := lastGen(e.Reports(), "rk-s2"); g2 != g {
		return fmt.Errorf("the restarted rk-s2 is in generation %d, not %d: the broker rebalanced", g2, g)
	}
	if err := e.Produce(ctx, "rk-producer-2", staticTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "40 records committed", committedBy(staticTopic, 40, "rk-s1", "rk-s2")); err != nil {
		return err
	}
	if err := s2.Kill(); err != nil {
		return err
	}
	e.Logf("rk-s2 SIGKILLed for good in generation %d", g)
	if err := e.WaitFor(ctx, "rk-s1 alone after rk-s2's session expired", func(rs []Report) bool {
		return lastGen(rs, "rk-s1") > g
	}); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", staticTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records committed", committedBy(staticTopic, 60, "rk-s1")); err != nil {
		return err
	}
	return s1.Terminate(ctx)
}

// countKind counts client's reports of kind.
func countKind(rs []Report, client, kind string) int {
	n := 0
	for _, r := range rs {
		if r.ClientID == client && r.Kind == kind {
			n++
		}
	}
	return n
}
