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
	// byAPI counts the exchanges by API and broker, latency those with
	// a latency, as the decoder gave them.
	byAPI, latency map[[2]string]int
}

type handler struct {
	x    *Exporter
	corr *correlate.Correlator
	p    *pipe
}

func (h *handler) Exchange(e *decode.Exchange) {
	if h.p != nil {
		k := [2]string{apiName(e.Key), e.Conn.Server.String()}
		h.p.byAPI[k]++
		if e.Response == decode.ResponseSeen && e.Resp != nil && e.Latency() >= 0 {
			h.p.latency[k]++
		}
	}
	h.x.Exchange(e)
	h.corr.Exchange(e)
}
func (h *handler) Anomaly(*decode.Anomaly) {}

func runCapture(t *testing.T, opts *Options) *pipe {
	t.Helper()
	return runCaptureOf(t, capturePath, opts)
}

// runCaptureOf is runCapture of the capture at path.
func runCaptureOf(t *testing.T, path string, opts *Options) *pipe {
	t.Helper()
	return runCapturesOf(t, []string{path}, opts)
}

// runCapturesOf is runCapture of the captures at paths, merged by time.
func runCapturesOf(t *testing.T, paths []string, opts *Options) *pipe {
	t.Helper()
	p := &pipe{x: New(opts), genByGr: map[string]int{}, byAPI: map[[2]string]int{}, latency: map[[2]string]int{}}
	corr := correlate.New(nil, correlate.SinkFunc(func(ev correlate.Event) {
		p.x.Event(ev)
		if g, ok := ev.(*correlate.GenerationEvent); ok {
			p.genByGr[g.Group]++
		}
	}))
	dec := decode.New(&handler{x: p.x, corr: corr, p: p}, nil)
	src, err := capture.OpenFiles(paths, nil)
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
	parts, lags := 0, 0
	endOffsets := map[string]int64{} // the highest high watermark of a partition, over the groups
	for _, g := range p.snap.Groups {
		check(fmt.Sprintf("kwire_rebalances_total{consumergroup=%q}", g.Group), float64(p.genByGr[g.Group]))
		check(fmt.Sprintf("kwire_group_generation{consumergroup=%q}", g.Group), float64(g.Generation))
		lagSum, committedSum := map[string]int64{}, map[string]int64{}
		for _, pt := range g.Partitions {
			labels := fmt.Sprintf("{consumergroup=%q,partition=\"%d\",topic=%q}", g.Group, pt.Partition, pt.Topic)
			check("kwire_fetch_records_total"+labels, float64(pt.Records))
			check("kwire_fetch_bytes_total"+labels, float64(pt.Bytes))
			if pt.Committed != nil {
				check("kafka_consumergroup_current_offset"+labels, float64(*pt.Committed))
				committedSum[pt.Topic] += *pt.Committed
			}
			if pt.Lag != nil {
				check("kafka_consumergroup_lag"+labels, float64(*pt.Lag))
				lagSum[pt.Topic] += *pt.Lag
				lags++
			}
			if pt.Position != nil {
				check("kwire_fetch_offset"+labels, float64(*pt.Position))
			}
			if pt.HighWatermark != nil {
				k := fmt.Sprintf("{partition=\"%d\",topic=%q}", pt.Partition, pt.Topic)
				endOffsets[k] = max(endOffsets[k], *pt.HighWatermark)
			}
			if pt.Records > 0 {
				parts++
			}
		}
		for topic, n := range lagSum {
			check(fmt.Sprintf("kafka_consumergroup_lag_sum{consumergroup=%q,topic=%q}", g.Group, topic), float64(n))
		}
		for topic, n := range committedSum {
			check(fmt.Sprintf("kafka_consumergroup_current_offset_sum{consumergroup=%q,topic=%q}", g.Group, topic), float64(n))
		}
	}
	if parts == 0 || lags == 0 || len(endOffsets) == 0 {
		t.Errorf("%d partitions with records fetched, %d with a lag, %d with an end offset: the capture's consumers fetch and commit", parts, lags, len(endOffsets))
	}
	for k, v := range endOffsets {
		check("kafka_topic_partition_current_offset"+k, float64(v))
	}
	// Per API and broker, and summed over brokers as the decoder counts.
	brokers, perAPI := map[string]bool{}, map[string]float64{}
	for k, n := range p.byAPI {
		labels := fmt.Sprintf("{api=%q,broker=%q}", k[0], k[1])
		check("kwire_requests_total"+labels, float64(n))
		check("kwire_request_latency_seconds_count"+labels, float64(p.latency[k]))
		brokers[k[1]] = true
		perAPI[k[0]] += float64(n)
	}
	if len(brokers) != 3 {
		t.Errorf("requests went to brokers %v, want the capture's 3", brokers)
	}
	for key, n := range p.ds.ByKey {
		if n > 0 && perAPI[apiName(int16(key))] != float64(n) {
			t.Errorf("%s: %v requests over the brokers, the decoder counted %d", apiName(int16(key)), perAPI[apiName(int16(key))], n)
		}
	}
	check("kwire_capture_packets_total", float64(p.cs.Packets))
	check("kwire_capture_kernel_drops_total", 3)
	check("kwire_capture_conns_open", 0)
	check("kwire_decode_resyncs_total", float64(p.ds.Resyncs))
	check(`kwire_correlate_limits_total{limit="groups_dropped"}`, 0)
	check(`kwire_correlate_fetches_total{attribution="attributed"}`, float64(p.snap.Stats.FetchesAttributed))
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
		sum, lagSum := map[string]int64{}, map[string]int64{}
		for _, pt := range g.Partitions {
			sum[pt.Topic] += pt.Records
			if pt.Lag != nil {
				lagSum[pt.Topic] += *pt.Lag
			}
		}
		for topic, n := range sum {
			name := fmt.Sprintf("kwire_fetch_records_total{consumergroup=%q,topic=%q}", g.Group, topic)
			if m[name] != float64(n) {
				t.Errorf("%s = %v, want %d", name, m[name], n)
			}
		}
		for topic, n := range lagSum {
			name := fmt.Sprintf("kafka_consumergroup_lag_sum{consumergroup=%q,topic=%q}", g.Group, topic)
			if v, ok := m[name]; !ok || v != float64(n) {
				t.Errorf("%s = %v (present %v), want %d", name, v, ok, n)
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
		`kwire_hazards_total{consumergroup="g",kind="commit_rejected",severity="warn"}`:   1,
		`kwire_hazards_total{consumergroup="g",kind="commit_regression",severity="high"}`: 2,
		`kwire_hazards_total{consumergroup="g",kind="unknown",severity="unknown"}`:        1,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
}

// TestMemberInfo checks the member info metric: only when asked for
// (Options.MemberInfo: a member id is new at every consumer restart),
// live members only, with their process when the source knew it; the
// member count either way.
func TestMemberInfo(t *testing.T) {
	for _, on := range []bool{false, true} {
		x := New(&Options{MemberInfo: on})
		x.Snapshot(&correlate.Snapshot{Groups: []correlate.Group{{Group: "g", Generation: 3, Members: []correlate.Member{
			{MemberID: "m1", ClientID: "c1", ClientHost: "10.0.0.1", Status: "live", PID: 4242, Comm: "java"},
			{MemberID: "m2", ClientID: "c2", ClientHost: "10.0.0.2", Status: "live"},
			{MemberID: "m3", ClientID: "c3", ClientHost: "10.0.0.3", Status: "left", PID: 7},
		}}}})
		m := scrape(t, x)
		for name, want := range map[string]bool{
			`kwire_group_member_info{client_host="10.0.0.1",client_id="c1",comm="java",consumergroup="g",member_id="m1",pid="4242"}`: on,
			`kwire_group_member_info{client_host="10.0.0.2",client_id="c2",comm="",consumergroup="g",member_id="m2",pid=""}`:         on,
			`kwire_group_member_info{client_host="10.0.0.3",client_id="c3",comm="",consumergroup="g",member_id="m3",pid="7"}`:        false,
		} {
			if v, ok := m[name]; ok != want || ok && v != 1 {
				t.Errorf("MemberInfo %v: %s: present %v (value %v), want present %v", on, name, ok, v, want)
			}
		}
		if v := m[`kafka_consumergroup_members{consumergroup="g"}`]; v != 2 {
			t.Errorf("MemberInfo %v: kafka_consumergroup_members = %v, want 2", on, v)
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
						labels := fmt.Sprintf("consumergroup=%q,partition=%q,topic=%q", group, part, topic)
						name := fmt.Sprintf("kwire_share_records_total{consumergroup=%q,kind=%q,partition=%q,topic=%q}", group, k, part, topic)
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
					name := fmt.Sprintf("kwire_share_records_total{consumergroup=%q,kind=%q,topic=%q}", group, k, topic)
					if got := m[name]; got != float64(sum[k]) {
						t.Errorf("%s = %v, want %d", name, got, sum[k])
					}
				}
			}
			name := fmt.Sprintf("kwire_hazards_total{consumergroup=%q,kind=\"share_redelivery\",severity=\"warn\"}", group)
			if m[name] != 1 {
				t.Errorf("%s = %v, want 1", name, m[name])
			}
		}
	}
}
