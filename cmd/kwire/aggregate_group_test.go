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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/route"
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
		hook *aggregate.Hook
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
			case <-ins[0].hook.Changed():
			case <-ins[1].hook.Changed():
			case <-deadline:
				var st []string
				for _, in := range ins {
					st = append(st, in.hook.String())
				}
				t.Fatalf("timed out waiting for %s: %s", what, strings.Join(st, "; "))
			}
		}
	}
	owns := func(i int) bool {
		h := ins[i].hook
		return len(h.Owned("own")) > 0 && len(h.Owned("route")) > 0
	}
	for i := range ins {
		ins[i] = &instance{hook: aggregate.NewHook()}
	}
	// Both instances join before the agents publish, one after the other
	// (kfake has no initial rebalance delay), so that no partition moves
	// while they work.
	for i, in := range ins {
		var f aggregateFlags
		fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--json", "--from", url, "--group", "agg", "--quiet-after", "10m", "--clock-window", "0"}); err != nil {
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

	// A sentinel agent holds the merge back until every agent published
	// (agents publish one after another, and the captures' times overlap).
	sent := newSentinel(t, c.ListenAddrs(), "kwire")
	batches := sent.at(t, time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), false)
	batches += int64(publishAgents(t, url, groupAgents(t)))
	t.Logf("agents published %d batches", batches)
	sum := func(f func(h *aggregate.Hook) int64) int64 { return f(ins[0].hook) + f(ins[1].hook) }
	read := func() bool {
		return sum(func(h *aggregate.Hook) int64 { return h.Read() }) == batches &&
			sum(func(h *aggregate.Hook) int64 { return h.Consumed() }) == sum(func(h *aggregate.Hook) int64 { return h.Produced() })
	}
	waitFor("the routers to read every batch and the owners what they produced", read)
	batches += sent.at(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), true)
	waitFor("the routers to read the sentinel's end and the owners what they produced", read)
	idles := func(i int) int {
		return ins[i].hook.Idles("own")
	}
	i0, i1 := idles(0), idles(1)
	waitFor("both owners to be caught up", func() bool { return idles(0) > i0 && idles(1) > i1 })
	cancel()
	wg.Wait()

	var union []byte
	var lines [2]int
	var aggs []*aggregate.Line
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
			Group aggregate.GroupInfo `json:"group"`
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

	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0")
	want, wantAgg := normalize(t, mergeSummaries(t, single))
	got, _ := normalize(t, mergeSummaries(t, union))
	compareLines(t, want, got)
	if extra, missing := multisetDiff(want, got); len(extra)+len(missing) > 0 {
		t.Errorf("union has %d lines the single aggregator has not:\n%s\nand lacks %d:\n%s", len(extra), strings.Join(extra, "\n"), len(missing), strings.Join(missing, "\n"))
	}
	t.Logf("%d lines compared, %d and %d from the instances", len(want), lines[0], lines[1])

	// The agents' counts: each agent counted by one instance.
	var agents []aggregate.LineAgent
	var missing uint64
	var dups int64
	for _, a := range aggs {
		agents = append(agents, a.Agents...)
		missing += a.Missing
		dups += a.Duplicates
	}
	slices.SortFunc(agents, func(a, b aggregate.LineAgent) int { return strings.Compare(a.Agent, b.Agent) })
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
		if !merged.Time.Equal(s.Time.Time) {
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

// groupInstance is one kwire aggregate --group instance of a test, with
// its own context: it joins and leaves when the test says.
type groupInstance struct {
	hook   *aggregate.Hook
	out    bytes.Buffer
	err    error
	cancel context.CancelFunc
	done   chan struct{}
	at     time.Time // when runAggregate returned
}

// startGroupInstance runs kwire aggregate --group agg over url in the
// test's process, with extra flags after the usual ones.
func startGroupInstance(t *testing.T, url string, extra ...string) *groupInstance {
	t.Helper()
	var f aggregateFlags
	fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(append([]string{"--json", "--from", url, "--group", "agg", "--quiet-after", "10m", "--clock-window", "0"}, extra...)); err != nil {
		t.Fatal(err)
	}
	in := &groupInstance{hook: aggregate.NewHook(), done: make(chan struct{})}
	f.hook = in.hook
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() {
		defer close(in.done)
		in.err = runAggregate(ctx, &f, &in.out, io.Discard)
		in.at = time.Now()
	}()
	t.Cleanup(func() { cancel(); <-in.done })
	return in
}

func (in *groupInstance) owned(stage string) []int32 {
	return in.hook.Owned(stage)
}

func (in *groupInstance) idles() int {
	return in.hook.Idles("own")
}

// groupInfoOf returns the group part of an instance's aggregate line.
func groupInfoOf(t *testing.T, out []byte) aggregate.GroupInfo {
	t.Helper()
	var gl struct {
		Group aggregate.GroupInfo `json:"group"`
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, `"type":"aggregate"`) {
			if err := json.Unmarshal([]byte(l), &gl); err != nil {
				t.Fatal(err)
			}
		}
	}
	return gl.Group
}

