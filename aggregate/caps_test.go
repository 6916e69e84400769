package aggregate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/decode"
)

// TestAggregateCaps (issue 39): what writers to the topic make the
// aggregator remember is bounded, counted and said on stderr: agent runs
// (a flood of new ones), runs of one host (each new run made the restart
// check walk every run of its host: 100,000 runs cost 54 s of CPU), and
// connection ids.
func TestAggregateCaps(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	counters := func(ag wire.Agent, at time.Time) []byte {
		return batchOf(ag, 1, func(e *wire.Encoder) { e.Counters(at, &wire.Counters{}) })
	}
	tests := []struct {
		name   string
		opts   Options
		values func() [][]byte
		check  func(t *testing.T, m *merger)
		stderr string
	}{
		{name: "runs of one host", opts: Options{MaxRuns: 64},
			values: func() (vs [][]byte) {
				for i := range 100_000 {
					vs = append(vs, counters(wire.Agent{Host: "h", Run: uint64(i + 1)}, t0.Add(time.Duration(i)*time.Millisecond)))
				}
				return vs
			},
			check: func(t *testing.T, m *merger) {
				if n := len(m.cover.hosts["h"]); n > 64 {
					t.Errorf("%d runs of host h remembered, want at most 64", n)
				}
				if m.caps.evicted < 100_000-64 {
					t.Errorf("%d runs forgotten, want at least %d", m.caps.evicted, 100_000-64)
				}
				if n := m.newest["h"]; n == nil || n.restarted || n.agent.Run != 100_000 {
					t.Errorf("newest run of h: %+v, want run 100000, not restarted", n)
				}
			},
			stderr: "--max-runs 64 per host"},
		{name: "agents still sending", opts: Options{MaxAgents: 100},
			values: func() (vs [][]byte) {
				for i := range 1000 {
					vs = append(vs, counters(wire.Agent{Host: fmt.Sprintf("h%d", i), Run: 1}, t0))
				}
				return vs
			},
			check: func(t *testing.T, m *merger) {
				if n := len(m.agents); n > 100 {
					t.Errorf("%d agent runs remembered, want at most 100", n)
				}
				if m.caps.refused != 900 {
					t.Errorf("%d batches refused, want 900", m.caps.refused)
				}
			},
			stderr: "512 batches of new agent runs dropped"},
		{name: "connections", opts: Options{MaxConns: 1000},
			values: func() (vs [][]byte) {
				for i := range 10_000 {
					vs = append(vs, batchOf(wire.Agent{Host: "h", Run: 1}, uint64(i+1), func(e *wire.Encoder) {
						e.Anomaly(t0, &decode.Anomaly{Kind: decode.AnomalyGap, Conn: hostileConn(uint64(i)), Time: t0})
					}))
				}
				return vs
			},
			check: func(t *testing.T, m *merger) {
				if n := len(m.conns) + len(m.connsOld); n > 1000 {
					t.Errorf("%d connection ids remembered, want at most 1000", n)
				}
				if m.caps.connsForgotten < 8000 {
					t.Errorf("%d connection ids forgotten, want at least 8000", m.caps.connsForgotten)
				}
			},
			stderr: "connection ids forgotten, to stay within --max-conns 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			opts := tt.opts
			opts.MaxLateness, opts.QuietAfter, opts.ClockWindow, opts.Stderr = time.Second, time.Minute, DefaultClockWindow, &stderr
			start := time.Now()
			_, ag := runValues(t, &opts, tt.values())
			t.Logf("%v", time.Since(start))
			tt.check(t, ag.m)
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%.1000s", tt.stderr, stderr.String())
			}
		})
	}
}

// TestMergePanicRecovered: an item whose handling panics is counted as a
// corrupt batch and said on stderr, and the items after it still go
// (issue 39: one record crash-looped kwire aggregate).
func TestMergePanicRecovered(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	var got []int64
	m := newMerger(time.Second, time.Hour, func(it *wire.Item, _ *agentState) {
		if it.At.Equal(t0.Add(time.Second)) {
			var c *wire.Counters
			_ = c.Final // a nil dereference, as ConnOf's was
		}
		got = append(got, it.At.Sub(t0).Milliseconds())
	})
	var stderr bytes.Buffer
	m.caps.stderr = &stderr
	b := &wire.Batch{Agent: wire.Agent{Host: "h", Run: 1}, Seq: 1}
	for _, ms := range []int{0, 1000, 2000} {
		b.Items = append(b.Items, wire.Item{Kind: wire.KindCounters, At: t0.Add(time.Duration(ms) * time.Millisecond), Counters: &wire.Counters{}})
	}
	m.add(b, time.Now())
	m.release(time.Now(), releaseAll)
	if want := "[0 2000]"; fmt.Sprint(got) != want {
		t.Errorf("passed %v, want %s", got, want)
	}
	if m.corrupt != 1 || m.caps.panics != 1 {
		t.Errorf("%d corrupt, %d panics; want 1, 1", m.corrupt, m.caps.panics)
	}
	if !strings.Contains(stderr.String(), "batch 1 of agent h/1: panic: runtime error: invalid memory address") {
		t.Errorf("stderr: %q", stderr.String())
	}
}

// TestAggregateClockWindow: an agent whose clock reads 1970 no longer
// holds the others back (issue 39: no output at all, and the merge grew
// without bound): the honest agents' lines are written while it still
// sends, and its items are held back, never correlated.
func TestAggregateClockWindow(t *testing.T) {
	var honest [][][]byte
	for i := range 3 {
		honest = append(honest, agentBatches(t, fmt.Sprintf("g_xbroker.b%d.pcapng", i), agentOf(i), 0))
	}
	t0 := time.Date(2026, 11, 29, 11, 38, 58, 0, time.UTC)
	liar := agentBatches(t, "g_xbroker.b0.pcapng", wire.Agent{Host: "liar", Run: 1}, time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC).Sub(t0))
	liar = liar[:len(liar)-1] // never says it stopped
	var stderr, out bytes.Buffer
	ag := New(&Options{MaxLateness: 5 * time.Second, QuietAfter: time.Hour, ClockWindow: DefaultClockWindow, Stderr: &stderr}, &out)
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	for _, v := range interleave(honest[0], honest[1], honest[2], liar) {
		now = now.Add(time.Millisecond)
		ag.Add(v, now)
		ag.Release(now, false)
	}
	ag.Release(now, true) // caught up: the honest agents stopped
	before := strings.Count(out.String(), "\n")
	if before < 100 {
		t.Errorf("%d lines written while the 1970 agent sends, want the honest agents' (hundreds)", before)
	}
	if len(ag.m.pending) != 0 {
		t.Errorf("%d items wait in the merge", len(ag.m.pending))
	}
	if err := ag.Finish(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"ts":"1970-`) {
		t.Errorf("the 1970 agent's items were correlated")
	}
	if !strings.Contains(out.String(), `"state":"off_clock"`) || !strings.Contains(stderr.String(), "agent liar/1: its clock reads 1970-") {
		t.Errorf("the 1970 agent is not reported off clock:\n%s\n%s", aggLine(out.String()), stderr.String())
	}
	t.Logf("%d lines before the end; %d items held back", before, ag.m.clock.heldItems)
}
