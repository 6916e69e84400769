package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// jrep is one Java driver report line: groupReport's fields plus the
// Java-only ones (commits, producer acks, share acknowledgements, admin
// results).
type jrep struct {
	groupReport
	Offsets       map[string]map[string]int64 `json:"offsets"`
	OK            *bool                       `json:"ok"`
	Error         string                      `json:"error"`
	How           string                      `json:"how"`
	Result        json.RawMessage             `json:"result"`
	Op            string                      `json:"op"`
	FirstOffset   int64                       `json:"first_offset"`
	LastOffset    int64                       `json:"last_offset"`
	Acks          json.RawMessage             `json:"acks"`
	Errors        int64                       `json:"errors"`
	DeliveryCount int                         `json:"delivery_count"`
	// MaxDeliveryCount is a share_acks report's highest delivery count.
	MaxDeliveryCount int    `json:"max_delivery_count"`
	Ack              string `json:"ack"`
	TxnResult        string `json:"-"`
	To               string `json:"to"`
	Threads          []struct {
		Active map[string]map[string][]int32 `json:"active"`
	} `json:"threads"`
}

// javaReports collects a driver's report lines: typed (jrep) for the
// test's checks and in a groupRecorder, as Cluster.StartJava would, so
// that the truth machinery is checked on them too.
type javaReports struct {
	mu      sync.Mutex
	all     []jrep
	rec     *groupRecorder
	changed chan struct{}
}

func newJavaReports() *javaReports {
	return &javaReports{rec: newGroupRecorder(), changed: make(chan struct{})}
}

func (r *javaReports) line(b []byte) {
	var j jrep
	_ = json.Unmarshal(b, &j)
	var res struct {
		Result string `json:"result"`
	}
	if j.Kind == "txn" && json.Unmarshal(b, &res) == nil {
		j.TxnResult = res.Result
	}
	r.rec.addLine(b)
	r.mu.Lock()
	r.all = append(r.all, j)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *javaReports) snapshot() ([]jrep, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all), r.changed
}

// kind returns the reports of kind.
func (r *javaReports) kind(kind string) []jrep {
	all, _ := r.snapshot()
	return slices.DeleteFunc(all, func(j jrep) bool { return j.Kind != kind })
}

// wait waits until done holds on the reports so far.
func (r *javaReports) wait(ctx context.Context, t *testing.T, what string, done func([]jrep) bool) {
	t.Helper()
	for {
		all, changed := r.snapshot()
		if done(all) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; reports so far:\n%s", what, ctx.Err(), dumpReports(all))
		}
	}
}

func dumpReports(all []jrep) string {
	var s string
	for _, j := range all {
		b, _ := json.Marshal(j)
		s += string(b) + "\n"
	}
	return s
}

// javaHarness starts driver modes against one real broker.
type javaHarness struct {
	d       *JavaDriver
	brokers []string
}

// start starts mode and stops it (SIGTERM) when the test ends.
func (h *javaHarness) start(ctx context.Context, t *testing.T, mode string, args any) (*Child, *javaReports) {
	t.Helper()
	r := newJavaReports()
	return h.startInto(ctx, t, r, mode, args), r
}

// startInto is start with the reports going to r (several members, one
// recorder).
func (h *javaHarness) startInto(ctx context.Context, t *testing.T, r *javaReports, mode string, args any) *Child {
	t.Helper()
	ch, err := h.d.Start(ctx, h.brokers, mode, args, r.line)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = ch.Terminate(ctx)
	})
	return ch
}

// ready waits until ch is ready.
func ready(ctx context.Context, t *testing.T, ch *Child, r *javaReports) {
	t.Helper()
	select {
	case <-ch.Ready():
	case <-ch.Done():
		all, _ := r.snapshot()
		t.Fatalf("%s exited before ready: %v\n%s", ch.Name, ch.err, dumpReports(all))
	case <-ctx.Done():
		all, _ := r.snapshot()
		t.Fatalf("%s not ready: %v\n%s", ch.Name, ctx.Err(), dumpReports(all))
	}
}

