package aggregate

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
)

// TestMergeWatermark: two agents' items come out in capture-time order,
// each once, only when the watermark (or catching up, or the end) has
// passed them; duplicates and holes are counted per agent, and an agent
// that stopped no longer holds the others back.
func TestMergeWatermark(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a, b := wire.Agent{Host: "b1", Run: 1}, wire.Agent{Host: "b2", Run: 1}
	batch := func(ag wire.Agent, seq uint64, final bool, ms ...int) *wire.Batch {
		bt := &wire.Batch{Agent: ag, Seq: seq}
		for i, x := range ms {
			bt.Items = append(bt.Items, wire.Item{Kind: wire.KindCounters, At: at(x), Counters: &wire.Counters{Final: final && i == len(ms)-1}})
		}
		return bt
	}
	var got []string
	m := newMerger(time.Second, time.Hour, func(it *wire.Item, as *agentState) {
		got = append(got, fmt.Sprintf("%s@%d", as.agent.Host, it.At.Sub(t0).Milliseconds()))
	})
	now := time.Now()
	steps := []struct {
		name  string
		add   []*wire.Batch
		mode  int
		want  []string
		dups  int64
		final bool // the merger no longer waits for any agent
	}{
		{name: "within lateness", add: []*wire.Batch{batch(a, 1, false, 0, 1000), batch(b, 1, false, 500)}, mode: releaseWatermark},
		{name: "watermark passes", add: []*wire.Batch{batch(a, 3, false, 3000), batch(b, 2, false, 2500)}, mode: releaseWatermark,
			want: []string{"b1@0", "b2@500", "b1@1000"}},
		{name: "duplicate", add: []*wire.Batch{batch(a, 1, false, 0, 1000)}, mode: releaseWatermark, dups: 1},
		{name: "caught up", mode: releaseCaughtUp, want: []string{"b2@2500"}, dups: 1},
		{name: "stopped", add: []*wire.Batch{batch(a, 4, true, 3500), batch(b, 3, true, 4000)}, mode: releaseWatermark, dups: 1, final: true},
		{name: "end", mode: releaseAll, want: []string{"b1@3000", "b1@3500", "b2@4000"}, dups: 1, final: true},
	}
	for _, s := range steps {
		got = nil
		for _, bt := range s.add {
			m.add(bt, now)
		}
		m.release(now, s.mode)
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: released %v, want %v", s.name, got, s.want)
		}
		if m.duplicates != s.dups {
			t.Errorf("%s: %d duplicates, want %d", s.name, m.duplicates, s.dups)
		}
		if m.sending(now) == s.final {
			t.Errorf("%s: sending %v, want %v", s.name, !s.final, !s.final)
		}
	}
	if got, want := m.agents[a].missing(), uint64(1); got != want {
		t.Errorf("agent a: %d batches missing, want %d", got, want)
	}
	if got := m.agents[b].missing(); got != 0 {
		t.Errorf("agent b: %d batches missing, want 0", got)
	}
	if !m.end.Equal(at(4000)) || m.late != 0 {
		t.Errorf("end %v, %d late; want %v, 0", m.end, m.late, at(4000))
	}
}
