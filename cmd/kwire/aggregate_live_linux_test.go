//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/aggregate/wire"
)

// agentProc is a kwire process of its own (this test binary as kwire,
// see TestMain): a `kwire live --publish` agent or `kwire aggregate`.
type agentProc struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan error
	exited         bool // guarded by stderr
}

// startProc runs `kwire args...` and returns once its stderr says ready.
func startProc(t *testing.T, ready string, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{stdout: newOutput(), stderr: newOutput(), done: make(chan error, 1)}
	a.cmd = exec.Command(os.Args[0], args...)
	a.cmd.Env = append(os.Environ(), "KWIRE_TEST_MAIN=1")
	a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := a.cmd.Wait()
		a.stderr.update(func() { a.exited = true })
		a.done <- err
	}()
	t.Cleanup(func() {
		a.stderr.mu.Lock()
		exited := a.exited
		a.stderr.mu.Unlock()
		if !exited {
			a.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("kwire %v stderr: %s", args, a.stderr.String())
		}
	})
	a.stderr.wait(t, "kwire "+args[0]+" to start", func() bool {
		return a.exited || bytes.Contains(a.stderr.buf.Bytes(), []byte(ready))
	})
	if a.exited {
		t.Fatalf("kwire %s exited early: %s", args[0], a.stderr.String())
	}
	return a
}

// startAgent runs `kwire live args...`.
func startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	return startProc(t, "kwire: capturing on", append([]string{"live"}, args...)...)
}

// stop sends SIGTERM and waits for the process to exit.
func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGTERM)
	a.wait(t)
}

// wait waits for the process to exit by itself, which it must do with
// status 0.
func (a *agentProc) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("kwire: %v: %s", err, a.stderr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("kwire did not stop: %s", a.stderr.String())
	}
}

// kill sends SIGKILL (no final counters, no last batches) and waits.
func (a *agentProc) kill(t *testing.T) {
	t.Helper()
	a.cmd.Process.Kill()
	select {
	case <-a.done:
	case <-time.After(waitTimeout):
		t.Fatal("agent did not die on SIGKILL")
	}
}

// aggLive is a live aggregation rig: a 3-broker kfake cluster whose
// topics' partitions are led by brokers 0, 1, 2 in turn, a 1-broker kfake
// transport (its listener one the test can take down), and an agent per
// broker port, `kwire live -i lo --publish` named bN (one "host" each),
// each writing what it captured with -w.
type aggLive struct {
	t      *testing.T
	kf     *kfake.Cluster
	ports  []string
	tr     *kfake.Cluster
	trLn   *flakyListener
	url    string
	dir    string
	agents []*agentProc // the current run on each broker
	runs   []int        // runs started on each broker
	files  []string     // every run's -w file
}

