//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/internal/caps"
)

// TestMain lets the test binary serve as the kwire command, for the
// benchmark and soak runs that measure kwire live as its own process
// (KWIRE_TEST_CPUPROFILE and KWIRE_TEST_MEMPROFILE profile it).
func TestMain(m *testing.M) {
	if path := os.Getenv("KWIRE_TEST_RUSAGE"); path != "" {
		rusageChild(path) // see peakRSS
	}
	if arg := os.Getenv(tlsGroupEnv); arg != "" {
		os.Exit(runTLSGroupChild(arg)) // live_ebpf_tls_linux_test.go
	}
	if arg := os.Getenv("KWIRE_TEST_REPLAY"); arg != "" {
		os.Exit(replayChild(arg)) // live_replay_linux_test.go
	}
	if os.Getenv("KWIRE_TEST_KFAKE") == "1" {
		serveKfake() // a transport for the agent benchmarks
	}
	if os.Getenv("KWIRE_TEST_MAIN") == "1" {
		if at, err := time.ParseDuration(os.Getenv("KWIRE_TEST_HEAPPROFILE_AT")); err == nil {
			go func() {
				<-time.After(at)
				if f, err := os.Create(os.Getenv("KWIRE_TEST_HEAPPROFILE")); err == nil {
					pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}()
		}
		if path := os.Getenv("KWIRE_TEST_MEMPROFILE"); path != "" {
			runtime.MemProfileRate = 64 << 10
			code := run(os.Args[1:], os.Stdout, os.Stderr)
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			os.Exit(code)
		}
		if path := os.Getenv("KWIRE_TEST_CPUPROFILE"); path != "" {
			if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
				code := run(os.Args[1:], os.Stdout, os.Stderr)
				pprof.StopCPUProfile()
				os.Exit(code)
			}
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestLive captures a consumer group on loopback with kwire live (JSON,
// pcapng and metrics on) through joins, commits and a leave, then checks
// that kwire analyze on the pcapng it wrote tells exactly the same story:
// the same generations, members, assignments, commits and final summary.
// While it runs, /metrics must serve fetch counters labelled with the
// group.
func TestLive(t *testing.T) {
	needCapture(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	const groupName, topic = "live-group", "live-topic"
	kf, ports := newCluster(t, kfake.SeedTopics(6, topic))
	dir := t.TempDir()
	pcap := filepath.Join(dir, "live.pcapng")
	live := startLive(t, "-i", "lo", "--port", ports, "--json", "-w", pcap, "--metrics", "127.0.0.1:0", "--stats-every", "1s")
	if live.metricsURL == "" {
		t.Fatalf("no metrics address in kwire's status line: %s", live.stderr.String())
	}

	g := newGroup(t, kf, groupName, topic, 6)
	g.produce(50)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")
	g.join("member-2")
	g.produce(50)
	g.settled("member-2 to join")
	g.join("member-3")
	g.produce(50)
	g.settled("member-3 to join")

	// While live: group-labelled fetch counters for every partition.
	want := func(m map[string]float64) error {
		for p := range 6 {
			k := fmt.Sprintf(`kwire_fetch_records_total{consumergroup=%q,partition="%d",topic=%q}`, groupName, p, topic)
			if m[k] < 1 {
				return fmt.Errorf("%s = %v", k, m[k])
			}
		}
		if m[fmt.Sprintf(`kwire_rebalances_total{consumergroup=%q}`, groupName)] < 3 {
			return fmt.Errorf("kwire_rebalances_total{consumergroup=%q} < 3", groupName)
		}
		fetches := 0.0 // per broker
		for k, v := range m {
			if strings.HasPrefix(k, `kwire_requests_total{api="Fetch",broker="127.0.0.1:`) {
				fetches += v
			}
		}
		if fetches < 1 || m[`kwire_capture_kernel_drops_total`] != 0 {
			return fmt.Errorf("%v Fetch requests to the brokers, %v kernel drops", fetches, m[`kwire_capture_kernel_drops_total`])
		}
		// A live capture's packet times are the wall clock's.
		if last := m[`kwire_last_packet_timestamp_seconds`]; time.Since(time.Unix(int64(last), 0)).Abs() > time.Minute {
			return fmt.Errorf("kwire_last_packet_timestamp_seconds = %v, %v ago", last, time.Since(time.Unix(int64(last), 0)))
		}
		return nil
	}
	var err error
	for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); {
		if err = want(scrape(t, live.metricsURL)); err == nil {
			break
		}
		// Metrics refresh every snapshotEvery: wait for the next stats line.
		n := strings.Count(live.stdout.String(), `"type":"stats"`)
		live.stdout.wait(t, "a stats line", func() bool { return bytes.Count(live.stdout.buf.Bytes(), []byte(`"type":"stats"`)) > n })
	}
	if err != nil {
		t.Fatalf("metrics while capturing: %v", err)
	}

	g.leave("member-1")
	g.produce(50)
	g.settled("member-1 to leave")
	g.leave("member-2")
	g.leave("member-3")
	g.prod.Close()
	live.waitClosed(t)
	if code := live.stop(t); code != 0 {
		t.Fatalf("kwire live exited %d: %s", code, live.stderr.String())
	}
	st := lastStats(live.stdout.String())
	if st["kernel_drops"] != 0 || st["gaps"] != 0 || st["packets_written"] != st["packets"] || st["duplicates"] != 0 {
		t.Errorf("final stats: drops %v, gaps %v, duplicates %v, %v of %v packets written",
			st["kernel_drops"], st["gaps"], st["duplicates"], st["packets_written"], st["packets"])
	}

	offline := newOutput()
	if code := run([]string{"analyze", "--json", "--port", ports, pcap}, offline, offline); code != 0 {
		t.Fatalf("kwire analyze exited %d: %s", code, offline.String())
	}
	got, want2 := nonStats(live.stdout.String()), nonStats(offline.String())
	for i := range max(len(got), len(want2)) {
		var gl, wl string
		if i < len(got) {
			gl = got[i]
		}
		if i < len(want2) {
			wl = want2[i]
		}
		if gl != wl {
			t.Fatalf("live and offline output differ at line %d of %d/%d:\n-offline %s\n+live    %s", i+1, len(want2), len(got), wl, gl)
		}
	}
	checkStory(t, got, groupName)
}

// TestLiveErrors checks what a user is told when kwire live cannot run.
func TestLiveErrors(t *testing.T) {
	needCapture(t)
	tests := []struct {
		name   string
		args   []string
		noCap  bool
		code   int
		stderr []string
	}{
		{"no interface flag", []string{"--port", "9092"}, false, 2, []string{"-i IFACE is required", "lo"}},
		{"unknown interface", []string{"-i", "kwire-nope0"}, false, 1, []string{`no such network interface "kwire-nope0"`, "any, ", "lo"}},
		{"no CAP_NET_RAW", []string{"-i", "lo"}, true, 1, []string{"kwire: " + errNoCapNetRaw + " (operation not permitted)"}},
		{"file argument", []string{"-i", "lo", "x.pcapng"}, false, 2, []string{"files are for kwire analyze"}},
		{"rotate-keep without rotation", []string{"-i", "lo", "-w", "x.pcapng", "--rotate-keep", "3"}, false, 2,
			[]string{"--rotate-keep and --rotate-max-age need -w FILE and --rotate-mb"}},
		{"negative rotate-max-age", []string{"-i", "lo", "-w", "x.pcapng", "--rotate-mb", "1", "--rotate-max-age", "-1h"}, false, 2,
			[]string{"--rotate-keep and --rotate-max-age must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := 0
			cmd := func() { code = run(append([]string{"live"}, tt.args...), &stdout, &stderr) }
			if tt.noCap {
				caps.WithoutNetRaw(t, cmd)
			} else {
				cmd()
			}
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}

// TestLiveHint checks the hint given when no Kafka traffic shows up.
func TestLiveHint(t *testing.T) {
	needCapture(t)
	defer func(d time.Duration) { hintAfter = d }(hintAfter)
	hintAfter = 100 * time.Millisecond
	live := startLive(t, "-i", "lo", "--port", "1", "--json")
	live.stderr.wait(t, "the hint", func() bool {
		return bytes.Contains(live.stderr.buf.Bytes(), []byte("no TCP traffic on port 1 seen on lo"))
	})
	if code := live.stop(t); code != 0 {
		t.Fatalf("exit status %d: %s", code, live.stderr.String())
	}
	lines := nonStats(live.stdout.String())
	if len(lines) != 1 || !strings.Contains(lines[0], `"type":"summary"`) {
		t.Fatalf("want only a summary besides stats, got %q", lines)
	}
	// Nothing was captured: the summary is stamped with the time the run
	// ended, like the stats line, not 0001-01-01.
	var sum struct{ TS, Time time.Time }
	if err := json.Unmarshal([]byte(lines[0]), &sum); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(sum.TS); sum.TS.IsZero() || since < 0 || since > time.Minute || sum.Time.Truncate(time.Microsecond) != sum.TS.Truncate(time.Microsecond) {
		t.Errorf("summary of an empty run: ts %v, time %v; want both the run's end", sum.TS, sum.Time)
	}
}

// checkStory checks that the output tells the scenario: three members
// joined one at a time and left, commits were accepted.
func checkStory(t *testing.T, lines []string, groupName string) {
	t.Helper()
	count := map[string]int{}
	members := map[string]bool{}
	for _, line := range lines {
		var ev struct {
			Type, Group, Action, Outcome, MemberID string
			Members                                []struct {
				MemberID string `json:"member_id"`
			}
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		if ev.Group != groupName {
			continue
		}
		count[ev.Type+" "+ev.Action+ev.Outcome]++
		for _, m := range ev.Members {
			members[m.MemberID] = true
		}
	}
	t.Logf("%d lines alike; events of %s: %v", len(lines), groupName, count)
	if count["member joined"] != 3 || count["member left"] != 3 || count["generation "] < 4 || count["commit accepted"] == 0 || len(members) != 3 {
		t.Errorf("events of %s: %v, %d members in generations; want 3 joined, 3 left, >= 4 generations, accepted commits, 3 members", groupName, count, len(members))
	}
}
