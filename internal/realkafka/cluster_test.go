package realkafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterCaptures runs a consumer group on a real 3-node Kafka 4.4
// cluster (Shared layout), SIGKILLs the group's coordinator half-way,
// writes the relays' capture and checks kwire's offline analysis of it
// against what the clients and the brokers said: the group, every
// generation its members were in, its committed offsets as OffsetFetch
// returns them at the end, and the followers' replica Fetches.
func TestClusterCaptures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs: minutes on two cores")
	}
	kwire := BuildKwire(t)
	start := time.Now()
	c := StartT(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const (
		topic = "rk-orders"
		group = "rk-group"
		half  = 600
	)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("rk-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	createTopic(ctx, t, admin, topic, 3, 3)

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID("rk-producer"),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "order %d", i)}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	var consumed consumedCounter
	gens := map[int32]bool{} // generations the members saw themselves in
	var gmu sync.Mutex
	var wg sync.WaitGroup
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	consumers := make([]*kgo.Client, 2)
	for i := range consumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ClientID(fmt.Sprintf("rk-consumer-%d", i)),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		consumers[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				consumed.add(fs.NumRecords())
				if err := cl.CommitUncommittedOffsets(cctx); err != nil && cctx.Err() == nil {
					t.Logf("consumer %d: commit: %v", i, err)
				}
				if _, gen := cl.GroupMetadata(); gen >= 0 {
					gmu.Lock()
					gens[gen] = true
					gmu.Unlock()
				}
			}
		}()
	}

	produce(0, half)
	consumed.wait(ctx, t, half)
	logRSS(t, c)
	coord := coordinator(ctx, t, admin, group)
	t.Logf("%v: %d records consumed; SIGKILL node %d, the group's coordinator", time.Since(start).Round(time.Second), half, coord)
	if err := c.Kill(coord); err != nil {
		t.Fatal(err)
	}
	produce(half, half)
	consumed.wait(ctx, t, 2*half)
	t.Logf("%v: %d records consumed; restart node %d", time.Since(start).Round(time.Second), 2*half, coord)
	if err := c.Restart(coord); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: node %d back", time.Since(start).Round(time.Second), coord)
	stopConsumers()
	wg.Wait()
	for _, cl := range consumers {
		// A last commit of what the final polls fetched, then leave.
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Logf("final commit: %v", err)
		}
		cl.Close()
	}
	want := committed(ctx, t, admin, group, topic)
	admin.Close()
	prod.Close()

	// Stopped first, so that the capture and the counts below are of the
	// same traffic: the brokers' own fetches never pause.
	c.Stop()
	capture := filepath.Join(c.Dir(), "cluster.pcapng") // kept with the logs when the test fails
	n, err := c.WritePcapng(capture)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %d packets in %s", time.Since(start).Round(time.Second), n, capture)
	sum := analyze(t, kwire, capture, c.Ports())

	g := sum.group(group)
	if g == nil {
		t.Fatalf("kwire found no group %q; groups: %v", group, sum.groupNames())
	}
	if d := DiffMaps(want, g.committed(topic)); d != "" {
		t.Errorf("committed offsets: kwire vs OffsetFetch at the end (-want +got):\n%s", d)
	}
	var kgens []int32
	for _, ge := range g.Generations {
		kgens = append(kgens, ge.Generation)
	}
	gmu.Lock()
	for gen := range gens {
		if !slices.Contains(kgens, gen) {
			t.Errorf("generation %d (a member was in it) not in kwire's %v", gen, kgens)
		}
	}
	gmu.Unlock()
	checkBrokerGenerations(t, c, g)
	if sum.Stats.ReplicaFetches == 0 {
		t.Errorf("kwire counted no replica fetches; followers replicate %s and __consumer_offsets over the shared listener", topic)
	}
	if n := sum.Stats.UnknownFetchSessions; n != 0 {
		t.Errorf("kwire counted %d unknown fetch sessions; every session opens in the capture", n)
	}
	t.Logf("kwire: group %s generations %v, %d replica fetches, %d consumer fetches (%d unattributed), hazards %v",
		group, kgens, sum.Stats.ReplicaFetches, sum.Stats.Fetches, sum.Stats.FetchesUnknown, g.HazardCounts)
	keepFiles(t, capture, filepath.Join(c.Dir(), "analyze.ndjson"))
}

