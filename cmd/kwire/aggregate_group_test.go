package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/correlate"
)

// groupAgents are the file-fed agents of TestAggregateGroup: one per
// broker capture of g_xbroker and of altport (a client's coordinator,
// leaders and FindCoordinator target on different hosts), and one host
// each for captures of a whole cluster with other groups. Every capture
// has a kwire-gen-truth client on 127.0.0.1: bound to several groups, it
// is ambiguous, which only holds if the owner of each group sees its
// requests to the others.
func groupAgents(t *testing.T) []agentSpec {
	t.Helper()
	var specs []agentSpec
	for _, set := range []string{"g_xbroker", "altport"} {
		files, _ := filepath.Glob(filepath.Join(testdataDir(), set+".b?.pcapng"))
		if len(files) != 3 {
			t.Fatalf("want 3 per-broker captures of %s, have %v", set, files)
		}
		for i, f := range files {
			specs = append(specs, agentSpec{host: fmt.Sprintf("%s-b%d", set, i), files: []string{f}})
		}
	}
	for _, c := range []string{"h_offset_reset", "h_commit_gap", "g_sarama", "h_non_owner_fetch"} {
		specs = append(specs, agentSpec{host: c, files: []string{filepath.Join(testdataDir(), c+".pcapng")}})
	}
	return specs
}

// TestAggregateGroup: two kwire aggregate --group instances over the
// agents' topic (kfake as the transport, both stages real consumer
// groups) write, together, the generation, member, commit, coordinator,
// hazard and anomaly lines and the summary a single aggregator writes
// over the same topic, and the same agent counts; each writes a share.
func TestAggregateGroup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type instance struct {
		hook *groupHook
		out  bytes.Buffer
		err  error
	}
	var ins [2]*instance
	var wg sync.WaitGroup
	deadline := time.After(60 * time.Second)
	// waitFor waits until ok holds, checking it after every change an
	// instance reports.
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-ins[0].hook.changed:
			case <-ins[1].hook.changed:
			case <-deadline:
				var st []string
				for _, in := range ins {
					in.hook.mu.Lock()
					st = append(st, fmt.Sprintf("owned %v idle %v read %d produced %d consumed %d", in.hook.owned, in.hook.idles,
						in.hook.read.Load(), in.hook.produced.Load(), in.hook.consumed.Load()))
					in.hook.mu.Unlock()
				}
				t.Fatalf("timed out waiting for %s: %s", what, strings.Join(st, "; "))
			}
		}
	}
	owns := func(i int) bool {
		h := ins[i].hook
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.owned["own"]) > 0 && len(h.owned["route"]) > 0
	}
	for i := range ins {
		ins[i] = &instance{hook: newGroupHook()}
	}
	// Both instances join before the agents publish, one after the other
	// (kfake has no initial rebalance delay), so that no partition moves
	// while they work.
	for i, in := range ins {
		var f aggregateFlags
		fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--json", "--from", url, "--group", "agg", "--quiet-after", "10m"}); err != nil {
			t.Fatal(err)
		}
		f.hook = in.hook
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.err = runAggregate(ctx, &f, &in.out, io.Discard)
		}()
		waitFor(fmt.Sprintf("instance %d to own partitions", i), func() bool { return owns(i) })
	}
	waitFor("both instances to own partitions", func() bool { return owns(0) && owns(1) })

	batches := int64(publishAgents(t, url, groupAgents(t)))
	t.Logf("agents published %d batches", batches)
	sum := func(f func(h *groupHook) int64) int64 { return f(ins[0].hook) + f(ins[1].hook) }
	waitFor("the routers to read every batch and the owners what they produced", func() bool {
		return sum(func(h *groupHook) int64 { return h.read.Load() }) == batches &&
			sum(func(h *groupHook) int64 { return h.consumed.Load() }) == sum(func(h *groupHook) int64 { return h.produced.Load() })
	})
	idles := func(i int) int {
		h := ins[i].hook
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.idles["own"]
	}
	i0, i1 := idles(0), idles(1)
	waitFor("both owners to be caught up", func() bool { return idles(0) > i0 && idles(1) > i1 })
	cancel()
	wg.Wait()

	var union []byte
	var lines [2]int
	var aggs []*aggregateLine
	for i, in := range ins {
		if in.err != nil {
			t.Fatalf("instance %d: %v", i, in.err)
		}
		got, agg := normalize(t, in.out.Bytes())
		if agg == nil {
			t.Fatalf("instance %d wrote no aggregate line", i)
		}
		aggs = append(aggs, agg)
		for _, l := range got {
			if !strings.Contains(l, `"type":"summary"`) {
				lines[i]++
			}
		}
		var gl struct {
			Group groupInfo `json:"group"`
		}
		for _, l := range strings.Split(strings.TrimSpace(in.out.String()), "\n") {
			if strings.Contains(l, `"type":"aggregate"`) {
				json.Unmarshal([]byte(l), &gl)
			}
		}
		t.Logf("instance %d: owns %v of %d partitions, %d groups, %d lines; router read %d, replayed %d, produced %d",
			i, gl.Group.Owned, gl.Group.Partitions, gl.Group.Groups, lines[i], gl.Group.Read, gl.Group.Replayed, gl.Group.Produced)
		if gl.Group.Groups == 0 || lines[i] == 0 || gl.Group.Read == 0 {
			t.Errorf("instance %d did no share of the work: %+v", i, gl.Group)
		}
		union = append(union, in.out.Bytes()...)
	}

	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s")
	want, wantAgg := normalize(t, mergeSummaries(t, single))
	got, _ := normalize(t, mergeSummaries(t, union))
	compareLines(t, want, got)
	t.Logf("%d lines compared, %d and %d from the instances", len(want), lines[0], lines[1])

	// The agents' counts: each agent counted by one instance.
	var agents []aggregateAgent
	var missing uint64
	var dups int64
	for _, a := range aggs {
		agents = append(agents, a.Agents...)
		missing += a.Missing
		dups += a.Duplicates
	}
	slices.SortFunc(agents, func(a, b aggregateAgent) int { return strings.Compare(a.Agent, b.Agent) })
	if len(agents) != len(wantAgg.Agents) || missing != wantAgg.Missing || dups != wantAgg.Duplicates {
		t.Errorf("agents: union %d agents, %d missing, %d duplicate; single %d, %d, %d", len(agents), missing, dups,
			len(wantAgg.Agents), wantAgg.Missing, wantAgg.Duplicates)
	}
	for i := range min(len(agents), len(wantAgg.Agents)) {
		g, w := agents[i], wantAgg.Agents[i]
		if g.Agent != w.Agent || g.Batches != w.Batches || g.Missing != w.Missing || g.State != w.State {
			t.Errorf("agent %d: union %+v, single %+v", i, g, w)
		}
	}
}

