package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_failover",
		Doc: "two Java classic consumers (range, sync commits) in group rk-failover while the group's coordinator broker is " +
			"SIGKILLed: about 10 s later (the controller fences the dead broker after 9 s) the consumers find the new coordinator (FindCoordinator again) and carry on in the same generation; the " +
			"killed broker is restarted and, by the preferred leader election (every 5 s here), takes the group back",
		Topics: map[string]int{"rk-failover": 2},
		Config: failoverConfig,
		Groups: []string{"rk-failover"},
		Run:    runFailover,
	})
}

const failoverTopic = "rk-failover"

// failoverConfig checks the leader balance every 5 s (Kafka: 300 s), so
// the restarted broker gets its preferred leaderships back, the group's
// coordinator with them, while the capture runs.
var failoverConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["leader.imbalance.check.interval.seconds"] = "5"
	return c
}()

func failoverConsumer(client string) map[string]any {
	return map[string]any{
		"client_id": client, "group": "rk-failover", "topics": []string{failoverTopic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 3000,
	}
}

func runFailover(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", failoverTopic, 20); err != nil {
		return err
	}
	var cs []*gen.Child
	for _, client := range []string{"rk-f1", "rk-f2"} {
		c, err := e.StartReady(ctx, gen.JavaConsumer, failoverConsumer(client))
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if err := e.WaitFor(ctx, "rk-f1 and rk-f2 in one generation", sameGen("rk-f1", "rk-f2")); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "20 records committed", committedBy(failoverTopic, 20, "rk-f1", "rk-f2")); err != nil {
		return err
	}
	coord, err := e.coordinator(ctx, "rk-failover")
	if err != nil {
		return err
	}
	g := lastGen(e.Reports(), "rk-f1")
	if err := e.C.Kill(coord); err != nil {
		return err
	}
	e.Logf("coordinator node %d SIGKILLed (generation %d)", coord, g)
	if err := e.Produce(ctx, "rk-producer-2", failoverTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "40 records committed through the new coordinator", committedBy(failoverTopic, 40, "rk-f1", "rk-f2")); err != nil {
		return err
	}
	moved, err := e.coordinator(ctx, "rk-failover")
	if err != nil {
		return err
	}
	if moved == coord {
		return fmt.Errorf("node %d is dead and still the coordinator", coord)
	}
	e.Logf("coordinator now node %d", moved)
	if err := e.C.Restart(coord); err != nil {
		return err
	}
	if err := e.C.WaitReady(ctx); err != nil {
		return err
	}
	e.Logf("node %d restarted", coord)
	back := false
	for range 15 {
		now, err := e.coordinator(ctx, "rk-failover")
		if err != nil {
			return err
		}
		if back = now == coord; back {
			break
		}
	}
	if !back {
		return fmt.Errorf("the group's coordinator did not move back to node %d", coord)
	}
	e.Logf("coordinator back on node %d", coord)
	if err := e.Produce(ctx, "rk-producer-3", failoverTopic, 20); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records committed", committedBy(failoverTopic, 60, "rk-f1", "rk-f2")); err != nil {
		return err
	}
	if g2 := lastGen(e.Reports(), "rk-f1"); g2 != g {
		e.Logf("generation %d after the failover (was %d)", g2, g)
	}
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}

// coordinator asks the Admin client (DescribeGroups) which node
// coordinates group.
func (e *Env) coordinator(ctx context.Context, group string) (int32, error) {
	cs, err := e.coordinators(ctx, group)
	return cs[group], err
}

// coordinators asks the Admin client (one DescribeGroups call) which node
// coordinates each group.
func (e *Env) coordinators(ctx context.Context, groups ...string) (map[string]int32, error) {
	if err := e.describe(ctx, groups...); err != nil {
		return nil, err
	}
	rs := e.Reports()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Kind != "admin" {
			continue
		}
		var r struct {
			Op     string `json:"op"`
			Result map[string]struct {
				Coordinator int32 `json:"coordinator"`
			} `json:"result"`
		}
		if err := json.Unmarshal(rs[i].Raw, &r); err != nil || r.Op != "describe_groups" {
			continue
		}
		out := map[string]int32{}
		for _, g := range groups {
			c, ok := r.Result[g]
			if !ok || c.Coordinator < 0 {
				return nil, fmt.Errorf("describe %s: no coordinator in %s", g, rs[i].Raw)
			}
			out[g] = c.Coordinator
		}
		return out, nil
	}
	return nil, fmt.Errorf("describe %v: no admin report", groups)
}
