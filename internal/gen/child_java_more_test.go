package gen

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
