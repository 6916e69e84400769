package burrowcmp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realgen"
	"github.com/kwire/kwire/internal/realkafka"
)

// The run: one topic, a producer writing bursts, and one single-member
// Java consumer group per scenario. Every group keeps up until turnAt;
// then each turns as its scenario says (java/driver ConsumerMode, turn).
const (
	topic  = "bw-orders"
	parts  = 3
	period = 6 * time.Second // a burst every period
	// burst records per partition per burst, one every burstGap.
	burst    = 10
	burstGap = 100 * time.Millisecond
	periods  = 8
	// The groups turn just before the fourth burst.
	turnAt = 3*period - 300*time.Millisecond
	// healthWindow is kwire's --health-window. Samples from turnAt +
	// healthWindow on are judged: kwire's window then holds only the
	// turned behaviour.
	healthWindow = 10 * time.Second
)

// scenarios are the groups, what each does after turnAt, and the states
// both tools must give it once judged.
var scenarios = []struct {
	group, turn, doc string
	burrow, kwire    string
}{
	{"bw-ok", "", "keeps up", "OK", "ok"},
	{"bw-nocommit", "no_commit", "fetches on, commits nothing", "STOP", "stopped"},
	{"bw-hang", "hang", "processing hangs: heartbeats, no fetches", "STOP", "stopped"},
	{"bw-stall", "stall", "polls no more, commits the same offsets every second", "STALL", "stalled"},
}

// TestBurrow is issue 41's last acceptance point: Burrow, pointed at a
// real cluster, and kwire, reading the capture of the same run, watch one
// producer and four consumer groups (one that keeps up, one that stops
// committing while it fetches, one whose processing hangs, one that
// commits the same offset while lag grows). At every settled moment
// (after a burst, once Burrow has read the last commit and the end
// offsets) each partition's lag is the same in both; the consumer states
// are logged side by side and must agree before the turn and once kwire's
// health window holds only the turned behaviour.
//
// Kafka 3.9, not 4.4: Burrow 1.2.1 (Debian's) asks the brokers for end
// offsets with ListOffsets v0 whatever its kafka-version, and Kafka 4.0
// removed v0 (KIP-896): a 4.4 broker closes the connection, so Burrow has
// no end offsets and evaluates nothing (TestBurrowKafka4).
func TestBurrow(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs, ZooKeeper, Burrow and four Java consumers: minutes on two cores")
	}
	_, err := Find()
	need(t, err)
	d, err := gen.FindJavaDriver()
	need(t, err)
	kwire := realkafka.BuildKwire(t)
	c := realkafka.StartT(t, &realkafka.Options{Version: realkafka.Version3,
		Config: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("bw-producer"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	createTopic(ctx, t, cl)
	waitLeaders(ctx, t, cl)
	b := startBurrow(ctx, t, c, d.Java)
	if err := b.waitTopic(ctx, topic, parts); err != nil {
		t.Fatal(err) // commits Burrow reads before it knows the topic's end are dropped
	}

	// The consumers are told when to turn as they start: the first burst
	// is far enough ahead for four JVMs to start and join (~7 s here).
	start := time.Now().Add(20 * time.Second).Truncate(time.Second)
	e := &realgen.Env{C: c, D: d, Logf: t.Logf}
	var children []*gen.Child
	for _, s := range scenarios {
		ch, err := e.StartReady(ctx, gen.JavaConsumer, consumerArgs(s.group, s.turn, start.Add(turnAt)))
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, ch)
	}
	if time.Until(start) < 0 {
		t.Fatalf("the consumers were ready %v after the first burst was due: start them earlier", -time.Until(start))
	}
	t.Logf("consumers ready; the first burst at +%v", time.Until(start).Round(time.Millisecond))
	r := &run{t: t, b: b, c: c, e: e, cl: cl, dir: filepath.Join(c.Dir(), "samples")}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range periods {
		r.period(ctx, start.Add(time.Duration(k)*period), k)
	}
	for _, ch := range children {
		if err := ch.Terminate(ctx); err != nil {
			t.Errorf("stop consumer: %v", err)
		}
	}
	b.Stop()
	r.compare(kwire, start)
}

// need skips the test for a missing tool, or fails it under CI=true.
func need(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %v", err)
	}
	t.Skip(err)
}

