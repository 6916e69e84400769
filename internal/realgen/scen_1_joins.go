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
		Run:    joins{group: "rk-joins", client: "rk-c"}.run,
	})
}

// joins is the story of r_joins (and r3_joins on Kafka 3.9) for group,
// which is also its topic, and the clients <client>1 to <client>3.
type joins struct{ group, client string }

func (j joins) consumer(n int, commit string) map[string]any {
	return map[string]any{
		"client_id": j.name(n), "group": j.group, "topics": []string{j.group},
		"assignor": "range", "commit": commit, "auto_commit_interval_ms": 1000,
		"session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
}

func (j joins) name(n int) string { return fmt.Sprintf("%s%d", j.client, n) }

func (j joins) run(ctx context.Context, e *Env) error {
	topic, c1n, c2n, c3n := j.group, j.name(1), j.name(2), j.name(3)
	if err := e.Produce(ctx, "rk-producer-1", topic, 30); err != nil {
		return err
	}
	c1, err := e.StartReady(ctx, gen.JavaConsumer, j.consumer(1, "auto"))
	if err != nil {
		return err
	}
	e.Logf("%s owns partitions (generation %d)", c1n, lastGen(e.Reports(), c1n))
	c2, err := e.StartReady(ctx, gen.JavaConsumer, j.consumer(2, "sync"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, c1n+" in "+c2n+"'s generation", sameGen(c1n, c2n)); err != nil {
		return err
	}
	c3, err := e.StartReady(ctx, gen.JavaConsumer, j.consumer(3, "sync"))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "three members in one generation", sameGen(c1n, c2n, c3n)); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-2", topic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "60 records consumed", consumedAll(topic, 60)); err != nil {
		return err
	}
	g3 := lastGen(e.Reports(), c3n)
	if err := c3.Terminate(ctx); err != nil {
		return fmt.Errorf("%s close: %w", c3n, err)
	}
	if err := e.WaitFor(ctx, c1n+" and "+c2n+" in a generation after "+c3n+" left", func(rs []Report) bool {
		return lastGen(rs, c1n) > g3 && sameGen(c1n, c2n)(rs)
	}); err != nil {
		return err
	}
	g2 := lastGen(e.Reports(), c2n)
	if err := c2.Kill(); err != nil {
		return err
	}
	e.Logf("%s SIGKILLed in generation %d", c2n, g2)
	if err := e.WaitFor(ctx, c1n+" alone after "+c2n+"'s session expired", func(rs []Report) bool {
		return lastGen(rs, c1n) > g2
	}); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", topic, 30); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "90 records consumed", consumedAll(topic, 90)); err != nil {
		return err
	}
	// An auto commit covering the last records, then close (LeaveGroup,
	// after a last commit).
	if err := e.WaitFor(ctx, c1n+" committed every record", committedAll(c1n, topic, 90)); err != nil {
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
