package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// needPrometheus returns the paths of prometheus and promtool (Debian's
// prometheus package, which make test-deps installs); without them it
// skips the test, or fails it under CI=true.
func needPrometheus(t *testing.T) (prometheus, promtool string) {
	t.Helper()
	prometheus, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		msg := "no prometheus or promtool (Debian package prometheus; make test-deps installs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return prometheus, promtool
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// promServer is a Prometheus server a test started.
type promServer struct {
	url string
	log *bytes.Buffer
}

// startPrometheus runs prometheus on a free loopback port with its
// storage in the test's directory, scraping every second the targets of
// each job and evaluating rules (a file) every second.
func startPrometheus(t *testing.T, bin string, jobs map[string][]string, rules string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n", rules)
	names := make([]string, 0, len(jobs))
	for job := range jobs {
		names = append(names, job)
	}
	slices.Sort(names)
	for _, job := range names {
		targets, _ := json.Marshal(jobs[job])
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: %s\n", job, targets)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &promServer{url: "http://" + addr, log: new(bytes.Buffer)}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus config:\n%s\nprometheus log:\n%s", cfg.String(), p.log.String())
		}
	})
	waitUntil(t, "prometheus to be ready", 30*time.Second, func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// waitUntil polls ok every 100 ms until it holds, or fails the test after
// d.
func waitUntil(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !ok() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// query evaluates expr now through the HTTP API and returns how many
// series (or 1 for a scalar) it gave; err when Prometheus refused it.
func (p *promServer) query(expr string) (int, error) {
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(expr), &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	if r.Data.ResultType == "scalar" {
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(r.Data.Result, &series); err != nil {
		return 0, err
	}
	return len(series), nil
}

func (p *promServer) get(path string, v any) error {
	resp, err := http.Get(p.url + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, b)
	}
	return nil
}

// promRule is an alerting rule as /api/v1/rules shows it.
type promRule struct {
	Name, Query, Health, State, Type string
	LastError                        string `json:"lastError"`
}

func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var r struct {
		Data struct{ Groups []struct{ Rules []promRule } }
	}
	if err := p.get("/api/v1/rules", &r); err != nil {
		t.Fatal(err)
	}
	var out []promRule
	for _, g := range r.Data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// liveMetricsTarget, where the platform has one (linux, root), starts
// kwire live --metrics on a replay of capture and returns its metrics
// address, when the replay is over; "" and why not otherwise.
var liveMetricsTarget func(t *testing.T, capture string) (addr, why string)

// liveOnly are the families only a live capture exports.
var liveOnly = regexp.MustCompile(`^kwire_capture_(kernel_|user_filtered|conns_idle|packets_written|packets_not_written)`)

// metricNames returns the kwire_, kafka_ and up metric names in expr.
func metricNames(expr string) []string {
	names := regexp.MustCompile(`\b(?:kwire|kafka)_[a-z0-9_]+|\bup\b`).FindAllString(expr, -1)
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, "_bucket")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// grafanaQueries returns the queries of a Grafana dashboard: every
// panel's targets and every variable's label_values(), as PromQL with
// the variables and Grafana's intervals filled in, by what they are.
func grafanaQueries(t *testing.T, path string) map[string]string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr, RefID string }
		}
		Templating struct {
			List []struct{ Name, Type, Definition string }
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	fill := strings.NewReplacer("$job", ".*", "$instance", ".*", "$consumergroup", ".*", "$topic", ".*",
		"$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m")
	out := map[string]string{}
	labelValues := regexp.MustCompile(`^label_values\((.*), *([a-z_]+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(METRIC, LABEL)", v.Name, v.Definition)
		}
		out["variable "+v.Name] = fill.Replace(fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %q %s", p.Title, tg.RefID)] = fill.Replace(tg.Expr)
		}
	}
	return out
}

// TestPrometheus: a real Prometheus server scrapes kwire aggregate
// --metrics while agents publish replayed captures (and, as root, kwire
// live --metrics capturing a replay on a veth pair), with the shipped
// alert rules loaded. The rules pass promtool; every rule evaluates
// without error, each names only series that exist, and the rules the
// captures trigger are pending or firing: a critical and a warn hazard
// (h_commit_gap, h_rebalance_storm), rejected commits
// (h_commit_rejected), capture gaps (lossy), no traffic (the captures are
// old), a target down. Every query of the shipped dashboard returns data.
func TestPrometheus(t *testing.T) {
	promBin, promtool := needPrometheus(t)
	if testing.Short() {
		t.Skip("runs Prometheus for about 20 s")
	}
	start := time.Now()
	root := filepath.Join(testdataDir(), "..")
	rules, err := filepath.Abs(filepath.Join(root, "deploy", "prometheus", "kwire-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	from := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	aggAddr := make(chan net.Addr, 1)
	var f aggregateFlags
	fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--json", "--from", from, "--clock-window", "0", "--metrics", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	f.listening = func(a net.Addr) { aggAddr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	aggDone := make(chan error, 1)
	go func() { aggDone <- runAggregate(ctx, &f, io.Discard, io.Discard) }()
	defer func() {
		cancel()
		if err := <-aggDone; err != nil {
			t.Errorf("kwire aggregate: %v", err)
		}
	}()
	jobs := map[string][]string{"kwire-aggregate": {(<-aggAddr).String()}, "kwire-gone": {freeAddr(t)}}
	live := false
	if liveMetricsTarget == nil {
		t.Log("no kwire live target on this platform: the live families are not checked")
	} else if addr, why := liveMetricsTarget(t, "h_commit_rejected"); addr == "" {
		t.Logf("no kwire live target (%s): the live families are not checked; CI runs this as root", why)
	} else {
		live = true
		jobs["kwire-live"] = []string{addr}
	}
	prom := startPrometheus(t, promBin, jobs, rules)
	waitUntil(t, "a first scrape of the aggregator", 20*time.Second, func() bool {
		n, _ := prom.query(`up{job="kwire-aggregate"} == 1`)
		return n > 0
	})

	var files []string
	for _, name := range []string{"h_rebalance_storm", "h_commit_rejected", "h_commit_gap", "lossy", "h_hanging_lso", "h_share_redelivery"} {
		files = append(files, filepath.Join(testdataDir(), name+".pcapng"))
	}
	publishFiles(t, from, files)
	waitUntil(t, "the aggregator's hazards in Prometheus", 60*time.Second, func() bool {
		n, _ := prom.query(`kwire_hazards_total{job="kwire-aggregate",severity="critical"}`)
		return n > 0
	})

	mustFire := []string{"KafkaConsumerGroupCriticalHazard", "KafkaConsumerGroupHazard", "KafkaConsumerGroupCommitsRejected",
		"KwireCaptureGaps", "KwireNoTraffic", "KwireDown"}
	var rs []promRule
	inactive := func() (names []string) {
		for _, r := range rs {
			if slices.Contains(mustFire, r.Name) && r.State == "inactive" {
				names = append(names, r.Name)
			}
		}
		return names
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rs = prom.rules(t)
		if len(rs) > 0 && len(inactive()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after 30 s, alerts the captures trigger are inactive: %v", inactive())
			break
		}
	}
	// Counters need two samples after they moved for rate(): a few more
	// scrapes.
	time.Sleep(3 * time.Second)

	exists := func(name string) bool {
		n, err := prom.query(fmt.Sprintf("count(%s)", name))
		return err == nil && n > 0
	}
	check := func(what, expr string) {
		n, err := prom.query(expr)
		switch {
		case err != nil:
			t.Errorf("%s: %s: %v", what, expr, err)
		case n > 0:
		default:
			var missing []string
			for _, m := range metricNames(expr) {
				if !exists(m) {
					missing = append(missing, m)
				}
			}
			if !live && len(missing) > 0 && !slices.ContainsFunc(missing, func(m string) bool { return !liveOnly.MatchString(m) }) {
				t.Logf("%s: no data without kwire live (%s)", what, strings.Join(missing, ", "))
				return
			}
			t.Errorf("%s returns no data: %s (series missing: %v)", what, expr, missing)
		}
	}

	if len(rs) == 0 {
		t.Fatal("prometheus loaded no rules")
	}
	for _, r := range rs {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
		}
		if _, err := prom.query(r.Query); err != nil {
			t.Errorf("rule %s: %v", r.Name, err)
		}
		if slices.Contains(mustFire, r.Name) {
			check("alert "+r.Name, r.Query)
			continue
		}
		t.Logf("alert %s: %s (not triggered by the captures: its series must exist)", r.Name, r.State)
		for _, m := range metricNames(r.Query) {
			if !exists(m) && (live || !liveOnly.MatchString(m)) {
				t.Errorf("alert %s: no series %s", r.Name, m)
			}
		}
	}

	queries := grafanaQueries(t, filepath.Join(root, "deploy", "grafana", "kwire.json"))
	names := make([]string, 0, len(queries))
	for what := range queries {
		names = append(names, what)
	}
	slices.Sort(names)
	for _, what := range names {
		check(what, queries[what])
	}
	series, _ := prom.query(`{job=~"kwire.*"}`)
	t.Logf("%d rules, %d dashboard queries checked; %d series scraped from kwire; %v", len(rs), len(queries), series, time.Since(start).Round(time.Second))
}
