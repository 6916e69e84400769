package realgen

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/gen"
)

func init() {
	register(Scenario{
		Name: "r_acks",
		Doc: "Java producers with acks=0 (rk-acks0: no Produce response), acks=1 (rk-acks1) and acks=all (rk-acksall), " +
			"30 records each to a topic of their own; then rk-acks1-loss writes with acks=1 (one record every 20 ms) while " +
			"the partition's leader is SIGKILLed: the followers fetch at most every 5 s (replica.fetch.min.bytes 1 MiB), so " +
			"records the leader acknowledged are on no follower; a follower becomes leader, gives their offsets to new " +
			"records, and the restarted broker truncates its log to the new leader's",
		Topics: map[string]int{acksTopic0: 1, acksTopic1: 1, acksTopicAll: 1, acksTopicLoss: 1},
		Config: acksConfig,
		Run:    runAcks,
		Truth:  acksTruth,
	})
}

const (
	acksTopic0    = "rk-acks-0"
	acksTopic1    = "rk-acks-1"
	acksTopicAll  = "rk-acks-all"
	acksTopicLoss = "rk-acks-loss"
	acksLossID    = "rk-acks1-loss"
)

// acksConfig holds the followers' fetches until 1 MiB is there to
// replicate or 5 s passed, so that an acks=1 producer's last records are
// on the leader alone for seconds, not milliseconds, when it dies.
var acksConfig = func() map[string]string {
	c := maps.Clone(quietReplicas)
	c["replica.fetch.min.bytes"] = "1048576"
	return c
}()

func acksProducer(client, topic, acks string, records int) map[string]any {
	return map[string]any{"client_id": client, "topic": topic, "partition": 0, "records": records, "size": 20, "acks": acks}
}

func runAcks(ctx context.Context, e *Env) error {
	for _, p := range []struct{ client, topic, acks string }{
		{"rk-acks0", acksTopic0, "0"}, {"rk-acks1", acksTopic1, "1"}, {"rk-acksall", acksTopicAll, "all"},
	} {
		if err := e.RunJava(ctx, gen.JavaProducer, acksProducer(p.client, p.topic, p.acks, 30)); err != nil {
			return err
		}
	}
	leader, err := e.leader(ctx, acksTopicLoss, 0)
	if err != nil {
		return err
	}
	a := acksProducer(acksLossID, acksTopicLoss, "1", 0)
	a["interval_ms"], a["progress_every"], a["report_acked"], a["linger_ms"] = 20, 25, true, 0
	p, err := e.StartReady(ctx, gen.JavaProducer, a)
	if err != nil {
		return err
	}
	if err := e.WaitFor(ctx, "300 records acknowledged", progressed(acksLossID, 300)); err != nil {
		return err
	}
	if err := e.C.Kill(leader); err != nil {
		return err
	}
	at := ackedSoFar(e.Reports(), acksLossID)
	e.Logf("leader node %d of %s/0 SIGKILLed after %d acknowledgements", leader, acksTopicLoss, at)
	if err := e.WaitFor(ctx, "100 more records acknowledged by the new leader", progressed(acksLossID, at+100)); err != nil {
		return err
	}
	if err := p.Terminate(ctx); err != nil {
		return fmt.Errorf("stop %s: %w", acksLossID, err)
	}
	if err := e.C.Restart(leader); err != nil {
		return err
	}
	if err := e.C.WaitReady(ctx); err != nil {
		return err
	}
	now, err := e.leader(ctx, acksTopicLoss, 0)
	if err != nil {
		return err
	}
	e.Logf("node %d restarted; %s/0 led by node %d", leader, acksTopicLoss, now)
	return nil
}

// progressed: client's progress reports count n acknowledgements.
func progressed(client string, n int64) func([]Report) bool {
	return func(rs []Report) bool { return ackedSoFar(rs, client) >= n }
}

// ackedSoFar is the last acknowledgement count client reported.
func ackedSoFar(rs []Report, client string) int64 {
	var n int64
	for _, r := range rs {
		if r.Kind == "progress" && r.ClientID == client {
			var p struct {
				Acked int64 `json:"acked"`
			}
			if jsonInto(r, &p) == nil {
				n = max(n, p.Acked)
			}
		}
	}
	return n
}

// leader asks the cluster's metadata which node leads topic/partition.
func (e *Env) leader(ctx context.Context, topic string, partition int32) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.C.Addrs()...), kgo.ClientID("rk-admin"))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("metadata %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == partition && p.ErrorCode == 0 && p.Leader >= 0 {
				return p.Leader, nil
			}
		}
	}
	return 0, fmt.Errorf("metadata %s: no leader for partition %d", topic, partition)
}

// acksTruth reads every topic's log and the records rk-acks1-loss had
// acknowledged that its log lost.
func acksTruth(ctx context.Context, e *Env, t *Truth) error {
	for _, topic := range []string{acksTopic0, acksTopic1, acksTopicAll, acksTopicLoss} {
		l, err := e.readLog(ctx, topic, 0)
		if err != nil {
			return err
		}
		t.Logs = append(t.Logs, l)
	}
	lost, err := ackedLost(e.Reports(), acksLossID, t.Logs[3])
	if err != nil {
		return err
	}
	e.Logf("%s: %d records acknowledged, %d of them lost %v", acksLossID, lost.Acked, lost.N, lost.Offsets)
	if lost.N == 0 {
		return fmt.Errorf("%s lost no acknowledged record: the leader had replicated everything when it died", acksLossID)
	}
	t.AckedLost = append(t.AckedLost, lost)
	return nil
}
