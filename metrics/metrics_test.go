package metrics

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// capturePath is a committed capture of real clients: kgo producing to
// "orders" and a 3-member group "orders-group" consuming and committing.
const capturePath = "../testdata/group.pcapng"

// pipe runs a capture through decode and correlate into an Exporter, as
// kwire live does, and returns what the metrics must agree with.
type pipe struct {
	x       *Exporter
	snap    *correlate.Snapshot
	cs      capture.Stats
	ds      decode.Stats
	genByGr map[string]int
}

type handler struct {
	x    *Exporter
	corr *correlate.Correlator
}

func (h *handler) Exchange(e *decode.Exchange) { h.x.Exchange(e); h.corr.Exchange(e) }
func (h *handler) Anomaly(*decode.Anomaly)     {}

func runCapture(t *testing.T, opts *Options) *pipe {
	t.Helper()
	return runCaptureOf(t, capturePath, opts)
}

// runCaptureOf is runCapture of the capture at path.
func runCaptureOf(t *testing.T, path string, opts *Options) *pipe {
	t.Helper()
	p := &pipe{x: New(opts), genByGr: map[string]int{}}
	corr := correlate.New(nil, correlate.SinkFunc(func(ev correlate.Event) {
		p.x.Event(ev)
		if g, ok := ev.(*correlate.GenerationEvent); ok {
			p.genByGr[g.Group]++
		}
	}))
	dec := decode.New(&handler{x: p.x, corr: corr}, nil)
	src, err := capture.OpenFiles([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(context.Background(), dec); err != nil {
		t.Fatal(err)
	}
	corr.Close(time.Time{})
	p.snap, p.cs, p.ds = corr.Snapshot(), src.Stats(), dec.Stats()
	p.cs.Live = &capture.LiveStats{KernelDrops: 3}
	p.x.Snapshot(p.snap)
	p.x.Stats(p.cs, p.ds)
	return p
}

// scrape serves the exporter and parses what it writes: "name{labels}" ->
// value (labels in Prometheus's sorted order).
func scrape(t *testing.T, x *Exporter) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	x.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body.String())
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// TestExporter checks the metrics against the state they come from.
func TestExporter(t *testing.T) {
	p := runCapture(t, nil)
	m := scrape(t, p.x)
	check := func(name string, want float64) {
		t.Helper()
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if len(p.snap.Groups) == 0 {
		t.Fatal("no group in the capture")
	}
	parts := 0
	for _, g := range p.snap.Groups {
		check(fmt.Sprintf("kwire_rebalances_total{group=%q}", g.Group), float64(p.genByGr[g.Group]))
		check(fmt.Sprintf("kwire_group_generation{group=%q}", g.Group), float64(g.Generation))
		for _, pt := range g.Partitions {
			labels := fmt.Sprintf("{group=%q,partition=\"%d\",topic=%q}", g.Group, pt.Partition, pt.Topic)
			check("kwire_fetch_records_total"+labels, float64(pt.Records))
			check("kwire_fetch_bytes_total"+labels, float64(pt.Bytes))
			if pt.Committed != nil {
				check("kwire_committed_offset"+labels, float64(*pt.Committed))
			}
			if pt.Records > 0 {
				parts++
			}
		}
	}
	if parts == 0 {
		t.Error("no partition with records fetched: the group label is what this test is about")
	}
	for key, n := range p.ds.ByKey {
		if n > 0 {
			check(fmt.Sprintf("kwire_requests_total{api=%q}", apiName(int16(key))), float64(n))
		}
	}
	check("kwire_capture_packets_total", float64(p.cs.Packets))
	check("kwire_capture_kernel_drops_total", 3)
	check("kwire_capture_conns_open", 0)
	check("kwire_decode_resyncs_total", float64(p.ds.Resyncs))
	check("kwire_correlate_groups_dropped_total", 0)
	if m[`kwire_request_latency_seconds_count{api="JoinGroup"}`] == 0 {
		t.Error("no JoinGroup latency observed")
	}
	in := version.Get()
	check(fmt.Sprintf("kwire_build_info{goversion=%q,revision=%q,version=%q}", in.Go, in.Commit, in.Version), 1)
}

// TestNoPartitionLabels checks that partitions are summed per topic.
func TestNoPartitionLabels(t *testing.T) {
	p := runCapture(t, &Options{NoPartitionLabels: true})
	m := scrape(t, p.x)
	for name := range m {
		if strings.Contains(name, "partition=") {
			t.Fatalf("%s has a partition label", name)
		}
	}
	for _, g := range p.snap.Groups {
		sum := map[string]int64{}
		for _, pt := range g.Partitions {
			sum[pt.Topic] += pt.Records
		}
		for topic, n := range sum {
			name := fmt.Sprintf("kwire_fetch_records_total{group=%q,topic=%q}", g.Group, topic)
			if m[name] != float64(n) {
				t.Errorf("%s = %v, want %d", name, m[name], n)
			}
		}
	}
}

// hazard stands for an event type correlate adds later: the exporter
// knows events by Type() and reads a hazard's fields from its JSON.
type hazard struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Group    string `json:"group"`
}

func (hazard) Type() string    { return "hazard" }
func (hazard) Time() time.Time { return time.Time{} }

func TestHazardEvents(t *testing.T) {
	x := New(nil)
	x.Event(hazard{Kind: "commit_regression", Severity: "high", Group: "g"})
	x.Event(&hazard{Kind: "commit_regression", Severity: "high", Group: "g"})
	x.Event(hazard{Group: "g"})
	x.Event(&correlate.HazardEvent{Kind: correlate.HazardCommitRejected, Severity: correlate.SeverityWarn, Group: "g"})
	m := scrape(t, x)
	for name, want := range map[string]float64{
		`kwire_hazards_total{group="g",kind="commit_rejected",severity="warn"}`:   1,
		`kwire_hazards_total{group="g",kind="commit_regression",severity="high"}`: 2,
		`kwire_hazards_total{group="g",kind="unknown",severity="unknown"}`:        1,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
}

// TestMemberInfo checks the member info metric: live members only, with
// their process when the source knew it.
func TestMemberInfo(t *testing.T) {
	x := New(nil)
	x.Snapshot(&correlate.Snapshot{Groups: []correlate.Group{{Group: "g", Generation: 3, Members: []correlate.Member{
		{MemberID: "m1", ClientID: "c1", ClientHost: "10.0.0.1", Status: "live", PID: 4242, Comm: "java"},
		{MemberID: "m2", ClientID: "c2", ClientHost: "10.0.0.2", Status: "live"},
		{MemberID: "m3", ClientID: "c3", ClientHost: "10.0.0.3", Status: "left", PID: 7},
	}}}})
	m := scrape(t, x)
	for name, want := range map[string]bool{
		`kwire_group_member_info{client_host="10.0.0.1",client_id="c1",comm="java",group="g",member_id="m1",pid="4242"}`: true,
		`kwire_group_member_info{client_host="10.0.0.2",client_id="c2",comm="",group="g",member_id="m2",pid=""}`:         true,
		`kwire_group_member_info{client_host="10.0.0.3",client_id="c3",comm="",group="g",member_id="m3",pid="7"}`:        false,
	} {
		if v, ok := m[name]; ok != want || ok && v != 1 {
			t.Errorf("%s: present %v (value %v), want present %v", name, ok, v, want)
		}
	}
}

// TestShareMetrics checks the share group metrics of a real capture (a kgo
// share consumer releasing a poison record until the delivery limit)
// against the broker's answers the generator read off its tap (the truth
// file), per partition and summed per topic, and the share_redelivery
// hazard labelled by the share group.
func TestShareMetrics(t *testing.T) {
	const path = "../testdata/h_share_redelivery"
	b, err := os.ReadFile(path + ".truth.json")
	if err != nil {
		t.Skip("no h_share_redelivery capture in testdata")
	}
	var tr struct {
		Share map[string]struct {
			Partitions map[string]map[string]map[string]int64 `json:"partitions"`
		} `json:"share"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Share) == 0 {
		t.Fatal("the truth has no share group")
	}
	for _, noParts := range []bool{false, true} {
		p := runCaptureOf(t, path+".pcapng", &Options{NoPartitionLabels: noParts})
		m := scrape(t, p.x)
		for group, g := range tr.Share {
			for topic, parts := range g.Partitions {
				sum := map[string]int64{}
				for part, counts := range parts {
					for k, v := range counts {
						sum[k] += v
						if noParts {
							continue
						}
						labels := fmt.Sprintf("group=%q,partition=%q,topic=%q", group, part, topic)
						name := fmt.Sprintf("kwire_share_records_total{group=%q,kind=%q,partition=%q,topic=%q}", group, k, part, topic)
						if k == "max_delivery_count" {
							name = "kwire_share_max_delivery_count{" + labels + "}"
						}
						if got, ok := m[name]; !ok || got != float64(v) {
							t.Errorf("%s = %v (present %v), want %d", name, got, ok, v)
						}
					}
				}
				if !noParts {
					continue
				}
				for _, k := range []string{"acquired", "redelivered", "accepted", "released", "rejected"} {
					name := fmt.Sprintf("kwire_share_records_total{group=%q,kind=%q,topic=%q}", group, k, topic)
					if got := m[name]; got != float64(sum[k]) {
						t.Errorf("%s = %v, want %d", name, got, sum[k])
					}
				}
			}
			name := fmt.Sprintf("kwire_hazards_total{group=%q,kind=\"share_redelivery\",severity=\"warn\"}", group)
			if m[name] != 1 {
				t.Errorf("%s = %v, want 1", name, m[name])
			}
		}
	}
}