// run starts mode, waits for it to exit by itself and returns its reports.
func (h *javaHarness) run(ctx context.Context, t *testing.T, mode string, args any) *javaReports {
	t.Helper()
	ch, r := h.start(ctx, t, mode, args)
	if err := ch.Wait(ctx); err != nil {
		all, _ := r.snapshot()
		t.Fatalf("%s: %v\n%s", ch.Name, err, dumpReports(all))
	}
	return r
}

// admin runs ops and returns their reports, failing on a failed op
// unless mayFail.
func (h *javaHarness) admin(ctx context.Context, t *testing.T, mayFail bool, ops ...map[string]any) []jrep {
	t.Helper()
	out := h.run(ctx, t, JavaAdmin, map[string]any{"ops": ops}).kind("admin")
	if len(out) != len(ops) {
		t.Fatalf("admin: %d reports for %d ops:\n%s", len(out), len(ops), dumpReports(out))
	}
	for _, a := range out {
		if !mayFail && (a.OK == nil || !*a.OK) {
			t.Fatalf("admin %s failed: %s", a.Op, a.Error)
		}
	}
	return out
}

// produceTo writes n records round-robin over partitions with kgo.
func produceTo(ctx context.Context, t *testing.T, brokers []string, topic string, partitions int32, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

func values(n int) []string {
	var vs []string
	for i := range n {
		vs = append(vs, fmt.Sprintf("v%d", i))
	}
	return vs
}

// lastOwned returns each client's latest owned report.
func lastOwned(all []jrep, group string) map[string]jrep {
	out := map[string]jrep{}
	for _, j := range all {
		if j.Kind == "owned" && j.Group == group {
			out[j.ClientID] = j
		}
	}
	return out
}

// committedMax is, per partition of topic, the highest offset of the
// accepted commits of kind how ("" any).
func committedMax(all []jrep, how, topic string) map[string]int64 {
	out := map[string]int64{}
	for _, j := range all {
		if j.Kind == "commit" && (how == "" || j.How == how) && j.OK != nil && *j.OK {
			for p, o := range j.Offsets[topic] {
				out[p] = max(out[p], o)
			}
		}
	}
	return out
}

// TestJavaDriver runs every mode of the Java driver (java/driver) against
// a real Apache Kafka 4.4.0 broker and checks what the clients report.
// It skips without java, Maven or the built driver (make java-driver),
// and fails instead under CI.
func TestJavaDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM broker and many JVM clients")
	}
	d, err := FindJavaDriver()
	if err != nil {
		javaSkip(t, err.Error())
	}
	h := &javaHarness{d: d, brokers: []string{tempKafka(t, d.Java)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	topics := map[string]int{"j-acks": 1, "j-range": 4, "j-coop": 4, "j-848": 4, "j-slow": 2, "j-worker": 1,
		"j-share": 1, "j-share2": 1, "j-share3": 1, "j-txn": 1, "j-ctp-in": 2, "j-ctp-out": 2, "j-st-in": 2, "j-st-out": 2}
	var specs []map[string]any
	for _, n := range slices.Sorted(maps.Keys(topics)) {
		specs = append(specs, map[string]any{"name": n, "partitions": topics[n]})
	}
	start := time.Now()
	ch, r := h.start(ctx, t, JavaAdmin, map[string]any{"ops": []map[string]any{
		{"op": "create_topics", "topics": specs},
		{"op": "alter_group_config", "group": "j-share", "configs": map[string]string{"share.auto.offset.reset": "earliest"}},
		{"op": "alter_group_config", "group": "j-share2", "configs": map[string]string{"share.auto.offset.reset": "earliest"}},
		{"op": "alter_group_config", "group": "j-share3", "configs": map[string]string{"share.auto.offset.reset": "earliest"}},
	}})
	ready(ctx, t, ch, r)
	t.Logf("java driver: JVM start to ready (Admin created) in %v", time.Since(start).Round(time.Millisecond))
	if err := ch.Wait(ctx); err != nil {
		t.Fatalf("admin: %v", err)
	}
	for _, a := range r.kind("admin") {
		if a.OK == nil || !*a.OK {
			t.Fatalf("admin %s: %s", a.Op, a.Error)
		}
	}

	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, t *testing.T, h *javaHarness)
	}{
		{"producer_acks", javaProducerAcks},
		{"classic_range", javaClassicRange},
		{"cooperative_static_async", javaCoopStatic},
		{"auto_commit", javaAutoCommit},
		{"kip848", javaKIP848},
		{"slow_poll", javaSlowPoll},
		{"worker", javaWorker},
		{"share", javaShare},
		{"txn", javaTxn},
		{"ctp", javaCTP},
		{"streams", javaStreams},
		{"admin_paths", javaAdminPaths},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			tc.run(ctx, t, h)
		})
	}
}

