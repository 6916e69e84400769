//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/capture"
)

// needEBPF skips the test unless the eBPF probes can run here.
func needEBPF(t *testing.T) {
	t.Helper()
	ports, err := capture.ParsePorts("9092")
	if err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenEBPF(&capture.EBPFOptions{}, &capture.Options{Ports: ports})
	if errors.Is(err, capture.ErrEBPFUnavailable) {
		t.Skipf("eBPF probes cannot run here (CI runs this as root on a BTF kernel): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
}

// TestLiveEBPF runs kwire live --ebpf (the command, as a user would) over
// a consumer group of real kgo clients against kfake: the output must tell
// the group's story, count no ring drop, and name each member's process
// in its member and commit events and in the final summary. (capture's TestEBPFGroup compares the eBPF capture
// with a packet capture of the same traffic, clients in their own
// processes.)
func TestLiveEBPF(t *testing.T) {
	needEBPF(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	const groupName, topic = "ebpf-group", "ebpf-topic"
	kf, ports := newCluster(t, kfake.SeedTopics(6, topic))
	live := startLive(t, "--ebpf", "--port", ports, "--json", "--stats-every", "1s")
	if !strings.Contains(live.stderr.String(), "eBPF socket probes") {
		t.Errorf("status line does not name the eBPF source: %s", live.stderr.String())
	}
	g := newGroup(t, kf, groupName, topic, 6)
	g.produce(50)
	for _, id := range []string{"member-1", "member-2", "member-3"} {
		g.join(id)
		g.produce(50)
		g.settled(id + " to join")
	}
	for _, id := range []string{"member-1", "member-2", "member-3"} {
		g.leave(id)
	}
	g.prod.Close()
	live.waitClosed(t)
	if code := live.stop(t); code != 0 {
		t.Fatalf("kwire live --ebpf exited %d: %s", code, live.stderr.String())
	}
	out := live.stdout.String()
	checkStory(t, nonStats(out), groupName)

	var last struct {
		Capture struct {
			EBPF struct {
				RingDrops    *int64 `json:"ring_drops"`
				KernelEvents int64  `json:"kernel_events"`
				Events       int64  `json:"events"`
			} `json:"ebpf"`
		} `json:"capture"`
	}
	var summary struct {
		Groups []struct {
			Group   string `json:"group"`
			Members []struct {
				ClientID string `json:"client_id"`
				PID      int    `json:"pid"`
				Comm     string `json:"comm"`
			} `json:"members"`
		} `json:"groups"`
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(line, `{"v":3,"type":"stats"`):
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Fatalf("stats line %q: %v", line, err)
			}
		case strings.HasPrefix(line, `{"v":3,"type":"member"`), strings.HasPrefix(line, `{"v":3,"type":"commit"`):
			var ev struct {
				Type, Group string
				PID         int
				Conn        struct{ PID int }
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("event line %q: %v", line, err)
			}
			if pid := max(ev.PID, ev.Conn.PID); ev.Group == groupName && pid != os.Getpid() {
				t.Errorf("%s event of %s without this process's pid: %s", ev.Type, groupName, line)
			}
		case strings.HasPrefix(line, `{"v":3,"type":"summary"`):
			if err := json.Unmarshal([]byte(line), &summary); err != nil {
				t.Fatalf("summary line: %v", err)
			}
		}
	}
	e := last.Capture.EBPF
	if e.RingDrops == nil || *e.RingDrops != 0 || e.KernelEvents != e.Events {
		t.Errorf("final stats: ring drops %v, %d events submitted, %d read; want 0 drops, all read", e.RingDrops, e.KernelEvents, e.Events)
	}
	members := 0
	for _, gr := range summary.Groups {
		if gr.Group != groupName {
			continue
		}
		for _, m := range gr.Members {
			members++
			if m.PID != os.Getpid() || m.Comm == "" {
				t.Errorf("member %s: pid %d comm %q; want this process, %d, and its name", m.ClientID, m.PID, m.Comm, os.Getpid())
			}
		}
	}
	if members != 3 {
		t.Errorf("summary: %d members of %s, want 3", members, groupName)
	}
}
