package gen

import (
	"context"
	"encoding/json"
	"fmt"
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
	Offset        int64                       `json:"offset"`
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
