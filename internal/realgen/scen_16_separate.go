package realgen

import (
	"context"
	"fmt"
	"maps"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realkafka"
)

func init() {
	register(Scenario{
		Name: "r_separate",
		Doc: "the separate layout on Kafka 4.4 (clients on CLIENT, replication and the brokers' own requests on BROKER, the quorum " +
			"on CONTROLLER, all three in the capture): a classic group rk-sep-classic (range, sync commits) and a KIP-848 group " +
			"rk-sep-848 of two Java consumers each read one topic and commit; their coordinator (both groups' one: " +
			"__consumer_offsets has one partition here) is SIGKILLed, both groups find the new one and go on, and the killed broker " +
			"is restarted and catches up by replica fetches",
		Layout: realkafka.Separate,
		Quorum: true,
		Topics: map[string]int{separateTopic: 2},
		Config: separateConfig,
		Groups: []string{separateClassic, separate848},
		Run:    runSeparate,
	})
}

const (
	separateTopic   = "rk-separate"
	separateClassic = "rk-sep-classic"
	separate848     = "rk-sep-848"
)

// separateConfig gives __consumer_offsets one partition, so both groups
// have the same coordinator and one SIGKILL moves both; and the active
// controller appends its no-op record every 5 s (Kafka: 500 ms), each of
// which wakes the quorum's parked Raft fetches: fewer of them in the
// capture, which keeps the quorum's listeners.
var separateConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["offsets.topic.num.partitions"] = "1"
	c["metadata.max.idle.interval.ms"] = "5000"
	return c
}()

func runSeparate(ctx context.Context, e *Env) error {
	classic, kip848 := []string{"rk-sc1", "rk-sc2"}, []string{"rk-sn1", "rk-sn2"}
	if err := e.Produce(ctx, "rk-producer-1", separateTopic, 20); err != nil {
		return err
	}
	var cs []*gen.Child
	for _, client := range classic {
		c, err := e.StartReady(ctx, gen.JavaConsumer, map[string]any{
			"client_id": client, "group": separateClassic, "topics": []string{separateTopic},
			"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 3000,
		})
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if err := e.WaitFor(ctx, "the classic members in one generation", sameGen(classic...)); err != nil {
		return err
	}
	for _, client := range kip848 {
		c, err := e.StartReady(ctx, gen.JavaConsumer, map[string]any{
			"client_id": client, "group": separate848, "topics": []string{separateTopic},
			"group_protocol": "consumer", "commit": "sync",
		})
		if err != nil {
			return err
		}
		cs = append(cs, c)
	}
	if err := e.WaitFor(ctx, "both partitions owned by the KIP-848 members", owns848(2, kip848...)); err != nil {
		return err
	}
	committed := func(n int64) error {
		for _, clients := range [][]string{classic, kip848} {
			if err := e.WaitFor(ctx, fmt.Sprintf("%d records committed by %v", n, clients), committedBy(separateTopic, n, clients...)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := committed(20); err != nil {
		return err
	}
	groups := []string{separateClassic, separate848}
	before, err := e.coordinators(ctx, groups...)
	if err != nil {
		return err
	}
	coord := before[separateClassic]
	if before[separate848] != coord {
		return fmt.Errorf("coordinators %v: want one node for both groups (one __consumer_offsets partition)", before)
	}
	if err := e.C.Kill(coord); err != nil {
		return err
	}
	e.Logf("coordinator node %d SIGKILLed", coord)
	if err := e.Produce(ctx, "rk-producer-2", separateTopic, 20); err != nil {
		return err
	}
	if err := committed(40); err != nil {
		return err
	}
	after, err := e.coordinators(ctx, groups...)
	if err != nil {
		return err
	}
	for g, n := range after {
		if n == coord {
			return fmt.Errorf("group %s: node %d is dead and still the coordinator", g, n)
		}
	}
	e.Logf("coordinators now %v", after)
	if err := e.C.Restart(coord); err != nil {
		return err
	}
	if err := e.C.WaitReady(ctx); err != nil {
		return err
	}
	e.Logf("node %d restarted", coord)
	if err := e.Produce(ctx, "rk-producer-3", separateTopic, 20); err != nil {
		return err
	}
	if err := committed(60); err != nil {
		return err
	}
	for _, c := range cs {
		if err := c.Terminate(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
	}
	return nil
}