func newAggLive(t *testing.T, opts []kfake.Opt, topics ...string) *aggLive {
	t.Helper()
	needCapture(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	r := &aggLive{t: t, dir: t.TempDir(), agents: make([]*agentProc, 3), runs: make([]int, 3)}
	kf, ports := newCluster(t, append([]kfake.Opt{kfake.SeedTopics(6, topics...)}, opts...)...)
	r.kf, r.ports = kf, strings.Split(ports, ",")
	for _, topic := range topics {
		leadersRoundRobin(t, kf, topic, 6)
	}
	made := make(chan *flakyListener, 1)
	tr, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire", "kwire-dup"), kfake.ListenFn(listenFlaky(made)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	r.tr, r.trLn = tr, <-made
	r.url = "kafka://" + strings.Join(tr.ListenAddrs(), ",") + "/kwire"
	for i := range 3 {
		r.startAgent(i)
	}
	return r
}

// startAgent starts (or restarts) the agent of broker i.
func (r *aggLive) startAgent(i int) {
	r.t.Helper()
	r.runs[i]++
	f := filepath.Join(r.dir, fmt.Sprintf("b%d.%d.pcapng", i, r.runs[i]))
	r.files = append(r.files, f)
	// Agents sign their batches (TestAggregateLive's aggregator verifies
	// them; the other tests' read them without keys, as an aggregator
	// not given the keyring yet does).
	key := filepath.Join(r.dir, fmt.Sprintf("b%d.key", i))
	if err := os.WriteFile(key, []byte(liveKeys[i]+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.agents[i] = startAgent(r.t, "-i", "lo", "--port", r.ports[i], "--publish", r.url, "--publish-agent", fmt.Sprintf("b%d", i),
		"--publish-key-file", key, "-w", f, "--json", "--stats-every", "1s")
}

// liveKeys are the keys of the live agents b0, b1 and b2.
var liveKeys = [...]string{testKeyB0, testKeyB1, testKeyB2}

// keyring writes the agents' keyring and returns its path.
func (r *aggLive) keyring() string {
	r.t.Helper()
	p := filepath.Join(r.dir, "agents.keys")
	if err := os.WriteFile(p, []byte(strings.Join(liveKeys[:], "\n")+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// stopAgents stops every agent with SIGTERM (in parallel: each waits for
// its last batches to be delivered).
func (r *aggLive) stopAgents() {
	r.t.Helper()
	for _, a := range r.agents {
		a.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, a := range r.agents {
		a.wait(r.t)
	}
}

var deliveredRE = regexp.MustCompile(`kwire: publish: [1-9]\d* batches`)

// published waits until every agent has delivered a batch.
func (r *aggLive) published() {
	r.t.Helper()
	for _, a := range r.agents {
		a.stderr.wait(r.t, "the agent to deliver a batch", func() bool { return deliveredRE.Match(a.stderr.buf.Bytes()) })
	}
}

// delivered waits until agent i has delivered what it captured so far:
// its batches go when 100 ms old, looked at every second after its stats
// line, which says how many bytes wait for the transport.
func (r *aggLive) delivered(i int) {
	r.t.Helper()
	a := r.agents[i]
	a.stderr.mu.Lock()
	from := a.stderr.buf.Len()
	a.stderr.mu.Unlock()
	a.stderr.wait(r.t, "the agent to deliver what it captured", func() bool {
		lines := waitingRE.FindAllSubmatch(a.stderr.buf.Bytes()[from:], -1)
		return len(lines) >= 2 && string(lines[len(lines)-1][1]) == "0"
	})
}

// captured waits until the agent of broker i, the group's coordinator,
// has captured n member events of group with action (its own output
// tells them): a capture stopped by SIGTERM loses what still waits in its
// ring, which on a loaded machine may be the members' last LeaveGroup.
func (r *aggLive) captured(i int, group, action string, n int) {
	r.t.Helper()
	want := []byte(`"action":"` + action + `","group":"` + group + `"`)
	a := r.agents[i]
	a.stdout.wait(r.t, fmt.Sprintf("agent b%d to capture %d %s events of %s", i, n, action, group), func() bool {
		return bytes.Count(a.stdout.buf.Bytes(), want) >= n
	})
}

// startAggregator runs `kwire aggregate` on the agents' topic while they
// run; it exits once caught up with every agent stopped.
func (r *aggLive) startAggregator() *agentProc {
	r.t.Helper()
	return startProc(r.t, "kwire: aggregating", "aggregate", "--json", "--from", r.url, "--exit-idle", "1s")
}

// analyze is `kwire analyze` of every -w file, normalized.
func (r *aggLive) analyze() []string {
	r.t.Helper()
	want, _ := normalize(r.t, runKwire(r.t, append([]string{"analyze", "--json", "--port", strings.Join(r.ports, ",")}, r.files...)...))
	return want
}

// summaryUntimed drops the summary's time: a live agent's last clock is
// when it stopped (its final counters), the file's the last packet.
func summaryUntimed(t *testing.T, lines []string) []string {
	t.Helper()
	out := slices.Clone(lines)
	for i, l := range out {
		var v map[string]any
		if json.Unmarshal([]byte(l), &v) != nil || v["type"] != "summary" {
			continue
		}
		delete(v, "time")
		delete(v, "ts")
		delete(v, "ts_ms")
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	return out
}

// fcGated gives each kgo member a gate that sends its FindCoordinator to
// broker 0.
func fcGated(kf *kfake.Cluster) func() []kgo.Opt {
	return func() []kgo.Opt {
		g := newFCGate(kf.ListenAddrs()[0])
		return []kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()[0]), kgo.Dialer(g.dial)}
	}
}

// TestAggregateLive: three `kwire live -i lo` agents, one per broker port
// of a 3-broker kfake cluster (each seeing one "host"), publish to a
// fourth kfake. A kgo consumer group coordinated by broker 1 and a sarama
// group coordinated by broker 2, both asking broker 0 for their
// coordinator, each consuming a topic whose six partitions are led by all
// three brokers, join, consume, commit and leave. kwire aggregate over the
// agents' topic tells what kwire analyze tells of the agents' -w files:
// the same generations, members, commits, coordinators, hazards and
// summary (fetched records and bytes per member and partition included).
// The same batches delivered twice change only duplicate_batches.
func TestAggregateLive(t *testing.T) {
	start := time.Now()
	const topic, stopic = "agg-live-topic", "agg-sarama-topic"
	r := newAggLive(t, nil, topic, stopic)
	g := newGroup(t, r.kf, groupOn(t, r.kf, "agg-live-group", 1), topic, 6)
	g.memberOpts = fcGated(r.kf)
	s := newGroup(t, r.kf, groupOn(t, r.kf, "agg-sarama-group", 2), stopic, 6)
	both := func(f func(*group, string), kgoID, saramaID string) { f(g, kgoID); f(s, saramaID) }
	settled := func(what string) { g.settled(what); s.settled(what) }
	produce := func() { g.produce(50); s.produce(50) }

	produce()
	g.join("member-1")
	s.joinSarama("sarama-1")
	settled("the first members to consume and commit everything")
	g.join("member-2")
	s.joinSarama("sarama-2")
	produce()
	settled("the second members to join")
	both((*group).leave, "member-1", "sarama-1")
	produce()
	settled("the first members to leave")
	both((*group).leave, "member-2", "sarama-2")
	r.captured(1, g.name, "left", 2)
	r.captured(2, s.name, "left", 2)
	g.prod.Close()
	s.prod.Close()
	r.stopAgents()
	t.Logf("clients and agents done after %v", time.Since(start).Round(time.Millisecond))

	want := r.analyze()
	keys := r.keyring()
	got, agg := normalize(t, runKwire(t, "aggregate", "--json", "--from", r.url, "--exit-idle", "1s", "--agent-key-file", keys))
	compareLines(t, summaryUntimed(t, want), summaryUntimed(t, got))
	checkAggLine(t, agg, map[string]string{"b0": "stopped", "b1": "stopped", "b2": "stopped"}, "")
	if agg.Late != 0 || agg.Withheld != 0 || agg.Duplicates != 0 || agg.Unverified != 0 {
		t.Errorf("aggregate line: %+v; want no late exchange, withheld expiry, duplicate or unverified batch", agg)
	}
	for _, x := range []struct {
		g     *group
		coord int
	}{{g, 1}, {s, 2}} {
		checkGroupEvents(t, got, x.g.name, 2, 2, 0)
		checkCoordinator(t, got, x.g.name, r.kf.ListenAddrs()[0], r.ports[x.coord])
		checkFetched(t, got, x.g.name, x.g.topic, 150)
	}

	// Every batch twice (producer retries, a replayed topic): only
	// duplicate_batches moves.
	batches := 0
	for _, a := range agg.Agents {
		batches += int(a.Batches)
	}
	copyTopic(t, r.tr.ListenAddrs(), "kwire", batches, map[string]func(*wire.Batch) int{"kwire-dup": func(*wire.Batch) int { return 2 }})
	dup, dagg := normalize(t, runKwire(t, "aggregate", "--json", "--from", strings.TrimSuffix(r.url, "kwire")+"kwire-dup", "--exit-idle", "1s", "--agent-key-file", keys))
	compareLines(t, summaryUntimed(t, want), summaryUntimed(t, dup))
	if dagg == nil || dagg.Duplicates != int64(batches) || dagg.Missing != 0 {
		t.Errorf("every batch twice: aggregate line %+v, want %d duplicate batches and none missing", dagg, batches)
	}
	t.Logf("%d lines compared in %v; %+v", len(want), time.Since(start).Round(time.Millisecond), agg)
}

// checkAggLine checks the aggregate line: the agents (name: the states of
// its runs, sorted), nothing missing or dropped, but the last batches of
// the runs of agent killed (SIGKILL: they may have been waiting).
func checkAggLine(t *testing.T, agg *aggregate.Line, states map[string]string, killed string) {
	t.Helper()
	if agg == nil {
		t.Fatal("no aggregate line")
	}
	runs := map[string][]string{}
	missing := agg.Missing
	for _, a := range agg.Agents {
		name, _, _ := strings.Cut(a.Agent, "/")
		runs[name] = append(runs[name], a.State)
		if name == killed && a.State == "restarted" {
			missing -= a.Missing
		}
	}
	got := map[string]string{}
	for name, s := range runs {
		slices.Sort(s)
		got[name] = strings.Join(s, " ")
	}
	for name, want := range states {
		if got[name] != want {
			t.Errorf("agent %s: states %q, want %q", name, got[name], want)
		}
	}
	if len(got) != len(states) || missing != 0 || agg.Dropped != 0 || agg.Corrupt != 0 {
		t.Errorf("aggregate line: %+v; want agents %v, nothing missing, dropped or corrupt", agg, states)
	}
}

// checkGroupEvents checks group's member events and accepted commits in lines:
// joined and left members, expiries (events and hazards).
func checkGroupEvents(t *testing.T, lines []string, group string, joined, left, expired int) {
	t.Helper()
	n := map[string]int{}
	var events []string
	for _, l := range lines {
		var v struct{ Type, Group, Action, Kind, Outcome string }
		json.Unmarshal([]byte(l), &v)
		if v.Group != group {
			continue
		}
		switch {
		case v.Type == "member":
			n[v.Action]++
			events = append(events, l)
		case v.Type == "hazard" && v.Kind == "member_expired":
			n["expired hazard"]++
		case v.Type == "commit" && v.Outcome == "accepted":
			n["commit"]++
		}
	}
	if n["joined"] != joined || n["left"] != left || n["expired"] != expired || n["expired hazard"] != expired || n["commit"] == 0 {
		t.Errorf("%s: %v; want %d joined, %d left, %d expired (events and hazards), some commits accepted; member events:\n%s",
			group, n, joined, left, expired, strings.Join(events, "\n"))
	}
}

// checkCoordinator checks that group learned its coordinator (on port)
// from FindCoordinator asked of another broker (asked).
func checkCoordinator(t *testing.T, lines []string, group, asked, port string) {
	t.Helper()
	for _, l := range lines {
		var v struct {
			Type, Group, Source string
			LearnedFrom         string `json:"learned_from"`
			Port                int
		}
		json.Unmarshal([]byte(l), &v)
		if v.Type == "coordinator" && v.Group == group && v.Source == "find_coordinator" {
			if v.LearnedFrom != asked || fmt.Sprint(v.Port) != port {
				t.Errorf("%s: coordinator on port %d learned from %s; want port %s learned from %s", group, v.Port, v.LearnedFrom, port, asked)
			}
			return
		}
	}
	t.Errorf("%s: no coordinator learned from FindCoordinator", group)
}

// checkFetched checks that the summary attributes at least n fetched
// records (and some bytes) of every partition of topic to group's members.
func checkFetched(t *testing.T, lines []string, group, topic string, n int64) {
	t.Helper()
	var sum struct {
		Groups []struct {
			Group   string
			Members []struct {
				Fetched []struct {
					Topic          string
					Partition      int32
					Records, Bytes int64
				}
			}
		}
	}
	for _, l := range lines {
		if strings.Contains(l, `"type":"summary"`) {
			json.Unmarshal([]byte(l), &sum)
		}
	}
	records, bytes := map[int32]int64{}, map[int32]int64{}
	for _, g := range sum.Groups {
		for _, m := range g.Members {
			for _, f := range m.Fetched {
				if g.Group == group && f.Topic == topic {
					records[f.Partition] += f.Records
					bytes[f.Partition] += f.Bytes
				}
			}
		}
	}
	for p := range int32(6) {
		if records[p] < n || bytes[p] == 0 {
			t.Errorf("%s %s/%d: %d records, %d bytes fetched attributed to members; want at least %d records", group, topic, p, records[p], bytes[p], n)
		}
	}
}
