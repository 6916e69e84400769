package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/aggregate"
)

// TestAggregateGroupExitIdle: two kwire aggregate --group --exit-idle
// instances over a topic whose agents all stop each exit by themselves,
// within seconds of the last agent's final counters, and their lines
// together (summaries and agents per partition from the last owner, as
// when one of them leaves first) equal the single aggregator's over the
// same topic. (Before, the router stage ran until interrupted: an
// instance whose owner stage was idle never returned.)
func TestAggregateGroupExitIdle(t *testing.T) {
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
	sent := newSentinel(t, c.ListenAddrs(), "kwire")
	sent.at(t, time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC), false)

	type instance struct {
		hook *aggregate.Hook
		out  strings.Builder
		err  error
		done chan struct{}
		at   time.Time // when it returned
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ins []*instance
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
		var f aggregateFlags
		fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--json", "--from", url, "--group", "agg", "--quiet-after", "10m", "--exit-idle", idle.String()}); err != nil {
			t.Fatal(err)
		}
		in := &instance{hook: aggregate.NewHook(), done: make(chan struct{})}
		f.hook = in.hook
		ins = append(ins, in)
		go func() {
			defer close(in.done)
			in.err = runAggregate(ctx, &f, &in.out, io.Discard)
			in.at = time.Now()
		}()
		waitFor(fmt.Sprintf("instance %d to own partitions", i), func() bool {
			return len(in.hook.Owned("own")) > 0 && len(in.hook.Owned("route")) > 0
		})
	}
	waitFor("both instances to own partitions", func() bool {
		return len(ins[0].hook.Owned("own")) > 0 && len(ins[1].hook.Owned("own")) > 0
	})

	publishAgents(t, url, groupAgents(t))
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
	slices.SortFunc(ins, func(a, b *instance) int { return a.at.Compare(b.at) })
	var outs [][]byte
	for _, in := range ins {
		out := []byte(in.out.String())
		gi := groupInfoOf(t, out)
		if gi.Groups == 0 && len(ins) > 1 && gi.Handovers == 0 {
			t.Logf("an instance wrote no group: %+v", gi)
		}
		outs = append(outs, out)
	}
	single := runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s")
	want, wantAgg := normalize(t, mergeSummaries(t, single))
	union, agents := unionByOwner(t, 3, outs)
	got, _ := normalize(t, mergeSummaries(t, union))
	compareLines(t, want, got)
	if extra, missing := multisetDiff(want, got); len(extra)+len(missing) > 0 {
		t.Errorf("union has %d lines the single aggregator has not:\n%s\nand lacks %d:\n%s", len(extra), strings.Join(extra, "\n"), len(missing), strings.Join(missing, "\n"))
	}
	if len(agents) != len(wantAgg.Agents) {
		t.Errorf("agents: union %d, single %d", len(agents), len(wantAgg.Agents))
	}
	for i := range min(len(agents), len(wantAgg.Agents)) {
		g, w := agents[i], wantAgg.Agents[i]
		if g.Agent != w.Agent || g.Batches != w.Batches || g.Missing != w.Missing || g.State != w.State {
			t.Errorf("agent %d: union %+v, single %+v", i, g, w)
		}
	}
	t.Logf("%d lines compared", len(want))
}