func consumerArgs(group, turn string, at time.Time) map[string]any {
	a := map[string]any{
		"client_id": group + "-member", "group": group, "topics": []string{topic},
		"assignor": "range", "commit": "sync", "session_timeout_ms": 10000, "heartbeat_ms": 1000,
		"max_poll_interval_ms": 300000, // a hung member stays in its group
	}
	if turn != "" {
		a["turn"], a["turn_at_ms"], a["stall_commit_ms"] = turn, at.UnixMilli(), 1000
	}
	return a
}

// startBurrow starts Burrow on c's client listeners, its files in the
// cluster's directory (kept when the test fails). Burrow's own requests
// (Metadata, ListOffsets, the Fetches of __consumer_offsets) cross the
// relays and are in the capture: the brokers advertise the relays'
// addresses, so a client bootstrapped on the brokers' own ports would be
// sent to the relays anyway.
func startBurrow(ctx context.Context, t *testing.T, c *realkafka.Cluster, java string) *Burrow {
	t.Helper()
	dir := filepath.Join(c.Dir(), "burrow")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Start(ctx, Options{Brokers: c.Addrs(), KafkaVersion: "2.1.0", Java: java,
		ZooKeeperLib: realkafka.LibDir(realkafka.Version3), Dir: dir,
		// Five commits a partition, one second apart at least; end
		// offsets every second: Burrow's window spans seconds, not
		// its default minutes.
		Intervals: 5, OffsetRefresh: 1, MinDistance: 1})
	if errors.Is(err, ErrMissing) {
		need(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop) // its log stays with the brokers' when the test fails
	return b
}

func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 3
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// waitLeaders waits until every partition of topic's leader answers
// ListOffsets. Burrow 1.2.1 stores the end offsets of the partitions
// that answer, and its topic endpoint panics on a topic some of whose
// partitions did not (UNKNOWN_TOPIC_OR_PARTITION from a leader that had
// not made the partition yet; a run failed so): it must not see the
// topic half made.
func waitLeaders(ctx context.Context, t *testing.T, cl *kgo.Client) {
	t.Helper()
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range int32(parts) {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		ready := 0
		if err == nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode == 0 {
						ready++
					}
				}
			}
		}
		if ready == parts {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d partitions' leaders answer ListOffsets (%v)", topic, ready, parts, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// run is the state of TestBurrow's run.
type run struct {
	t   *testing.T
	b   *Burrow
	c   *realkafka.Cluster
	e   *realgen.Env
	cl  *kgo.Client
	dir string

	mu      sync.Mutex
	ends    [parts]int64 // after the records the producer got acknowledged
	samples []*sample
}

// period produces burst k from at, samples both tools in the middle of
// it, and again once Burrow has caught up with it.
func (r *run) period(ctx context.Context, at time.Time, k int) {
	wait(ctx, at)
	done := make(chan error, 1)
	go func() { done <- r.produce(ctx) }()
	wait(ctx, at.Add(burst*burstGap/2))
	r.sample(ctx, fmt.Sprintf("%d-mid", k), false)
	if err := <-done; err != nil {
		r.t.Fatalf("produce: %v", err)
	}
	settled := r.settle(ctx, at.Add(period-500*time.Millisecond))
	r.sample(ctx, fmt.Sprintf("%d", k), settled)
}

// produce writes one burst: a record to every partition every burstGap.
func (r *run) produce(ctx context.Context) error {
	tick := time.NewTicker(burstGap)
	defer tick.Stop()
	for range burst {
		var rs []*kgo.Record
		for p := range int32(parts) {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("order")})
		}
		if err := r.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return err
		}
		r.mu.Lock()
		for _, rec := range rs {
			r.ends[rec.Partition] = max(r.ends[rec.Partition], rec.Offset+1)
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// wait waits until at (or ctx's end).
func wait(ctx context.Context, at time.Time) {
	tm := time.NewTimer(time.Until(at))
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