// TestAggregateGroupHandover: a --group instance works alone, a second
// one joins while agents publish (partitions of both stages move to it),
// and later the first leaves while the second goes on; the union of their
// lines equals a single aggregator's over the same topic: each line once,
// though each owner correlated its partitions from their start. Summary
// entries and agent counts are taken, per partition, from the last
// instance that owned it when it stopped.
func TestAggregateGroupHandover(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	// Three waves of agents, in capture-time order (the captures were
	// taken one after the other), so that each wave follows what the
	// instances already correlated, as live traffic would.
	all := groupAgents(t)
	byHost := map[string]agentSpec{}
	for _, a := range all {
		byHost[a.host] = a
	}
	wave := func(hosts ...string) (out []agentSpec) {
		for _, h := range hosts {
			out = append(out, byHost[h])
		}
		return out
	}
	waves := [][]agentSpec{
		wave("altport-b0", "altport-b1", "altport-b2"),
		wave("g_sarama", "g_xbroker-b0", "g_xbroker-b1", "g_xbroker-b2", "h_commit_gap"),
		wave("h_offset_reset", "h_non_owner_fetch"),
	}
	// The sentinel's clock: before the first wave, between the waves
	// (minutes apart in the captures), after the last.
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	clocks := []time.Time{day.Add(11 * time.Hour), day.Add(11*time.Hour + 20*time.Minute),
		day.Add(11*time.Hour + 39*time.Minute + 30*time.Second), day.Add(73 * time.Hour)}
	sent := newSentinel(t, c.ListenAddrs(), "kwire")

	var live []*groupInstance
	deadline := time.After(90 * time.Second)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond) // hooks of instances that come and go
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-deadline:
				var st []string
				for _, in := range live {
					st = append(st, fmt.Sprintf("own %v route %v idle %d read %d", in.owned("own"), in.owned("route"), in.idles(), in.hook.Read()))
				}
				t.Fatalf("timed out waiting for %s: %s", what, strings.Join(st, "; "))
			}
		}
	}
	var started []*groupInstance
	var batches int64
	// settle waits until the routers read every batch published and every
	// live owner then found nothing new twice.
	settle := func(what string) {
		t.Helper()
		waitFor(what+": routers to read every batch", func() bool {
			var n int64
			for _, in := range started {
				n += in.hook.Read()
			}
			return n >= batches
		})
		before := make([]int, len(live))
		for i, in := range live {
			before[i] = in.idles()
		}
		waitFor(what+": owners to catch up", func() bool {
			for i, in := range live {
				if in.idles() < before[i]+2 {
					return false
				}
			}
			return true
		})
	}
	owning := func(in *groupInstance) bool { return len(in.owned("own")) > 0 && len(in.owned("route")) > 0 }
	split := func() bool {
		n := [2]int{}
		for _, in := range live {
			if !owning(in) {
				return false
			}
			n[0] += len(in.owned("own"))
			n[1] += len(in.owned("route"))
		}
		return n == [2]int{3, 3}
	}

	a := startGroupInstance(t, url)
	started, live = append(started, a), []*groupInstance{a}
	waitFor("the first instance to own every partition", split)
	batches += sent.at(t, clocks[0], false)
	batches += int64(publishAgents(t, url, waves[0]))
	settle("first wave")
	batches += sent.at(t, clocks[1], false)
	settle("first wave released")
	linesA := strings.Count(a.out.String(), "\n")

	b := startGroupInstance(t, url)
	started, live = append(started, b), []*groupInstance{a, b}
	waitFor("partitions to move to the second instance", split)
	settle("the second instance taking over")
	batches += int64(publishAgents(t, url, waves[1]))
	settle("second wave")
	batches += sent.at(t, clocks[2], false)
	settle("second wave released")

	a.cancel()
	<-a.done
	live = []*groupInstance{b}
	waitFor("the second instance to take every partition", split)
	settle("the second instance taking every partition")
	batches += int64(publishAgents(t, url, waves[2]))
	settle("third wave")
	batches += sent.at(t, clocks[3], true)
	settle("third wave released")
	b.cancel()
	<-b.done
	t.Logf("agents published %d batches; the first instance wrote %d lines alone", batches, linesA)

	// Stop order: a partition's summary entries and agents are the last
	// owner's.
	outs := [][]byte{a.out.Bytes(), b.out.Bytes()}
	for i, in := range started {
		if in.err != nil {
			t.Fatalf("instance %d: %v", i, in.err)
		}
		gi := groupInfoOf(t, outs[i])
		t.Logf("instance %d: owned %v at the end, %d groups; handovers %d (unclean %d), %d lines left out, %d uncertain, %d maybe duplicate, %d commit errors",
			i, gi.Owned, gi.Groups, gi.Handovers, gi.UncleanHandovers, gi.Suppressed, gi.Uncertain, gi.MaybeDuplicate, gi.CommitErrors)
		if gi.UncleanHandovers != 0 || gi.MaybeDuplicate != 0 || gi.Uncertain != 0 || gi.CommitErrors != 0 {
			t.Errorf("instance %d: clean handovers only were expected: %+v", i, gi)
		}
	}
	if gi := groupInfoOf(t, outs[1]); gi.Handovers == 0 || gi.Suppressed == 0 {
		t.Errorf("the second instance took nothing over from the first: %+v", gi)
	}

	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0")
	want, wantAgg := normalize(t, mergeSummaries(t, single))
	union, agents := unionByOwner(t, 3, outs)
	got, _ := normalize(t, mergeSummaries(t, union))
	compareLines(t, want, got)
	if !slices.Equal(want, got) {
		extra, missing := multisetDiff(want, got)
		t.Errorf("union has %d lines the single aggregator has not:\n%s\nand lacks %d:\n%s", len(extra), strings.Join(extra, "\n"), len(missing), strings.Join(missing, "\n"))
	}
	t.Logf("%d lines compared", len(want))
	if len(agents) != len(wantAgg.Agents) {
		t.Errorf("agents: union %d, single %d", len(agents), len(wantAgg.Agents))
	}
	for i := range min(len(agents), len(wantAgg.Agents)) {
		g, w := agents[i], wantAgg.Agents[i]
		if g.Agent != w.Agent || g.Batches != w.Batches || g.Missing != w.Missing || g.State != w.State {
			t.Errorf("agent %d: union %+v, single %+v", i, g, w)
		}
	}
}

