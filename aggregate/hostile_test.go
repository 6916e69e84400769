package aggregate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// hostileConn is a connection of a hostile agent.
func hostileConn(id uint64) *capture.Conn {
	return &capture.Conn{ID: id, Client: netip.MustParseAddrPort("10.9.0.2:40000"), Server: netip.MustParseAddrPort("10.9.0.1:9092")}
}

// batchOf encodes one batch of agent ag with what add adds.
func batchOf(ag wire.Agent, seq uint64, add func(e *wire.Encoder)) []byte {
	e := wire.NewEncoder(ag)
	e.Reset(seq)
	add(e)
	return bytes.Clone(e.Bytes())
}

// fetchBomb is a Fetch exchange whose response's record bytes are size
// bytes that are no batch (published as their size and first bytes), in a
// response frame said to be respSize bytes.
func fetchBomb(size, respSize int) *decode.Exchange {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = make([]byte, size) // zeros, never touched: no memory
	resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{p}}}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	return &decode.Exchange{Conn: hostileConn(1), Key: 1, Version: 12, Req: req, Resp: resp, RespSize: respSize, Response: decode.ResponseSeen}
}

// withoutAggregateLine drops the aggregate line (its agents and counters
// are what differ) from an aggregator's output.
func withoutAggregateLine(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.Contains(l, `"type":"aggregate"`) {
			continue
		}
		// Connection ids are given in order of arrival: the hostile
		// agents' connections take some.
		var v any
		if err := json.Unmarshal([]byte(l), &v); err == nil {
			WithoutConnIDs(v)
			b, _ := json.Marshal(v)
			l = string(b)
		}
		ls = append(ls, l)
	}
	return ls
}

