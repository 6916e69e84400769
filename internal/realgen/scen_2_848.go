package realgen

import (
	"context"
	"fmt"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_848",
		Doc: "a KIP-848 group rk-848 (group.protocol=consumer, the broker's default uniform assignor) of three Java consumers " +
			"joining one by one; one leaves (close: heartbeat with epoch -1), then the others close",
		Topics: map[string]int{"rk-848": 4},
		Config: quietReplicas,
		Groups: []string{"rk-848"},
		Run:    run848,
	})
}

const (
	topic848 = "rk-848"
	group848 = "rk-848"
)

func consumer848(client string) map[string]any {
	return map[string]any{
		"client_id": client, "group": group848, "topics": []string{topic848},
		"group_protocol": "consumer", "commit": "sync",
	}
}

func run848(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", topic848, 40); err != nil {
		return err
	}
	var cs []*gen.Child
	for i := 1; i <= 3; i++ {
		client := fmt.Sprintf("rk-m%d", i)
		c, err := e.StartReady(ctx, gen.JavaConsumer, consumer848(client))
		if err != nil {
			return err
		}
		cs = append(cs, c)
		e.Logf("%s owns partitions (epoch %d)", client, lastGen(e.Reports(), client))
	}
	// Every member owns partitions of the last target assignment: the
	// four partitions are spread over the three.
	if err := e.WaitFor(ctx, "four partitions owned by three members", owns848(4, "rk-m1", "rk-m2", "rk-m3")); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-2", topic848, 40); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "80 records consumed", consumedAll(topic848, 80)); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "80 records committed", committedBy(topic848, 80, "rk-m1", "rk-m2", "rk-m3")); err != nil {
		return err
	}
	if err := cs[2].Terminate(ctx); err != nil {
		return fmt.Errorf("rk-m3 close: %w", err)
	}
	if err := e.WaitFor(ctx, "four partitions owned by the two left", owns848(4, "rk-m1", "rk-m2")); err != nil {
		return err
	}
	if err := e.Produce(ctx, "rk-producer-3", topic848, 40); err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "120 records committed", committedBy(topic848, 120, "rk-m1", "rk-m2", "rk-m3")); err != nil {
		return err
	}
	for _, c := range cs[:2] {
		if err := c.Terminate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// owns848: the clients together own n partitions now (each client's
// owned set: owned reports add, revoked and lost ones remove), each at
// least one.
func owns848(n int, clients ...string) func([]Report) bool {
	return func(rs []Report) bool {
		total := 0
		for _, c := range clients {
			owned := map[string]bool{}
			for _, r := range rs {
				if r.ClientID != c {
					continue
				}
				switch r.Kind {
				case "owned":
					owned = map[string]bool{}
					for t, ps := range r.Assignment {
						for _, p := range ps {
							owned[fmt.Sprintf("%s/%d", t, p)] = true
						}
					}
				case "revoked", "lost":
					for t, ps := range r.Assignment {
						for _, p := range ps {
							delete(owned, fmt.Sprintf("%s/%d", t, p))
						}
					}
				}
			}
			if len(owned) == 0 {
				return false
			}
			total += len(owned)
		}
		return total == n
	}
}

// committedBy: the clients' accepted commits (committed reports) reached
// n records over topic's partitions.
func committedBy(topic string, n int64, clients ...string) func([]Report) bool {
	return func(rs []Report) bool {
		ends := map[string]int64{}
		for _, r := range rs {
			if r.Kind != "committed" {
				continue
			}
			for _, c := range clients {
				if r.ClientID == c {
					for p, o := range r.Offsets[topic] {
						ends[p] = max(ends[p], o)
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