// javaProducerAcks: acks 0 gets no offsets back (no Produce response),
// acks 1 and all do; the idempotent producer too.
func javaProducerAcks(ctx context.Context, t *testing.T, h *javaHarness) {
	type got struct {
		Records, Errors int64
		HasOffsets      bool
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want got
	}{
		{"acks0", map[string]any{"acks": "0"}, got{Records: 5}},
		{"acks1", map[string]any{"acks": "1"}, got{Records: 5, HasOffsets: true}},
		{"acksall", map[string]any{"acks": "all"}, got{Records: 5, HasOffsets: true}},
		{"idempotent", map[string]any{"acks": "all", "idempotent": true}, got{Records: 5, HasOffsets: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"client_id": "j-" + tc.name, "topic": "j-acks", "partition": 0, "records": 5}
			maps.Copy(args, tc.args)
			ps := h.run(ctx, t, JavaProducer, args).kind("produced")
			if len(ps) != 1 {
				t.Fatalf("want one produced report, got %d", len(ps))
			}
			g := got{Records: ps[0].Records, Errors: ps[0].Errors, HasOffsets: ps[0].LastOffset >= 0}
			if diff := cmpJSON(tc.want, g); diff != "" {
				t.Errorf("produced (-want +got):\n%s", diff)
			}
		})
	}
}

// javaClassicRange: two range members split four partitions two and
// two; the groups truth (gensClassic) rebuilds the generation from the
// members' plan and sync reports; every record is committed.
func javaClassicRange(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-range", 4, values(40)...)
	r := newJavaReports()
	for i := range 2 {
		ch := h.startInto(ctx, t, r, JavaConsumer, map[string]any{"group": "j-range", "topics": []string{"j-range"},
			"client_id": fmt.Sprintf("j-range-%d", i), "assignor": "range", "commit": "sync"})
		ready(ctx, t, ch, r)
	}
	// The groups truth's own reading of the reports (plan, sync).
	split := func() (Generation, bool) {
		gs, _ := r.rec.gensClassic("j-range")
		if len(gs) == 0 {
			return Generation{}, false
		}
		g := gs[len(gs)-1]
		if len(g.Members) != 2 || !g.Completed {
			return g, false
		}
		for _, m := range g.Members {
			if len(m.Assignment["j-range"]) != 2 {
				return g, false
			}
		}
		return g, true
	}
	r.wait(ctx, t, "a generation splitting 4 partitions 2/2", func([]jrep) bool { _, ok := split(); return ok })
	g, _ := split()
	if g.Generation < 1 || g.Protocol != "range" || g.Leader == "" {
		t.Errorf("generation %d protocol %q leader %q: want >= 1, range, a leader", g.Generation, g.Protocol, g.Leader)
	}
	r.wait(ctx, t, "every record committed", func(all []jrep) bool {
		var sum int64
		for _, o := range committedMax(all, "sync", "j-range") {
			sum += o
		}
		return sum == 40
	})
	desc := h.admin(ctx, t, false, map[string]any{"op": "describe_groups", "groups": []string{"j-range"}})
	var groups map[string]struct {
		State, Type, Protocol string
		Members               []json.RawMessage
	}
	if err := json.Unmarshal(desc[0].Result, &groups); err != nil {
		t.Fatal(err)
	}
	want := struct {
		State, Type, Protocol string
		Members               int
	}{"Stable", "Classic", "range", 2}
	gd := groups["j-range"]
	if diff := cmpJSON(want, struct {
		State, Type, Protocol string
		Members               int
	}{gd.State, gd.Type, gd.Protocol, len(gd.Members)}); diff != "" {
		t.Errorf("describe j-range (-want +got):\n%s", diff)
	}
}

