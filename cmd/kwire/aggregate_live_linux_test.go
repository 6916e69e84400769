//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// agentProc is one `kwire live --publish` agent, run as a process of its
// own (this test binary as kwire, see TestMain).
type agentProc struct {
	cmd    *exec.Cmd
	stderr *output
	done   chan error
}

func startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{stderr: newOutput(), done: make(chan error, 1)}
	a.cmd = exec.Command(os.Args[0], append([]string{"live"}, args...)...)
	a.cmd.Env = append(os.Environ(), "KWIRE_TEST_MAIN=1")
	a.cmd.Stderr = a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	go func() {
		err := a.cmd.Wait()
		a.stderr.update(func() { exited = true })
		a.done <- err
	}()
	t.Cleanup(func() {
		if !exited {
			a.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("agent %v stderr: %s", args, a.stderr.String())
		}
	})
	a.stderr.wait(t, "kwire live to start", func() bool {
		return exited || bytes.Contains(a.stderr.buf.Bytes(), []byte("kwire: capturing on"))
	})
	if exited {
		t.Fatalf("kwire live exited early: %s", a.stderr.String())
	}
	return a
}

// stop sends SIGTERM and waits for the agent to exit.
func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("agent: %v: %s", err, a.stderr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("agent did not stop on SIGTERM: %s", a.stderr.String())
	}
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
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	return out
}

// TestAggregateLive: three `kwire live -i lo` agents, one per broker port
// of a 3-broker kfake cluster (each seeing one "host"), publish to a
// fourth kfake; a kgo consumer group (its coordinator one broker, its six
// partitions' leaders all three) joins, consumes, commits and leaves.
// kwire aggregate over the agents' topic tells what kwire analyze tells of
// the agents' -w files: the same generations, members, commits,
// coordinators, hazards and summary (fetched records and bytes per group
// and partition included).
func TestAggregateLive(t *testing.T) {
	needCapture(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	start := time.Now()
	const groupName, topic = "agg-live-group", "agg-live-topic"
	kf, ports := newCluster(t, kfake.SeedTopics(6, topic))
	tr, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	url := "kafka://" + strings.Join(tr.ListenAddrs(), ",") + "/kwire"
	dir := t.TempDir()
	var agents []*agentProc
	var files []string
	for i, port := range strings.Split(ports, ",") {
		f := filepath.Join(dir, "b"+string(rune('0'+i))+".pcapng")
		files = append(files, f)
		agents = append(agents, startAgent(t, "-i", "lo", "--port", port, "--publish", url, "-w", f, "--json", "--stats-every", "1s"))
	}

	g := newGroup(t, kf, groupName, topic, 6)
	g.produce(50)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")
	g.join("member-2")
	g.produce(50)
	g.settled("member-2 to join")
	g.leave("member-1")
	g.produce(50)
	g.settled("member-1 to leave")
	g.leave("member-2")
	g.prod.Close()
	for _, a := range agents {
		a.stop(t)
	}
	t.Logf("clients and agents done after %v", time.Since(start).Round(time.Millisecond))

	want, _ := normalize(t, runKwire(t, append([]string{"analyze", "--json", "--port", ports}, files...)...))
	got, agg := normalize(t, runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s"))
	compareLines(t, summaryUntimed(t, want), summaryUntimed(t, got))
	if agg == nil || len(agg.Agents) != 3 || agg.Missing != 0 || agg.Duplicates != 0 || agg.Dropped != 0 || agg.Withheld != 0 {
		t.Fatalf("aggregate line: %+v", agg)
	}
	for _, a := range agg.Agents {
		if a.State != "stopped" {
			t.Errorf("agent %s: state %s, want stopped", a.Agent, a.State)
		}
	}
	joined, left, commits := 0, 0, 0
	for _, l := range got {
		if !strings.Contains(l, `"group":"`+groupName+`"`) {
			continue
		}
		joined += strings.Count(l, `"action":"joined"`)
		left += strings.Count(l, `"action":"left"`)
		if strings.Contains(l, `"type":"commit"`) && strings.Contains(l, `"outcome":"accepted"`) {
			commits++
		}
	}
	if joined != 2 || left != 2 || commits == 0 {
		t.Errorf("%s: %d members joined, %d left, %d commits accepted; want 2, 2, some", groupName, joined, left, commits)
	}
	t.Logf("%d lines compared in %v; %+v", len(want), time.Since(start).Round(time.Millisecond), agg)
}
