package realgen

import (
	"context"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_worker",
		Doc: "field report 4's experiment on the Java client: rk-w1 (classic, range, 10 s session) hands the 32 records of " +
			"rk-worker (1 partition) to a worker pool and commits each record alone when it is done; record 30 is held " +
			"on a thread of its own while the other thread does 31, so after commits 1..30 one by one it commits 32, " +
			"and is SIGKILLed with record 30 unprocessed; 20 more records arrive; once it expired, rk-w2 resumes at 32: " +
			"record 30 is never processed. rk-w2 is the same worker, two threads, odd offsets done first: each slow " +
			"even record committed after its successor moves the committed offset back",
		Topics: map[string]int{workerTopic: 1},
		Config: quietReplicas,
		Groups: []string{workerGroup},
		Run:    runWorker,
	})
}

const (
	workerTopic = "rk-worker"
	workerGroup = "rk-worker"
	workerHold  = 30 // the record left in flight (the field report's offset)
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

func runWorker(ctx context.Context, e *Env) error {
	if err := e.Produce(ctx, "rk-producer-1", workerTopic, workerHold+2); err != nil {
		return err
	}
	w1, err := e.StartReady(ctx, gen.JavaConsumer, workerConsumer("rk-w1", map[string]any{"worker": true, "worker_hold": workerHold}))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-w1 holds record 30 and committed 32", func(rs []Report) bool {
		return countKind(rs, "rk-w1", "held") > 0 && committedBy(workerTopic, workerHold+2, "rk-w1")(rs)
	}); err != nil {
		return err
	}
	if err := w1.Kill(); err != nil {
		return err
	}
	e.Logf("rk-w1 SIGKILLed in generation %d with record %d in flight", lastGen(e.Reports(), "rk-w1"), workerHold)
	if err := e.Produce(ctx, "rk-producer-2", workerTopic, 20); err != nil {
		return err
	}
	// rk-w2's join completes once rk-w1's session expired.
	w2, err := e.StartReady(ctx, gen.JavaConsumer, workerConsumer("rk-w2", map[string]any{"worker": true}))
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "rk-w2 committed every record", committedBy(workerTopic, workerHold+22, "rk-w2")); err != nil {
		return err
	}
	return w2.Terminate(ctx)
}