// javaCoopStatic: a static cooperative-sticky member committing
// asynchronously, SIGKILLed and restarted with the same group.instance.id
// inside its session: it gets its partitions back under a new member id.
func javaCoopStatic(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-coop", 4, values(8)...)
	args := map[string]any{"group": "j-coop", "topics": []string{"j-coop"}, "client_id": "j-coop-0",
		"instance_id": "static-0", "assignor": "cooperative-sticky", "commit": "async", "session_timeout_ms": 30000}
	ch, r := h.start(ctx, t, JavaConsumer, args)
	ready(ctx, t, ch, r)
	r.wait(ctx, t, "an accepted async commit of all 8 records", func(all []jrep) bool {
		var sum int64
		for _, o := range committedMax(all, "async", "j-coop") {
			sum += o
		}
		return sum == 8
	})
	first := lastOwned(r.kind("owned"), "j-coop")["j-coop-0"]
	if err := ch.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ch.Done()
	ch2, r2 := h.start(ctx, t, JavaConsumer, args)
	ready(ctx, t, ch2, r2)
	second := lastOwned(r2.kind("owned"), "j-coop")["j-coop-0"]
	type member struct {
		Instance   string
		Protocol   string
		Assignment map[string][]int32
	}
	syncs := r.kind("sync")
	if len(syncs) == 0 {
		t.Fatal("no sync report")
	}
	for i, o := range []jrep{first, second} {
		got := member{Assignment: o.Assignment, Protocol: syncs[0].Protocol}
		if o.InstanceID != nil {
			got.Instance = *o.InstanceID
		}
		want := member{"static-0", "cooperative-sticky", map[string][]int32{"j-coop": {0, 1, 2, 3}}}
		if diff := cmpJSON(want, got); diff != "" {
			t.Errorf("member %d (-want +got):\n%s", i, diff)
		}
	}
	if first.MemberID == second.MemberID || first.MemberID == "" {
		t.Errorf("static member restarted: member ids %q then %q, want two different ones", first.MemberID, second.MemberID)
	}
	t.Logf("static rejoin: %s generation %d -> %s generation %d", first.MemberID, first.Generation, second.MemberID, second.Generation)
}

// javaAutoCommit: enable.auto.commit commits are seen by the interceptor
// (committed reports): everything read is committed.
func javaAutoCommit(ctx context.Context, t *testing.T, h *javaHarness) {
	ch, r := h.start(ctx, t, JavaConsumer, map[string]any{"group": "j-auto", "topics": []string{"j-range"},
		"client_id": "j-auto-0", "commit": "auto", "auto_commit_interval_ms": 500})
	ready(ctx, t, ch, r)
	r.wait(ctx, t, "auto commits covering the 40 records", func(all []jrep) bool {
		m := map[string]int64{}
		for _, j := range all {
			if j.Kind == "committed" {
				for p, o := range j.Offsets["j-range"] {
					m[p] = max(m[p], o)
				}
			}
		}
		return m["0"]+m["1"]+m["2"]+m["3"] == 40
	})
	if n := len(r.kind("commit")); n != 0 {
		t.Errorf("%d manual commit reports from an auto-committing member", n)
	}
}