// consumedCounter counts records the consumers polled.
type consumedCounter struct {
	mu   sync.Mutex
	n    int
	more chan struct{}
}

func (c *consumedCounter) add(n int) {
	c.mu.Lock()
	c.n += n
	if c.more != nil {
		close(c.more)
		c.more = nil
	}
	c.mu.Unlock()
}

// wait waits until at least n records were consumed.
func (c *consumedCounter) wait(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		c.mu.Lock()
		got := c.n
		if c.more == nil {
			c.more = make(chan struct{})
		}
		more := c.more
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-more:
		case <-ctx.Done():
			t.Fatalf("consumed %d records of %d: %v", got, n, ctx.Err())
		}
	}
}

func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func coordinator(ctx context.Context, t *testing.T, cl *kgo.Client, group string) int32 {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("find coordinator: %v", err)
	}
	if len(resp.Coordinators) > 0 {
		return resp.Coordinators[0].NodeID
	}
	return resp.NodeID
}

// committed is the group's committed offsets of topic by partition, as
// the coordinator answers an OffsetFetch.
func committed(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string) map[string]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	// The client may still hold the killed coordinator: kgo gives up on a
	// dial refused, and asks FindCoordinator again on the next request.
	var resp *kmsg.OffsetFetchResponse
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var err error
		if resp, err = req.RequestWith(ctx, cl); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("offset fetch: %v", err)
		case <-tick.C:
		}
	}
	out := map[string]int64{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			t.Fatalf("offset fetch: %v", err)
		}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == topic && p.Offset >= 0 {
					out[fmt.Sprintf("%s/%d", tp.Topic, p.Partition)] = p.Offset
				}
			}
		}
	}
	for _, tp := range resp.Topics { // OffsetFetch v0-v7's layout
		for _, p := range tp.Partitions {
			if tp.Topic == topic && p.Offset >= 0 {
				out[fmt.Sprintf("%s/%d", tp.Topic, p.Partition)] = p.Offset
			}
		}
	}
	return out
}

// summary is the part of kwire's summary line these tests read.
type summary struct {
	Groups []summaryGroup `json:"groups"`
	Stats  struct {
		Fetches        int64 `json:"fetches"`
		FetchesUnknown int64 `json:"fetches_unattributed"`
		ReplicaFetches int64 `json:"replica_fetches"`
		// UnknownFetchSessions: incremental Fetches of a session kwire
		// never saw open; every session here opens in the capture.
		UnknownFetchSessions int64 `json:"unknown_fetch_sessions"`
	} `json:"stats"`
}

