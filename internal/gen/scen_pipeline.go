package gen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var pipelineScenario = Scenario{
	Name: "pipeline",
	Doc: "two clients at once: a kgo producer in a child process writes 1000 records to pipe (3 partitions) " +
		"50 records every 5 ms with up to 5 idempotent Produce requests in flight per broker, while an in-process kgo client fires 30 " +
		"concurrent Metadata/ListOffsets requests at broker 0 (pipelined on one connection) and a one-member " +
		"group pipe-group reads and commits everything",
	Options: Options{
		Link:  LinkSLL2,
		Kfake: []kfake.Opt{kfake.SeedTopics(3, "pipe")},
	},
	Run: runPipeline,
}

// ProducerArgs are the arguments of the "producer" child.
type ProducerArgs struct {
	ClientID string `json:"client_id"`
	Topic    string `json:"topic"`
	Records  int    `json:"records"`
	Size     int    `json:"size"`
	// Hold keeps the child running after producing, until SIGTERM or
	// its deadline, so a scenario can kill or freeze it.
	Hold bool `json:"hold"`
}

// childProducer produces Records records asynchronously (so requests
// pipeline) and exits, or holds until told to stop.
func childProducer(ctx context.Context, env *ChildEnv) error {
	var a ProducerArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	cl, err := env.Kgo(kgo.ClientID(a.ClientID), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	env.Ready()
	// Fifty records every 5 ms without waiting for acknowledgements: kgo
	// keeps several Produce requests in flight per broker.
	errs := make(chan error, a.Records)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := range a.Records {
		if i%50 == 0 {
			<-tick.C
		}
		cl.Produce(ctx, &kgo.Record{Topic: a.Topic, Value: value(i, a.Size)}, func(_ *kgo.Record, err error) { errs <- err })
	}
	for range a.Records {
		if err := <-errs; err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	if a.Hold {
		<-ctx.Done()
	}
	return nil
}

func runPipeline(ctx context.Context, c *Cluster) error {
	const topic, group, n = "pipe", "pipe-group", 1000
	ch, err := c.startReady(ctx, "producer", ProducerArgs{ClientID: "child-producer", Topic: topic, Records: n, Size: 100},
		"producer child", "it was ready")
	if err != nil {
		return err
	}

	prog := newProgress(n)
	m, err := startMember(ctx, c, prog, groupOpts("pipe-member", group, topic)...)
	if err != nil {
		return err
	}
	cl, err := c.Kgo(kgo.ClientID("pipeliner"))
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 30)
	b := cl.Broker(0)
	for i := range errs {
		wg.Go(func() {
			var req kmsg.Request = kmsg.NewPtrMetadataRequest()
			if i%2 == 1 {
				lo := kmsg.NewPtrListOffsetsRequest()
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = topic
				lp := kmsg.NewListOffsetsRequestTopicPartition()
				lp.Timestamp = -1
				lt.Partitions = append(lt.Partitions, lp)
				lo.Topics = append(lo.Topics, lt)
				req = lo
			}
			_, errs[i] = b.Request(ctx, req)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pipelined requests: %w", err)
	}
	cl.Close()
	if err := ch.Wait(ctx); err != nil {
		return fmt.Errorf("producer child: %w", err)
	}
	if err := prog.wait(ctx, "pipe consume"); err != nil {
		return err
	}
	m.stop()
	if err := c.RecordCommitted(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