// javaKIP848: two group.protocol=consumer members (server assignor
// uniform) share four partitions; each reports its member epoch; the
// group is a consumer group with a group epoch; resetting its offsets
// while it runs is refused, as kafka-consumer-groups refuses it.
func javaKIP848(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-848", 4, values(20)...)
	var rs []*javaReports
	for i := range 2 {
		ch, r := h.start(ctx, t, JavaConsumer, map[string]any{"group": "j-848", "topics": []string{"j-848"},
			"client_id": fmt.Sprintf("j-848-%d", i), "group_protocol": "consumer", "remote_assignor": "uniform"})
		ready(ctx, t, ch, r)
		rs = append(rs, r)
	}
	owned := func() (map[string][]int32, []int32) {
		out := map[string][]int32{}
		var epochs []int32
		for _, r := range rs {
			for c, o := range lastOwned(r.kind("owned"), "j-848") {
				out[c] = o.Assignment["j-848"]
				epochs = append(epochs, o.Generation)
			}
		}
		return out, epochs
	}
	for _, r := range rs {
		r.wait(ctx, t, "two partitions each", func([]jrep) bool {
			o, _ := owned()
			return len(o) == 2 && len(o["j-848-0"]) == 2 && len(o["j-848-1"]) == 2
		})
	}
	o, epochs := owned()
	union := slices.Sorted(slices.Values(append(slices.Clone(o["j-848-0"]), o["j-848-1"]...)))
	if diff := cmpJSON([]int32{0, 1, 2, 3}, union); diff != "" {
		t.Errorf("partitions owned by the two members (-want +got):\n%s", diff)
	}
	for _, e := range epochs {
		if e < 1 {
			t.Errorf("member epoch %d, want >= 1", e)
		}
	}
	desc := h.admin(ctx, t, true,
		map[string]any{"op": "describe_groups", "groups": []string{"j-848"}},
		map[string]any{"op": "reset_offsets", "group": "j-848", "topic": "j-848", "to": "earliest"})
	var groups map[string]struct {
		State, Type, Protocol string
		GroupEpoch            int32 `json:"group_epoch"`
		Members               []struct {
			MemberEpoch int32 `json:"member_epoch"`
		}
	}
	if err := json.Unmarshal(desc[0].Result, &groups); err != nil {
		t.Fatal(err)
	}
	g := groups["j-848"]
	if g.Type != "Consumer" || g.Protocol != "uniform" || g.GroupEpoch < 2 || len(g.Members) != 2 {
		t.Errorf("describe j-848: %+v, want a Consumer group, assignor uniform, group epoch >= 2, 2 members", g)
	}
	if desc[1].OK == nil || *desc[1].OK {
		t.Errorf("reset_offsets on a running group: ok, want refused")
	}
	t.Logf("KIP-848: member epochs %v, group epoch %d; reset refused: %s", epochs, g.GroupEpoch, desc[1].Error)
}

// javaSlowPoll: a poll loop blocked past max.poll.interval.ms: the client
// leaves the group by itself (KIP-62), loses its partitions and rejoins
// under a new member id.
func javaSlowPoll(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-slow", 2, values(4)...)
	ch, r := h.start(ctx, t, JavaConsumer, map[string]any{"group": "j-slow", "topics": []string{"j-slow"},
		"client_id": "j-slow-0", "max_poll_interval_ms": 2000, "session_timeout_ms": 10000, "heartbeat_ms": 500,
		"slow_poll_ms": 5000})
	ready(ctx, t, ch, r)
	r.wait(ctx, t, "a rejoin under a new member id after the lost partitions", func(all []jrep) bool {
		ids := map[string]bool{}
		lost := false
		for _, j := range all {
			switch j.Kind {
			case "owned":
				ids[j.MemberID] = true
			case "lost":
				lost = true
			}
		}
		return lost && len(ids) >= 2
	})
}

// javaWorker: field report 4's concurrent worker commits record by record
// in the order records finish: a commit below an earlier accepted one
// (a regression) must appear, and in the end everything is committed.
func javaWorker(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-worker", 1, values(20)...)
	r := h.run(ctx, t, JavaConsumer, map[string]any{"group": "j-worker", "topics": []string{"j-worker"},
		"client_id": "j-worker-0", "worker": true, "records": 20})
	var prev, regressions int64
	for _, j := range r.kind("commit") {
		if j.How != "worker" || j.OK == nil || !*j.OK {
			t.Errorf("commit %+v: want an accepted worker commit", j)
			continue
		}
		o := j.Offsets["j-worker"]["0"]
		if o < prev {
			regressions++
		}
		prev = o
	}
	if regressions == 0 {
		t.Errorf("no out-of-order commit among %d worker commits", len(r.kind("commit")))
	}
	if got := committedMax(r.kind("commit"), "worker", "j-worker")["0"]; got != 20 {
		t.Errorf("highest worker commit %d, want 20", got)
	}
	t.Logf("worker: %d commits, %d regressions", len(r.kind("commit")), regressions)
}