type summaryGroup struct {
	Group       string `json:"group"`
	Generations []struct {
		Generation int32  `json:"generation"`
		Leader     string `json:"leader"`
		Members    []struct {
			MemberID string `json:"member_id"`
		} `json:"members"`
	} `json:"generations"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed *int64 `json:"committed"`
	} `json:"partitions"`
	HazardCounts map[string]int `json:"hazard_counts"`
}

func (s *summary) group(name string) *summaryGroup {
	for i := range s.Groups {
		if s.Groups[i].Group == name {
			return &s.Groups[i]
		}
	}
	return nil
}

func (s *summary) groupNames() []string {
	var out []string
	for _, g := range s.Groups {
		out = append(out, g.Group)
	}
	return out
}

func (g *summaryGroup) committed(topic string) map[string]int64 {
	out := map[string]int64{}
	for _, p := range g.Partitions {
		if p.Topic == topic && p.Committed != nil {
			out[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = *p.Committed
		}
	}
	return out
}

// analyze runs kwire analyze --json on capture, with ports as the
// brokers' ports, and returns its summary line. The whole output is
// logged when the test fails.
func analyze(t *testing.T, kwire, capture string, ports []int) *summary {
	t.Helper()
	var ps []string
	for _, p := range ports {
		ps = append(ps, fmt.Sprint(p))
	}
	cmd := exec.Command(kwire, "analyze", "--json", "--port", strings.Join(ps, ","), capture)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kwire analyze: %v\n%s", err, stderr.String())
	}
	out2 := filepath.Join(filepath.Dir(capture), "analyze.ndjson")
	_ = os.WriteFile(out2, out, 0o644)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kwire analyze output: %s (stderr: %s)", out2, stderr.String())
		}
	})
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(sc.Bytes(), &head) != nil || head.Type != "summary" {
			continue
		}
		var s summary
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("kwire summary: %v", err)
		}
		return &s
	}
	t.Fatalf("kwire analyze wrote no summary line")
	return nil
}

// logRSS logs each running JVM's resident memory (VmRSS).
func logRSS(t *testing.T, c *Cluster) {
	t.Helper()
	var parts []string
	for _, id := range c.Nodes() {
		pid := c.PID(id)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if pid == 0 || err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				parts = append(parts, fmt.Sprintf("node %d %s", id, strings.Join(strings.Fields(l)[1:], " ")))
			}
		}
	}
	t.Logf("JVM resident memory: %s", strings.Join(parts, ", "))
}

// keepFiles copies files into $REALKAFKA_KEEP, when set, to study a
// capture of a test that passed.
func keepFiles(t *testing.T, files ...string) {
	dir := os.Getenv("REALKAFKA_KEEP")
	if dir == "" {
		return
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			t.Logf("REALKAFKA_KEEP: %v", err)
		}
	}
}

// brokerGeneration is one generation of a classic group as its coordinator
// logged it.
type brokerGeneration struct {
	Members int
	Leader  string
}

var (
	stabilizedRE = regexp.MustCompile(`Stabilized group (\S+) generation (\d+) .*?with (\d+) members`)
	assignmentRE = regexp.MustCompile(`Assignment received from leader (\S+) for group (\S+) for generation (\d+)`)
)

// brokerGenerations reads group's generations from every node's
// server.log (the group coordinator's INFO lines, Kafka 3.9 and 4.4 alike).
func brokerGenerations(t *testing.T, c *Cluster, group string) map[int32]*brokerGeneration {
	t.Helper()
	out := map[int32]*brokerGeneration{}
	get := func(gen string) *brokerGeneration {
		var n int32
		fmt.Sscan(gen, &n)
		if out[n] == nil {
			out[n] = &brokerGeneration{}
		}
		return out[n]
	}
	for _, id := range c.Nodes() {
		b, err := os.ReadFile(c.LogFile(id))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range stabilizedRE.FindAllStringSubmatch(string(b), -1) {
			if m[1] == group {
				fmt.Sscan(m[3], &get(m[2]).Members)
			}
		}
		for _, m := range assignmentRE.FindAllStringSubmatch(string(b), -1) {
			if m[2] == group {
				get(m[3]).Leader = m[1]
			}
		}
	}
	return out
}

// checkBrokerGenerations compares kwire's generations of g with those the
// coordinators logged: same numbers, member counts and leaders.
func checkBrokerGenerations(t *testing.T, c *Cluster, g *summaryGroup) {
	t.Helper()
	want := brokerGenerations(t, c, g.Group)
	if len(want) == 0 {
		t.Fatalf("no generation of %s in the brokers' logs", g.Group)
	}
	got := map[int32]*brokerGeneration{}
	for _, ge := range g.Generations {
		got[ge.Generation] = &brokerGeneration{Members: len(ge.Members), Leader: ge.Leader}
	}
	for gen, w := range want {
		gg := got[gen]
		if gg == nil {
			t.Errorf("generation %d (%d members, leader %s) in the broker's log, not in kwire's", gen, w.Members, w.Leader)
			continue
		}
		if *gg != *w {
			t.Errorf("generation %d: kwire %+v, broker %+v", gen, *gg, *w)
		}
	}
	for gen := range got {
		if want[gen] == nil {
			t.Errorf("generation %d in kwire's story, not in the brokers' logs", gen)
		}
	}
	t.Logf("generations of %s as the coordinators logged them: %d", g.Group, len(want))
}
