package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

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

	topics := map[string]int{"j-acks": 1, "j-range": 4, "j-coop": 4, "j-848": 4, "j-slow": 2, "j-worker": 1, "j-worker-hold": 1,
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
		{"worker_hold", javaWorkerHold},
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

// javaWorkerHold: field report 4's experiment: with worker_hold 8 the
// worker never finishes record 8 while, in order, the other thread does
// the rest, so it commits 1..8 one by one, then 10, 11, 12 (record 9 done
// before 8): record 8 is held, never processed.
func javaWorkerHold(ctx context.Context, t *testing.T, h *javaHarness) {
	produceTo(ctx, t, h.brokers, "j-worker-hold", 1, values(12)...)
	r := h.run(ctx, t, JavaConsumer, map[string]any{"group": "j-worker-hold", "topics": []string{"j-worker-hold"},
		"client_id": "j-worker-hold-0", "worker": true, "worker_in_order": true, "worker_hold": 8, "records": 12})
	offsets := func(kind string) []int64 {
		var out []int64
		for _, j := range r.kind(kind) {
			if kind == "commit" {
				out = append(out, j.Offsets["j-worker-hold"]["0"])
			} else {
				out = append(out, j.Offset)
			}
		}
		return out
	}
	want := map[string][]int64{
		"commit":    {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12},
		"processed": {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11},
		"held":      {8},
	}
	for kind, w := range want {
		if got := offsets(kind); !slices.Equal(got, w) {
			t.Errorf("%s reports: offsets %v, want %v", kind, got, w)
		}
	}
}