// javaShare: a share consumer accepts every record but a poison one,
// which it releases until the broker's delivery count limit (3 on the
// test broker) archives it; a member SIGKILLed holding records loses them
// to another member (delivered again); another member rejects everything.
func javaShare(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-share", 1, append(values(9), "poison")...)
	ch, r := h.start(ctx, t, JavaShare, map[string]any{"group": "j-share", "topics": []string{"j-share"},
		"client_id": "j-share-0", "poison": "poison"})
	ready(ctx, t, ch, r)
	r.wait(ctx, t, "9 accepted and the poison record delivered 3 times", func(all []jrep) bool {
		var accepted, maxDelivery int
		for _, j := range all {
			switch j.Kind {
			case "share_acks":
				var a map[string]int
				_ = json.Unmarshal(j.Acks, &a)
				accepted += a["accept"]
			case "poison":
				maxDelivery = max(maxDelivery, j.DeliveryCount)
			}
		}
		return accepted == 9 && maxDelivery == 3
	})
	for _, c := range r.kind("share_commit") {
		if c.OK == nil || !*c.OK {
			t.Errorf("share commit %+v failed", c)
		}
	}
	// A member dies (SIGKILL) holding acquired records: when their
	// acquisition lock runs out (5 s on the test broker) another member
	// gets them again, delivery count 2.
	produceTo(ctx, t, h.brokers, "j-share3", 1, values(5)...)
	chA, rA := h.start(ctx, t, JavaShare, map[string]any{"group": "j-share3", "topics": []string{"j-share3"},
		"client_id": "j-share3-a", "hold_ms": 120000})
	rA.wait(ctx, t, "records held", func(all []jrep) bool {
		return slices.ContainsFunc(all, func(j jrep) bool { return j.Kind == "share_hold" })
	})
	held := rA.kind("share_hold")[0].Records
	if err := chA.Kill(); err != nil {
		t.Fatal(err)
	}
	<-chA.Done()
	chB, rB := h.start(ctx, t, JavaShare, map[string]any{"group": "j-share3", "topics": []string{"j-share3"},
		"client_id": "j-share3-b"})
	ready(ctx, t, chB, rB)
	rB.wait(ctx, t, "the held records accepted by the other member", func(all []jrep) bool {
		var n, redelivered int64
		for _, j := range all {
			if j.Kind == "share_acks" {
				n += j.Records
				if j.MaxDeliveryCount >= 2 {
					redelivered++
				}
			}
		}
		return n == 5 && redelivered > 0
	})
	t.Logf("share: %d records held by a SIGKILLed member, delivered again to another", held)

	produceTo(ctx, t, h.brokers, "j-share2", 1, values(3)...)
	ch2, r2 := h.start(ctx, t, JavaShare, map[string]any{"group": "j-share2", "topics": []string{"j-share2"},
		"client_id": "j-share2-0", "ack": "reject"})
	ready(ctx, t, ch2, r2)
	r2.wait(ctx, t, "3 rejected", func(all []jrep) bool {
		n := 0
		for _, j := range all {
			if j.Kind == "share_acks" {
				var a map[string]int
				_ = json.Unmarshal(j.Acks, &a)
				n += a["reject"]
			}
		}
		return n == 3
	})
}

