package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/aggregate/wire"
)

// TestAggregateGroupExitIdle: two kwire aggregate --group --exit-idle
// instances over a topic whose agents all stop each exit by themselves,
// within seconds of the last agent's final counters, and their lines
// together (summaries and agents per partition from the last owner, as
// when one of them leaves first) equal the single aggregator's over the
// same topic. (Before, the router stage ran until interrupted: an
// instance whose owner stage was idle never returned.)
func TestAggregateGroupExitIdle(t *testing.T) { groupExitIdle(t, false) }

// TestAggregateGroupForgedAgents is TestAggregateGroupExitIdle with
// signed agents and forgers (no key, another agent's key, an agent no
// key names): the routers drop every forged batch before routing it, and
// count them, together, as the single aggregator does; the instances'
// lines together are still the single aggregator's.
func TestAggregateGroupForgedAgents(t *testing.T) { groupExitIdle(t, true) }

// testKeyOf is a test key line of agent host.
func testKeyOf(host string) string {
	sum := sha256.Sum256([]byte("kwire test key " + host))
	return host + " " + hex.EncodeToString(sum[:])
}

func groupExitIdle(t *testing.T, signed bool) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	const idle = 2 * time.Second

	// The sentinel is heard before the instances start: an agent still
	// sending, it keeps them from exiting before the agents publish, and
	// holds the merge back while they publish one after another.
	agents := groupAgents(t)
	var keyArgs []string
	if signed {
		lines := []string{testKeyOf("sentinel")}
		for i := range agents {
			line := testKeyOf(agents[i].host)
			lines = append(lines, line)
			agents[i].keyFile = writeKeyFile(t, agents[i].host+".key", line)
		}
		keyArgs = []string{"--agent-key-file", writeKeyFile(t, "agents.keys", lines...)}
	}
	sent := newSentinel(t, c.ListenAddrs(), "kwire")
	if signed {
		sent.sign = wire.NewSigner(*parsedKey(t, testKeyOf("sentinel")))
	}
	sent.at(t, time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), false)

	var ins []*groupInstance
	deadline := time.After(90 * time.Second)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-deadline:
				var st []string
				for _, in := range ins {
					st = append(st, in.hook.String())
				}
				t.Fatalf("timed out waiting for %s: %s", what, strings.Join(st, "; "))
			}
		}
	}
	for i := range 2 {
		in := startGroupInstance(t, url, append([]string{"--exit-idle", idle.String()}, keyArgs...)...)
		ins = append(ins, in)
		waitFor(fmt.Sprintf("instance %d to own partitions", i), func() bool {
			return len(in.hook.Owned("own")) > 0 && len(in.hook.Owned("route")) > 0
		})
	}
	waitFor("both instances to own partitions", func() bool {
		return len(ins[0].hook.Owned("own")) > 0 && len(ins[1].hook.Owned("own")) > 0
	})

	forged := 0
	if signed {
		member := []string{filepath.Join(testdataDir(), "h_member_expired.pcapng")}
		forged = publishAgents(t, url, []agentSpec{
			{host: "g_xbroker-b1", run: 2, files: member},
			{host: "h_commit_gap", run: 1, files: member, forgeWith: parsedKey(t, testKeyOf("altport-b0"))},
			{host: "nobody", run: 1, files: member, forgeWith: parsedKey(t, testKeyOf("nobody"))},
		})
	}
	publishAgents(t, url, agents)
	sent.at(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), true)
	stopped := time.Now()
	for i, in := range ins {
		select {
		case <-in.done:
		case <-deadline:
			t.Fatalf("instance %d still running %v after the agents stopped (--exit-idle %v): %s", i, time.Since(stopped).Round(time.Millisecond), idle, in.hook.String())
		}
		if in.err != nil {
			t.Fatalf("instance %d: %v", i, in.err)
		}
		t.Logf("instance %d exited %v after the last agent stopped (--exit-idle %v)", i, in.at.Sub(stopped).Round(time.Millisecond), idle)
	}

	// In the order they stopped: a partition's summary and agents are its
	// last owner's.
	slices.SortFunc(ins, func(a, b *groupInstance) int { return a.at.Compare(b.at) })
	var outs [][]byte
	for _, in := range ins {
		out := []byte(in.out.String())
		gi := groupInfoOf(t, out)
		if gi.Groups == 0 && len(ins) > 1 && gi.Handovers == 0 {
			t.Logf("an instance wrote no group: %+v", gi)
		}
		outs = append(outs, out)
	}
	single := runKwire(t, append([]string{"aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0"}, keyArgs...)...)
	want, wantAgg := normalize(t, mergeSummaries(t, single))
	union, lineAgents := unionByOwner(t, 3, outs)
	got, _ := normalize(t, mergeSummaries(t, union))
	compareLines(t, want, got)
	if extra, missing := multisetDiff(want, got); len(extra)+len(missing) > 0 {
		t.Errorf("union has %d lines the single aggregator has not:\n%s\nand lacks %d:\n%s", len(extra), strings.Join(extra, "\n"), len(missing), strings.Join(missing, "\n"))
	}
	if len(lineAgents) != len(wantAgg.Agents) {
		t.Errorf("agents: union %d, single %d", len(lineAgents), len(wantAgg.Agents))
	}
	for i := range min(len(lineAgents), len(wantAgg.Agents)) {
		g, w := lineAgents[i], wantAgg.Agents[i]
		if g.Agent != w.Agent || g.Batches != w.Batches || g.Missing != w.Missing || g.State != w.State {
			t.Errorf("agent %d: union %+v, single %+v", i, g, w)
		}
	}
	var unverified int64
	for _, out := range outs {
		_, agg := normalize(t, out)
		unverified += agg.Unverified
	}
	if unverified != int64(forged) || wantAgg.Unverified != int64(forged) {
		t.Errorf("unverified batches: %d by the instances, %d by the single aggregator; %d forged", unverified, wantAgg.Unverified, forged)
	}
	t.Logf("%d lines compared, %d forged batches dropped", len(want), unverified)
}