// mergeSummaries replaces the summary lines of out with one: groups,
// clients, unattributed consumption and hazards of all, in the single
// summary's orders, hazard counts summed. Stats (what each instance
// correlated, copies included) are left out.
func mergeSummaries(t *testing.T, out []byte) []byte {
	t.Helper()
	var rest []string
	var merged *correlate.Snapshot
	var base map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.Contains(l, `"type":"summary"`) {
			rest = append(rest, l)
			continue
		}
		var s correlate.Snapshot
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		if merged == nil {
			merged = &s
			json.Unmarshal([]byte(l), &base)
			continue
		}
		if !merged.Time.Equal(s.Time) {
			t.Errorf("summaries at %v and %v", merged.Time, s.Time)
		}
		merged.Groups = append(merged.Groups, s.Groups...)
		merged.Clients = append(merged.Clients, s.Clients...)
		merged.Unattributed = append(merged.Unattributed, s.Unattributed...)
		merged.Hazards = append(merged.Hazards, s.Hazards...)
	}
	if merged == nil {
		t.Fatal("no summary")
	}
	slices.SortFunc(merged.Groups, func(a, b correlate.Group) int { return strings.Compare(a.Group, b.Group) })
	slices.SortFunc(merged.Clients, func(a, b correlate.Client) int {
		return strings.Compare(a.ClientHost+"\x00"+a.ClientID, b.ClientHost+"\x00"+b.ClientID)
	})
	slices.SortFunc(merged.Unattributed, func(a, b correlate.Consumption) int {
		return strings.Compare(a.ClientHost+"\x00"+a.ClientID, b.ClientHost+"\x00"+b.ClientID)
	})
	slices.SortStableFunc(merged.Hazards, func(a, b correlate.HazardEvent) int {
		if d := correlate.SeverityRank(b.Severity) - correlate.SeverityRank(a.Severity); d != 0 {
			return d
		}
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return bytes.Compare(x, y)
	})
	merged.HazardCounts = map[string]int{}
	for _, h := range merged.Hazards {
		merged.HazardCounts[h.Severity]++
	}
	merged.Stats = correlate.Stats{}
	b, _ := json.Marshal(merged)
	var v map[string]any
	json.Unmarshal(b, &v)
	for k, x := range v {
		base[k] = x
	}
	b, _ = json.Marshal(base)
	return []byte(strings.Join(append(rest, string(b)), "\n") + "\n")
}