// javaTxn: commits and an abort; a zombie fenced by a successor with
// the same transactional.id; a hanging transaction, which the broker
// still describes Ongoing after its producer was SIGKILLed.
func javaTxn(ctx context.Context, t *testing.T, h *javaHarness) {
	results := func(r *javaReports) []string {
		var out []string
		for _, j := range r.kind("txn") {
			out = append(out, j.ClientID+":"+j.TxnResult)
		}
		return out
	}
	r := h.run(ctx, t, JavaTxn, map[string]any{"client_id": "j-txn", "topic": "j-txn", "transactions": 3, "abort_every": 3})
	if diff := cmpJSON([]string{"j-txn:commit", "j-txn:commit", "j-txn:abort"}, results(r)); diff != "" {
		t.Errorf("transactions (-want +got):\n%s", diff)
	}
	r = h.run(ctx, t, JavaTxn, map[string]any{"client_id": "j-zombie", "topic": "j-txn", "how": "zombie"})
	if diff := cmpJSON([]string{"j-zombie-zombie:fenced", "j-zombie-successor:commit"}, results(r)); diff != "" {
		t.Errorf("zombie (-want +got):\n%s", diff)
	}
	if z := r.kind("txn"); len(z) > 0 {
		t.Logf("zombie: %s", z[0].Error)
	}
	ch, r := h.start(ctx, t, JavaTxn, map[string]any{"client_id": "j-hang", "topic": "j-txn", "how": "hang"})
	ready(ctx, t, ch, r)
	if diff := cmpJSON([]string{"j-hang:open"}, results(r)); diff != "" {
		t.Errorf("hang (-want +got):\n%s", diff)
	}
	if err := ch.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ch.Done()
	desc := h.admin(ctx, t, false, map[string]any{"op": "describe_transactions", "transactional_ids": []string{"j-hang"}})
	var txns map[string]struct {
		State      string
		Partitions map[string][]int32
	}
	if err := json.Unmarshal(desc[0].Result, &txns); err != nil {
		t.Fatal(err)
	}
	type txn struct {
		State      string
		Partitions map[string][]int32
	}
	if diff := cmpJSON(txn{"Ongoing", map[string][]int32{"j-txn": {0}}}, txn(txns["j-hang"])); diff != "" {
		t.Errorf("j-hang after its producer was SIGKILLed (-want +got):\n%s", diff)
	}
	t.Logf("hanging transaction: %s", desc[0].Result)
}

// javaCTP: consume-transform-produce commits its input offsets inside
// each transaction; a read_committed reader sees every output record.
func javaCTP(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-ctp-in", 2, values(20)...)
	ch, r := h.start(ctx, t, JavaCTP, map[string]any{"group": "j-ctp", "topics": []string{"j-ctp-in"},
		"client_id": "j-ctp-0", "output": "j-ctp-out", "transactional_id": "j-ctp-txn"})
	ready(ctx, t, ch, r)
	r.wait(ctx, t, "transactions committing all 20 input offsets", func(all []jrep) bool {
		m := committedMax(all, "txn", "j-ctp-in")
		return m["0"]+m["1"] == 20
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics("j-ctp-out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < 20 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed reader got %d of 20 records: %v", n, err)
		}
		n += len(fs.Records())
	}
	desc := h.admin(ctx, t, false, map[string]any{"op": "group_offsets", "group": "j-ctp"})
	var off map[string]map[string]int64
	if err := json.Unmarshal(desc[0].Result, &off); err != nil {
		t.Fatal(err)
	}
	if diff := cmpJSON(map[string]int64{"0": 10, "1": 10}, off["j-ctp-in"]); diff != "" {
		t.Errorf("j-ctp committed offsets (-want +got):\n%s", diff)
	}
}