// unionByOwner returns the union of the instances' outputs (in the order
// they stopped): every event and anomaly line of each, and one summary
// line per partition of the routed topic (parts of them), that of the
// last instance owning it when it stopped, filtered to what it owned
// there; and the agents of the aggregate lines, the last one's of each.
func unionByOwner(t *testing.T, parts int32, outs [][]byte) ([]byte, []aggregate.LineAgent) {
	t.Helper()
	var lines []string
	summaries := map[int32]string{}
	agents := map[string]aggregate.LineAgent{}
	for _, out := range outs {
		gi := groupInfoOf(t, out)
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			switch {
			case strings.Contains(l, `"type":"aggregate"`):
				var al aggregate.Line
				if err := json.Unmarshal([]byte(l), &al); err != nil {
					t.Fatal(err)
				}
				for _, a := range al.Agents {
					agents[a.Agent] = a
				}
			case strings.Contains(l, `"type":"summary"`):
				for _, q := range gi.Owned {
					var s correlate.Snapshot
					if err := json.Unmarshal([]byte(l), &s); err != nil {
						t.Fatal(err)
					}
					route.FilterSnapshot(&s, func(k string) bool { return route.Shard(k, parts) == q })
					var v map[string]any
					json.Unmarshal([]byte(l), &v)
					b, _ := json.Marshal(s)
					var fv map[string]any
					json.Unmarshal(b, &fv)
					for k, x := range fv {
						v[k] = x
					}
					b, _ = json.Marshal(v)
					summaries[q] = string(b)
				}
			default:
				lines = append(lines, l)
			}
		}
	}
	for q := range parts {
		if s, ok := summaries[q]; ok {
			lines = append(lines, s)
		}
	}
	var out []aggregate.LineAgent
	for _, a := range agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b aggregate.LineAgent) int { return strings.Compare(a.Agent, b.Agent) })
	return []byte(strings.Join(lines, "\n") + "\n"), out
}

