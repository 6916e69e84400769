package realkafka

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSeparateKafka3 runs the other layout on the other line: a Kafka 3.9
// cluster with inter-broker traffic on a listener of its own. A consumer
// group reads what a producer wrote; the capture must hold the follower
// fetches on the BROKER listeners, the quorum's on the CONTROLLER ones and
// only the consumer's on the CLIENT ones, and kwire must count them so:
// every Fetch on BROKER and CONTROLLER connections a replica fetch, every
// one on CLIENT connections a consumer's.
func TestSeparateKafka3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs: minutes on two cores")
	}
	kwire := BuildKwire(t)
	c := StartT(t, &Options{Layout: Separate, Version: Version3,
		Config: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		topic = "rk3-orders"
		group = "rk3-group"
		n     = 300
	)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("rk-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, topic, 3, 3)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("rk-producer"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("rk-consumer"),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, ctx.Err())
		}
		got += fs.NumRecords()
		if err := cons.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	logRSS(t, c)
	cons.Close()
	want := committed(ctx, t, admin, group, topic)
	admin.Close()

	// Stopped first, so that the capture and the counts below are of the
	// same traffic: the brokers' own fetches never pause.
	c.Stop()
	capture := filepath.Join(c.Dir(), "separate.pcapng")
	if _, err := c.WritePcapng(capture); err != nil {
		t.Fatal(err)
	}
	fetches := map[string]int{}
	listeners := c.Listeners()
	for _, conn := range c.Recorder().Conns() {
		fetches[listeners[conn.Server.String()].Name] += conn.Requests(1)
	}
	t.Logf("Fetch requests by listener: %v", fetches)
	if fetches[ListenerBroker] == 0 || fetches[ListenerController] == 0 || fetches[ListenerClient] == 0 {
		t.Errorf("Fetch requests by listener %v: want some on each of %s, %s and %s", fetches, ListenerClient, ListenerBroker, ListenerController)
	}
	sum := analyze(t, kwire, capture, c.Ports())
	g := sum.group(group)
	if g == nil {
		t.Fatalf("kwire found no group %q; groups: %v", group, sum.groupNames())
	}
	if d := DiffMaps(want, g.committed(topic)); d != "" {
		t.Errorf("committed offsets: kwire vs OffsetFetch at the end (-want +got):\n%s", d)
	}
	checkBrokerGenerations(t, c, g)
	if got, want := sum.Stats.ReplicaFetches, int64(fetches[ListenerBroker]+fetches[ListenerController]); got != want {
		t.Errorf("kwire counted %d replica fetches; the BROKER and CONTROLLER listeners relayed %d Fetch requests", got, want)
	}
	if got, want := sum.Stats.Fetches, int64(fetches[ListenerClient]); got != want {
		t.Errorf("kwire counted %d consumer fetches; the CLIENT listeners relayed %d Fetch requests", got, want)
	}
}
