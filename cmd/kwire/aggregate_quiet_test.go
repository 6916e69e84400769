package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/aggregate/wire"
)

// TestAggregateQuietAgent: the agent on the coordinator's host of a
// consumer group (g_xbroker's b1) goes quiet mid-run, or is killed and
// restarted, while the other agents go on. The aggregator must not
// declare that group's members expired from a silence only it had, and
// must still report a real expiry that another host's agent captured
// (h_member_expired, on a host of its own, its clock moved to after the
// agent went quiet).
func TestAggregateQuietAgent(t *testing.T) {
	xb, _ := filepath.Glob(filepath.Join(testdataDir(), "g_xbroker.b?.pcapng"))
	if len(xb) != 3 {
		t.Fatalf("want 3 per-broker captures of g_xbroker, have %v", xb)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	quiet := at("2026-11-29T11:39:01.5Z") // b1 sees nothing after
	// h_member_expired begins at 00:21:11.68 on 2026-12-02: move it to
	// 11:39:02 on 2026-11-29, its expiry then at 11:39:09.58, after the
	// xb members' sessions (6s) ran out with b1 quiet.
	moved := at("2026-11-29T11:39:02Z").Sub(at("2026-12-02T00:21:11Z"))
	hme := agentSpec{host: "hme", files: []string{filepath.Join(testdataDir(), "h_member_expired.pcapng")}, skew: moved}
	tests := []struct {
		name      string
		b1        []agentSpec
		dropFinal bool // b1's runs never said they stopped
		states    map[string]string
		restarts  int
		// unobserved: members whose expiry is withheld at the end (the
		// restarted run saw the members again, and leave).
		unobserved int
	}{
		{"quiet", []agentSpec{{host: "b1", files: xb[1:2], cut: quiet}}, true,
			map[string]string{"b1/1": "quiet"}, 0, 2},
		{"killed and restarted", []agentSpec{
			{host: "b1", files: xb[1:2], cut: quiet},
			{host: "b1", run: 2, files: xb[1:2], since: quiet.Add(3 * time.Second)},
		}, true, map[string]string{"b1/1": "restarted", "b1/2": "stopped"}, 1, 0},
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "all-0", "all-1", "kwire-0", "kwire-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := func(topic string) string { return "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/" + topic }
			specs := []agentSpec{{host: "b0", files: xb[0:1]}, {host: "b2", files: xb[2:3]}, hme}
			n := publishAgents(t, url(fmt.Sprintf("all-%d", i)), append(specs, tt.b1...))
			copyTopic(t, c.ListenAddrs(), fmt.Sprintf("all-%d", i), n, map[string]func(*wire.Batch) int{
				fmt.Sprintf("kwire-%d", i): func(b *wire.Batch) int {
					if b.Agent.Host == "b1" && tt.dropFinal && (b.Agent.Run == 1 || len(tt.b1) == 1) && final(b) {
						return 0
					}
					return 1
				},
			})
			out := runKwire(t, "aggregate", "--json", "--from", url(fmt.Sprintf("kwire-%d", i)), "--exit-idle", "1s", "--quiet-after", "500ms", "--clock-window", "0")
			checkQuiet(t, out, tt.states, tt.restarts, tt.unobserved)
		})
	}
}

func final(b *wire.Batch) bool {
	for _, it := range b.Items {
		if it.Kind == wire.KindCounters && it.Counters != nil && it.Counters.Final {
			return true
		}
	}
	return false
}

func checkQuiet(t *testing.T, out []byte, states map[string]string, restarts, unobserved int) {
	t.Helper()
	expired := map[string]int{}
	var agg aggregate.Line
	var summary struct {
		Groups []struct {
			Group   string
			Members []struct {
				MemberID string `json:"member_id"`
				Status   string
			}
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v struct{ Type, Action, Kind, Group string }
		json.Unmarshal([]byte(l), &v)
		switch {
		case v.Type == "member" && v.Action == "expired", v.Type == "hazard" && v.Kind == "member_expired":
			expired[v.Group]++
		case v.Type == "aggregate":
			json.Unmarshal([]byte(l), &agg)
		case v.Type == "summary":
			json.Unmarshal([]byte(l), &summary)
		}
	}
	if expired["xb-group-3"] != 0 || expired["hme-group"] != 2 {
		t.Errorf("expiry events and hazards by group: %v; want none of xb-group-3 (its coordinator's agent went quiet), hme-group's member event and hazard", expired)
	}
	for _, g := range summary.Groups {
		for _, m := range g.Members {
			if g.Group == "xb-group-3" && m.Status == "expired" {
				t.Errorf("summary: %s %s expired", g.Group, m.MemberID)
			}
		}
	}
	if int(agg.Withheld) < unobserved || len(agg.Unobserved) != unobserved || agg.Restarts != restarts {
		t.Errorf("aggregate line: %d expiries withheld, unobserved %+v, %d restarts; want %d xb members unobserved, %d restarts",
			agg.Withheld, agg.Unobserved, agg.Restarts, unobserved, restarts)
	}
	for _, u := range agg.Unobserved {
		if u.Group != "xb-group-3" || u.Host != "b1" {
			t.Errorf("unobserved %+v: want xb-group-3 members, host b1", u)
		}
	}
	for _, a := range agg.Agents {
		if want, ok := states[a.Agent]; ok && a.State != want {
			t.Errorf("agent %s: state %s, want %s", a.Agent, a.State, want)
		}
	}
	t.Logf("aggregate line: %+v", agg)
}
