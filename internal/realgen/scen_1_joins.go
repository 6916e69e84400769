package realgen

import (
	"context"
	"fmt"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_joins",
		Doc: "Java classic consumers (range) join group rk-joins one by one under Kafka's default initial rebalance delay (3 s); " +
			"one leaves (close: LeaveGroup), one is SIGKILLed and expires after its 10 s session timeout; the last closes",
		Topics: map[string]int{"rk-joins": 3},
		Config: quietReplicas,
		Groups: []string{"rk-joins"},
		Run:    runJoins,
	})
}

const (
	joinsTopic = "rk-joins"
	joinsGroup = "rk-joins"
)

func joinsConsumer(client, commit string) map[string]any {
	return map[string]any{
		"client_id": client, "group": joinsGroup, "topics": []string{joinsTopic},
		"assignor": "range", "commit": commit, "auto_commit_interval_ms": 1000,
		"session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
}

func runJoins(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", joinsTopic, 30); err != nil {
		return err
	}
	c1, err := e.StartReady(ctx, gen.JavaConsumer, joinsConsumer("rk-c1", "auto"))
	if err != nil {
		return err
	}
	_ = c1
	e.Logf("rk-c1 owns partitions (generation %d)", lastGen(e.Reports(), "rk-c1"))
	c2, err := e.StartReady(ctx, gen.JavaConsumer, joinsConsumer("rk-c2", "sync"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-c1 in rk-c2's generation", sameGen("rk-c1", "rk-c2")); err != nil {
		return err
	}
	c3, err := e.StartReady(ctx, gen.JavaConsumer, joinsConsumer("rk-c3", "sync"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "three members in one generation", sameGen("rk-c1", "rk-c2", "rk-c3")); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-2", joinsTopic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records consumed", consumedAll(joinsTopic, 60)); err != nil {
		return err
	}
	g3 := lastGen(e.Reports(), "rk-c3")
	if err := c3.Terminate(ctx); err != nil {
		return fmt.Errorf("rk-c3 close: %w", err)
	}
	if err := e.WaitFor(ctx, "rk-c1 and rk-c2 in a generation after rk-c3 left", func(rs []Report) bool {
		return lastGen(rs, "rk-c1") > g3 && sameGen("rk-c1", "rk-c2")(rs)
	}); err != nil {
		return err
	}
	g2 := lastGen(e.Reports(), "rk-c2")
	if err := c2.Kill(); err != nil {
		return err
	}
	e.Logf("rk-c2 SIGKILLed in generation %d", g2)
	if err := e.WaitFor(ctx, "rk-c1 alone after rk-c2's session expired", func(rs []Report) bool {
		return lastGen(rs, "rk-c1") > g2
	}); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", joinsTopic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "90 records consumed", consumedAll(joinsTopic, 90)); err != nil {
		return err
	}
	// An auto commit covering the last records, then close (LeaveGroup,
	// after a last commit).
	if err := e.WaitFor(ctx, "rk-c1 committed every record", committedAll("rk-c1", joinsTopic, 90)); err != nil {
		return err
	}
	return c1.Terminate(ctx)
}

// lastGen is the generation of client's last owned report, -1 if none.
func lastGen(rs []Report, client string) int32 {
	g := int32(-1)
	for _, r := range rs {
		if r.ClientID == client && r.Kind == "owned" && r.Generation != nil {
			g = *r.Generation
		}
	}
	return g
}

// sameGen: every client's last owned report is of the same generation.
func sameGen(clients ...string) func([]Report) bool {
	return func(rs []Report) bool {
		g := lastGen(rs, clients[0])
		for _, c := range clients[1:] {
			if lastGen(rs, c) != g {
				return false
			}
		}
		return g >= 0
	}
}

// consumedAll: the consumers together reached offset n over topic's
// partitions (the sum of each partition's highest last_offset+1).
func consumedAll(topic string, n int64) func([]Report) bool {
	return func(rs []Report) bool {
		return consumedEnds(rs, topic) >= n
	}
}

func consumedEnds(rs []Report, topic string) int64 {
	ends := map[int32]int64{}
	for _, r := range rs {
		if r.Kind == "consumed" && r.Topic == topic && r.LastOffset+1 > ends[r.Partition] {
			ends[r.Partition] = r.LastOffset + 1
		}
	}
	var sum int64
	for _, e := range ends {
		sum += e
	}
	return sum
}

// committedAll: client's accepted commits (committed reports) reached n
// records over topic's partitions.
func committedAll(client, topic string, n int64) func([]Report) bool {
	return func(rs []Report) bool {
		ends := map[string]int64{}
		for _, r := range rs {
			if r.Kind == "committed" && r.ClientID == client {
				for p, o := range r.Offsets[topic] {
					if o > ends[p] {
						ends[p] = o
					}
				}
			}
		}
		var sum int64
		for _, e := range ends {
			sum += e
		}
		return sum >= n
	}
}
