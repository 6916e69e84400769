package realgen

import (
	"context"
	"fmt"
	"slices"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_worker",
		Doc: "field report 4 on the Java client: workers of group rk-worker (classic, range, 10 s session) on rk-worker " +
			"(1 partition) hand records to a thread pool and commit each record alone when it is done. rk-w1 does them " +
			"in order but holds record 30 on a thread of its own while 31 is done: after commits 1..30 one by one it " +
			"commits 32, and is SIGKILLed with record 30 unprocessed. Once it expired, rk-w2 resumes at 32 with two " +
			"threads, odd records done before the slower even ones (each late commit moves the committed offset " +
			"back), and holds record 44: it commits 46 and up, never 45, and is SIGKILLed. Once it expired, rk-w3 " +
			"(commits after each poll) resumes where rk-w2's last commit left the group: records 30 and 44 are never " +
			"processed",
		Topics: map[string]int{workerTopic: 1},
		Config: quietReplicas,
		Groups: []string{workerGroup},
		Run:    runWorker,
	})
}

const (
	workerTopic = "rk-worker"
	workerGroup = "rk-worker"
)

func workerConsumer(client string, more map[string]any) map[string]any {
	a := map[string]any{
		"client_id": client, "group": workerGroup, "topics": []string{workerTopic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 1000,
	}
	for k, v := range more {
		a[k] = v
	}
	return a
}

// committedEach: client's accepted commits (committed reports) of topic's
// partition 0 include every offset of want.
func committedEach(client, topic string, want ...int64) func([]Report) bool {
	return func(rs []Report) bool {
		seen := map[int64]bool{}
		for _, r := range rs {
			if r.Kind == "committed" && r.ClientID == client {
				if o, ok := r.Offsets[topic]["0"]; ok {
					seen[o] = true
				}
			}
		}
		for _, o := range want {
			if !seen[o] {
				return false
			}
		}
		return true
	}
}

// offsets returns from..to except skip.
func offsets(from, to int64, skip ...int64) []int64 {
	var out []int64
	for o := from; o <= to; o++ {
		if !slices.Contains(skip, o) {
			out = append(out, o)
		}
	}
	return out
}

// runWorker: rk-w1 and rk-w2 each hold one record and are SIGKILLed once
// every other record they were given is committed; the next one joins
// after the dead one's session expired.
func runWorker(ctx context.Context, e *Env) error {
	steps := []struct {
		client  string
		records int   // produced before it starts
		hold    int64 // the record it never finishes
		args    map[string]any
	}{
		{"rk-w1", 32, 30, map[string]any{"worker": true, "worker_in_order": true, "worker_hold": 30}},
		{"rk-w2", 20, 44, map[string]any{"worker": true, "worker_hold": 44}},
	}
	var end int64
	for i, s := range steps {
		if err := e.Produce(ctx, fmt.Sprintf("rk-producer-%d", i+1), workerTopic, s.records); err != nil {
			return err
		}
		start := end
		end += int64(s.records)
		// rk-w2's join completes once rk-w1's session expired.
		w, err := e.StartReady(ctx, gen.JavaConsumer, workerConsumer(s.client, s.args))
		if err != nil {
			return err
		}
		// Commit o+1 says record o is done: every one but the held.
		if err := e.WaitFor(ctx, fmt.Sprintf("%s holds record %d and committed every other", s.client, s.hold), func(rs []Report) bool {
			return countKind(rs, s.client, "held") > 0 && committedEach(s.client, workerTopic, offsets(start+1, end, s.hold+1)...)(rs)
		}); err != nil {
			return err
		}
		if err := w.Kill(); err != nil {
			return err
		}
		e.Logf("%s SIGKILLed in generation %d with record %d in flight", s.client, lastGen(e.Reports(), s.client), s.hold)
	}
	if err := e.Produce(ctx, "rk-producer-3", workerTopic, 10); err != nil {
		return err
	}
	w3, err := e.StartReady(ctx, gen.JavaConsumer, workerConsumer("rk-w3", nil))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-w3 committed every record", committedBy(workerTopic, end+10, "rk-w3")); err != nil {
		return err
	}
	return w3.Terminate(ctx)
}