// javaStreams: a Streams application on the classic protocol reaches
// RUNNING with its tasks; then the same on group.protocol=streams
// (KIP-1071, StreamsGroupHeartbeat), which 4.4.0 serves (streams.version
// 1 is on by default): the broker describes the streams group with the
// tasks it assigned.
func javaStreams(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-st-in", 2, values(10)...)
	for _, protocol := range []string{"classic", "streams"} {
		app := "j-st-" + protocol
		ch, r := h.start(ctx, t, JavaStreams, map[string]any{"group": app, "input": "j-st-in", "output": "j-st-out",
			"group_protocol": protocol})
		ready(ctx, t, ch, r)
		tasks := r.kind("streams_tasks")
		if len(tasks) == 0 || len(tasks[0].Threads) == 0 {
			t.Fatalf("%s: no streams_tasks report", protocol)
		}
		got := map[string][]int32{}
		for _, a := range tasks[0].Threads[0].Active {
			for tp, ps := range a {
				got[tp] = append(got[tp], ps...)
			}
		}
		for tp := range got {
			slices.Sort(got[tp])
		}
		if diff := cmpJSON(map[string][]int32{"j-st-in": {0, 1}}, got); diff != "" {
			t.Errorf("%s: active tasks' partitions (-want +got):\n%s", protocol, diff)
		}
		t.Logf("streams on the %s protocol: RUNNING with tasks %v", protocol, tasks[0].Threads[0].Active)
		if protocol == "streams" {
			desc := h.admin(ctx, t, false, map[string]any{"op": "describe_streams_groups", "groups": []string{app}})
			var sg map[string]struct {
				State   string
				Members []struct {
					Classic bool
					Active  map[string][]int32
				}
			}
			if err := json.Unmarshal(desc[0].Result, &sg); err != nil {
				t.Fatal(err)
			}
			type member struct {
				Classic bool
				Active  map[string][]int32
			}
			want := []member{{false, map[string][]int32{"0": {0, 1}}}}
			var got []member
			for _, m := range sg[app].Members {
				got = append(got, member{m.Classic, m.Active})
			}
			if diff := cmpJSON(want, got); diff != "" {
				t.Errorf("streams group %s members (-want +got):\n%s", app, diff)
			}
			t.Logf("describe_streams_groups: %s", desc[0].Result)
		}
		ctx2, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := ch.Terminate(ctx2); err != nil {
			t.Errorf("%s: close: %v", protocol, err)
		}
		cancel()
	}
}

// javaAdminPaths: the operator's paths on the (now empty) j-range group:
// reset to earliest as kafka-consumer-groups --reset-offsets --execute
// does, Kafka's own tool resetting to latest, --delete-offsets, and
// DeleteRecords moving the log start.
func javaAdminPaths(ctx context.Context, t *testing.T, h *javaHarness) {
	offsets := func(j jrep) map[string]int64 {
		var o map[string]map[string]int64
		if err := json.Unmarshal(j.Result, &o); err != nil {
			t.Fatal(err)
		}
		return o["j-range"]
	}
	out := h.admin(ctx, t, false,
		map[string]any{"op": "reset_offsets", "group": "j-range", "topic": "j-range", "to": "earliest"},
		map[string]any{"op": "group_offsets", "group": "j-range"},
		map[string]any{"op": "kafka_consumer_groups", "args": []string{"--reset-offsets", "--group", "j-range",
			"--topic", "j-range", "--to-latest", "--execute"}},
		map[string]any{"op": "group_offsets", "group": "j-range"},
		map[string]any{"op": "delete_offsets", "group": "j-range", "topic": "j-range", "partitions": []int{0}},
		map[string]any{"op": "group_offsets", "group": "j-range"},
		map[string]any{"op": "delete_records", "topic": "j-range", "partition": 1, "before": 5},
		map[string]any{"op": "list_offsets", "topic": "j-range"},
	)
	for _, tc := range []struct {
		i    int
		want map[string]int64
	}{
		{1, map[string]int64{"0": 0, "1": 0, "2": 0, "3": 0}},
		{3, map[string]int64{"0": 10, "1": 10, "2": 10, "3": 10}},
		{5, map[string]int64{"1": 10, "2": 10, "3": 10}},
	} {
		if diff := cmpJSON(tc.want, offsets(out[tc.i])); diff != "" {
			t.Errorf("after %s: committed (-want +got):\n%s", out[tc.i-1].Op, diff)
		}
	}
	var lo struct {
		Earliest map[string]map[string]int64 `json:"earliest"`
	}
	if err := json.Unmarshal(out[7].Result, &lo); err != nil {
		t.Fatal(err)
	}
	if got := lo.Earliest["j-range"]["1"]; got != 5 {
		t.Errorf("j-range/1 log start %d after DeleteRecords before 5, want 5", got)
	}
}

// cmpJSON returns "" when want and got have the same JSON form, else the
// two forms as a (-want +got) pair.
func cmpJSON(want, got any) string {
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) == string(g) {
		return ""
	}
	return "-" + string(w) + "\n+" + string(g)
}