// multisetDiff returns the lines of got beyond want's, and of want beyond
// got's.
func multisetDiff(want, got []string) (extra, missing []string) {
	n := map[string]int{}
	for _, l := range want {
		n[l]++
	}
	for _, l := range got {
		n[l]--
	}
	for l, c := range n {
		for ; c < 0; c++ {
			extra = append(extra, l)
		}
		for ; c > 0; c-- {
			missing = append(missing, l)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return extra, missing
}

// sentinel is an agent of a test that publishes only counters: while it
// is sending, the aggregators correlate nothing after its clock, so that
// agents published one after another are merged in capture-time order
// whatever the instances consumed meanwhile (an agent not yet heard from
// holds nothing back: docs/aggregate.md, "Catching up").
type sentinel struct {
	cl   *kgo.Client
	enc  *wire.Encoder
	seq  uint64
	sign *wire.Signer // nil: unsigned
}

func newSentinel(t *testing.T, brokers []string, topic string) *sentinel {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &sentinel{cl: cl, enc: wire.NewEncoder(wire.Agent{Host: "sentinel", Run: 1})}
}

// at moves its clock to at (final: it stops, holding nothing back) and
// returns the batches it published (1).
func (s *sentinel) at(t *testing.T, at time.Time, final bool) int64 {
	t.Helper()
	s.seq++
	s.enc.Reset(s.seq)
	s.enc.Counters(at, &wire.Counters{Final: final})
	r := &kgo.Record{Key: []byte("sentinel"), Value: slices.Clone(s.enc.Bytes())}
	if s.sign != nil {
		r.Value = s.sign.Sign(r.Value)
	}
	if err := s.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return 1
}

// twoGroups drives one client identity (client id tg-shared, one host)
// as members of two groups at once, tg-a and tg-b: kgo consumers with
// the same client id, heartbeating, fetching and committing for seconds.
// The correlator binds the client to both and calls its fetches
// ambiguous; each group's owner only agrees if it sees the client's
// requests to the other group all along, not only those before the
// client bound to its own.
func twoGroups(groups [2]string) gen.Scenario {
	return gen.Scenario{
		Name:    "two_groups",
		Options: gen.Options{Brokers: 1, Kfake: []kfake.Opt{kfake.SeedTopics(2, "tg-orders")}},
		Run: func(ctx context.Context, c *gen.Cluster) error {
			prod, err := c.Kgo(kgo.ClientID("tg-producer"), kgo.DefaultProduceTopic("tg-orders"))
			if err != nil {
				return err
			}
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); wg.Wait() }()
			member := func(group string) error {
				cl, err := c.Kgo(kgo.ClientID("tg-shared"), kgo.ConsumerGroup(group), kgo.ConsumeTopics("tg-orders"),
					kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
					kgo.AutoCommitInterval(300*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				if err != nil {
					return err
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer cl.Close() // leaves the group
					for ctx.Err() == nil {
						cl.PollFetches(ctx)
					}
				}()
				return nil
			}
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			start := time.Now()
			started := 0
			for time.Since(start) < 10*time.Second {
				if started < 2 && time.Since(start) >= time.Duration(started)*time.Second {
					if err := member(groups[started]); err != nil {
						return err
					}
					started++
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					return ctx.Err()
				}
				prod.Produce(ctx, &kgo.Record{Value: []byte("order")}, nil)
			}
			return prod.Flush(ctx)
		},
	}
}

// TestAggregateGroupOtherGroups: a client that is a member of two groups
// owned by different instances; the union equals the single aggregator
// only if the router sends the client's requests for one group to the
// other's owner too (docs/aggregate.md, "Several aggregators").
func TestAggregateGroupOtherGroups(t *testing.T) {
	var groups [2]string
	for i := 0; groups[1] == ""; i++ {
		g := fmt.Sprintf("tg-%c", 'a'+i)
		switch {
		case groups[0] == "":
			groups[0] = g
		case route.Shard(route.GroupKey(g), 3) != route.Shard(route.GroupKey(groups[0]), 3):
			groups[1] = g
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := gen.Run(ctx, twoGroups(groups), dir); err != nil {
		t.Fatal(err)
	}
	began := time.Now().Add(-time.Hour)

	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	ins := []*groupInstance{startGroupInstance(t, url)}
	deadline := time.After(60 * time.Second)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	owning := func() bool {
		n := 0
		for _, in := range ins {
			if len(in.owned("own")) == 0 || len(in.owned("route")) == 0 {
				return false
			}
			n += len(in.owned("own"))
		}
		return n == 3
	}
	waitFor("the first instance to own every partition", owning)
	ins = append(ins, startGroupInstance(t, url))
	waitFor("both instances to own partitions", owning)
	sent := newSentinel(t, c.ListenAddrs(), "kwire")
	batches := sent.at(t, began, false)
	batches += int64(publishAgents(t, url, []agentSpec{{host: "b0", files: []string{filepath.Join(dir, "two_groups.pcapng")}}}))
	batches += sent.at(t, began.Add(2*time.Hour), true)
	waitFor("the routers to read every batch", func() bool {
		return ins[0].hook.Read()+ins[1].hook.Read() >= batches
	})
	i0, i1 := ins[0].idles(), ins[1].idles()
	waitFor("the owners to catch up", func() bool { return ins[0].idles() >= i0+2 && ins[1].idles() >= i1+2 })
	for _, in := range ins {
		in.cancel()
		<-in.done
		if in.err != nil {
			t.Fatal(in.err)
		}
	}
	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0")
	want, _ := normalize(t, mergeSummaries(t, single))
	union, _ := unionByOwner(t, 3, [][]byte{ins[0].out.Bytes(), ins[1].out.Bytes()})
	got, _ := normalize(t, mergeSummaries(t, union))
	if extra, missing := multisetDiff(want, got); len(extra)+len(missing) > 0 {
		t.Errorf("union has %d lines the single aggregator has not:\n%s\nand lacks %d:\n%s", len(extra), strings.Join(extra, "\n"), len(missing), strings.Join(missing, "\n"))
	}
	var s correlate.Snapshot
	for _, l := range strings.Split(strings.TrimSpace(string(single)), "\n") {
		if strings.Contains(l, `"type":"summary"`) {
			json.Unmarshal([]byte(l), &s)
		}
	}
	for _, cl := range s.Clients {
		if cl.ClientID == "tg-shared" {
			t.Logf("tg-shared: %d bindings, attribution %q, candidates %v", len(cl.Bindings), cl.Attribution, cl.Candidates)
		}
	}
	t.Logf("groups %v; %d lines compared", groups, len(want))
}

// TestAggregateGroupKilled: an instance killed before committing what it
// wrote (it committed its claims, then none of its polls' records, and
// stopped without its last lines or a clean record): the instance that
// takes its partitions over writes those lines again, and counts them
// (handover_maybe_duplicate). The union is the single aggregator's plus
// lines written twice, no more of them than counted, none missing.
func TestAggregateGroupKilled(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	byHost := map[string]agentSpec{}
	for _, a := range groupAgents(t) {
		byHost[a.host] = a
	}
	deadline := time.After(60 * time.Second)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !ok() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	var batches int64
	settle := func(in *groupInstance, read func() int64) {
		t.Helper()
		waitFor("the routers to read every batch", func() bool { return read() >= batches })
		i := in.idles()
		waitFor("the owner to catch up", func() bool { return in.idles() >= i+2 })
	}
	all := func(in *groupInstance) func() bool {
		return func() bool { return len(in.owned("own")) == 3 && len(in.owned("route")) == 3 }
	}
	sent := newSentinel(t, c.ListenAddrs(), "kwire")

	a := startGroupInstance(t, url)
	a.hook.SkipPeriodic()
	waitFor("the first instance to own every partition", all(a))
	batches += sent.at(t, time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), false)
	batches += int64(publishAgents(t, url, []agentSpec{byHost["altport-b0"], byHost["altport-b1"], byHost["altport-b2"]}))
	batches += sent.at(t, time.Date(2026, 11, 29, 11, 20, 0, 0, time.UTC), false)
	settle(a, a.hook.Read)
	a.hook.Crash()
	a.cancel()
	<-a.done
	if a.err != nil {
		t.Fatal(a.err)
	}
	written := strings.Count(a.out.String(), "\n")
	if written == 0 || strings.Contains(a.out.String(), `"type":"summary"`) {
		t.Fatalf("the killed instance wrote %d lines (a summary: %v)", written, strings.Contains(a.out.String(), `"type":"summary"`))
	}

	b := startGroupInstance(t, url)
	waitFor("the second instance to take every partition", all(b))
	readAll := func() int64 { return a.hook.Read() + b.hook.Read() }
	batches += int64(publishAgents(t, url, []agentSpec{byHost["g_sarama"]}))
	batches += sent.at(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), true)
	settle(b, readAll)
	b.cancel()
	<-b.done
	if b.err != nil {
		t.Fatal(b.err)
	}
	gi := groupInfoOf(t, b.out.Bytes())
	t.Logf("killed instance wrote %d lines; the second: handovers %d (unclean %d), %d left out, %d maybe duplicate, %d uncertain",
		written, gi.Handovers, gi.UncleanHandovers, gi.Suppressed, gi.MaybeDuplicate, gi.Uncertain)

	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0")
	want, _ := normalize(t, mergeSummaries(t, single))
	union, _ := unionByOwner(t, 3, [][]byte{a.out.Bytes(), b.out.Bytes()})
	got, _ := normalize(t, mergeSummaries(t, union))
	extra, missing := multisetDiff(want, got)
	if len(missing) > 0 {
		t.Errorf("the union lacks %d lines of the single aggregator:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	if gi.UncleanHandovers == 0 || len(extra) == 0 || int64(len(extra)) > gi.MaybeDuplicate {
		t.Errorf("%d lines written twice, %d counted as maybe duplicate, %d unclean handovers", len(extra), gi.MaybeDuplicate, gi.UncleanHandovers)
	}
	t.Logf("%d lines compared, %d written twice", len(want), len(extra))
}