// aggLine returns the aggregate line of an aggregator's output.
func aggLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"type":"aggregate"`) {
			return l
		}
	}
	return ""
}

// TestAggregateHostileAgents (issue 39): three honest agents (g_xbroker,
// one per broker) and, on the same topic, agents that lie: one whose
// clock reads 1970 and one whose clock reads 2099 (each republishing a
// broker's capture at that time), records with an anomaly of no
// connection, Fetch responses whose record bytes claim 256 MiB in a frame
// of 1000 bytes (a 61-byte raw segment each), and 100,000 agent runs of
// one counters batch each. The aggregator does not stall, panic or grow
// beyond 200 MB of heap, and its output but for the aggregate line is
// byte for byte the honest agents' alone.
func TestAggregateHostileAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 agents: a few seconds")
	}
	var honest [][][]byte
	for i := range 3 {
		f := fmt.Sprintf("g_xbroker.b%d.pcapng", i)
		honest = append(honest, agentBatches(t, f, wire.Agent{Host: fmt.Sprintf("b%d", i), Run: 1}, 0))
	}
	opts := func(stderr *bytes.Buffer) *Options {
		return &Options{MaxLateness: 5 * time.Second, QuietAfter: 30 * time.Second, ClockWindow: DefaultClockWindow, Stderr: stderr}
	}
	var stderr bytes.Buffer
	want, _ := runValues(t, opts(&stderr), interleave(honest...))

	past := time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC)
	t0 := time.Date(2026, 11, 29, 11, 38, 58, 0, time.UTC) // g_xbroker's start
	lies := [][][]byte{
		agentBatches(t, "g_xbroker.b0.pcapng", wire.Agent{Host: "liar-1970", Run: 1}, past.Sub(t0)),
		agentBatches(t, "g_xbroker.b1.pcapng", wire.Agent{Host: "liar-2099", Run: 1}, 73*365*24*time.Hour),
	}
	var bombs, noConn, fakes [][]byte
	bomb := fetchBomb(256<<20, 1000)
	for i := range 24 {
		bombs = append(bombs, batchOf(wire.Agent{Host: "bomb", Run: 1}, uint64(i+1), func(e *wire.Encoder) {
			e.Exchange(t0.Add(time.Second), bomb)
		}))
		noConn = append(noConn, batchOf(wire.Agent{Host: "noconn", Run: 1}, uint64(i+1), func(e *wire.Encoder) {
			e.Anomaly(t0.Add(time.Second), &decode.Anomaly{Kind: decode.AnomalyGap, Time: t0})
		}))
	}
	t.Logf("a bomb is %d bytes, a record without a connection %d", len(bombs[0]), len(noConn[0]))
	for i := range 100_000 {
		fakes = append(fakes, batchOf(wire.Agent{Host: fmt.Sprintf("fake%d", i), Run: uint64(i)}, 1, func(e *wire.Encoder) {
			e.Counters(t0.Add(time.Second), &wire.Counters{})
		}))
	}
	// The honest agents' first batches come first (they were running),
	// then everything, one record of each source in turn.
	values := interleave(honest[0][:2], honest[1][:2], honest[2][:2])
	values = append(values, interleave(honest[0][2:], honest[1][2:], honest[2][2:], lies[0], lies[1], bombs, noConn, fakes)...)

	bomb = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	var out bytes.Buffer
	stderr.Reset()
	ag := New(opts(&stderr), &out)
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	for i, v := range values {
		now = now.Add(time.Millisecond)
		ag.Add(v, now)
		if i%100 == 0 {
			ag.Release(now, false)
		}
		if i%10000 == 0 {
			runtime.GC() // what is live, not what waits to be swept
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapAlloc)
	if err := ag.Finish(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records; heap %.1f MB at the start, peak %.1f MB; %d allocated in all", len(values), float64(base)/1e6, float64(peak)/1e6, ms.TotalAlloc)
	if peak-base > 200<<20 {
		t.Errorf("heap grew by %.1f MB, want < 200 MB", float64(peak-base)/1e6)
	}
	got := out.String()
	if diff := lineDiff(withoutAggregateLine(want), withoutAggregateLine(got)); diff != "" {
		t.Errorf("output for the honest agents changed (-honest only +with hostile agents):\n%s", diff)
	}
	line := aggLine(got)
	t.Logf("aggregate line: %.600s", line)
	for _, want := range []string{`"corrupt_batches":48`, `"agent_batches_refused":`} {
		if !strings.Contains(line, want) {
			t.Errorf("aggregate line lacks %s", want)
		}
	}
	if ag.m.clock.heldItems == 0 || ag.m.clock.dropped != ag.m.clock.heldItems {
		t.Errorf("%d items held back for their clock, %d of them dropped; want the liars' items, all", ag.m.clock.heldItems, ag.m.clock.dropped)
	}
	if n := len(ag.m.agents); n > DefaultMaxAgents {
		t.Errorf("%d agent runs remembered, want at most %d", n, DefaultMaxAgents)
	}
	for _, want := range []string{"agent liar-1970/1: its clock reads 1970-", "agent liar-2099/1: its clock reads 2099-", "--max-agents"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%.2000s", want, stderr.String())
		}
	}
}

// lineDiff shows the lines of want missing from got (-) and those of got
// not in want (+), "" when they are the same.
func lineDiff(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	var b strings.Builder
	in := func(ls []string) map[string]int {
		m := map[string]int{}
		for _, l := range ls {
			m[l]++
		}
		return m
	}
	w, g := in(want), in(got)
	for _, l := range want {
		if g[l] == 0 {
			fmt.Fprintf(&b, "-%.300s\n", l)
		} else {
			g[l]--
		}
	}
	for _, l := range got {
		if w[l] == 0 {
			fmt.Fprintf(&b, "+%.300s\n", l)
		} else {
			w[l]--
		}
	}
	if b.Len() == 0 {
		return "(the same lines in another order)"
	}
	return b.String()
}

// TestGroupKeepsNoRecords: a --group owner keeps a routed Fetch exchange
// in its merge without its record bytes (issue 39: a 61-byte record made
// it rebuild and keep 256 MiB of zeros until it was correlated), and a
// router re-encodes the segments as read, rebuilding none.
func TestGroupKeepsNoRecords(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	ag := wire.Agent{Host: "h", Run: 1}
	bomb := fetchBomb(64<<20, 64<<20+100) // within both bounds
	v := batchOf(ag, 1, func(e *wire.Encoder) { e.Exchange(t0, bomb) })
	bomb = nil
	opts := &Options{MaxLateness: time.Second, QuietAfter: time.Minute}
	g := &groupAgg{}
	g.forget()
	g.ag = New(opts, &bytes.Buffer{})
	g.ag.m = opts.merger(g.item)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.TotalAlloc
	r := newRouter(1)
	b, err := wire.Decode(v, opts.decodeOptions())
	if err != nil {
		t.Fatal(err)
	}
	out := r.route(b, 0, 0)
	if len(out[0].Items) != 1 {
		t.Fatalf("routed %+v, want the exchange", out[0])
	}
	rt, err := wire.DecodeRouted(wire.AppendRouted(nil, out[0]))
	if err != nil {
		t.Fatal(err)
	}
	g.add(0, nil, rt, time.Now())
	runtime.ReadMemStats(&ms)
	if got := ms.TotalAlloc - base; got > 8<<20 {
		t.Errorf("routing and merging one exchange of 64 MiB of records allocated %.1f MB, want < 8", float64(got)/1e6)
	}
	if len(g.ag.m.pending) != 1 {
		t.Fatalf("%d items pending, want 1", len(g.ag.m.pending))
	}
	// Rebuilt when correlated, as by the single aggregator: the same size.
	p := g.ag.m.pending[0]
	buf := p.it.ExpandRecords(nil)
	if len(buf) != 64<<20 {
		t.Errorf("records rebuilt to %d bytes, want %d", len(buf), 64<<20)
	}
}
