package aggregate

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
)

func agentOf(i int) wire.Agent { return wire.Agent{Host: fmt.Sprintf("b%d", i), Run: 1} }

// FuzzAggregate feeds the aggregator what any writer to the agents' topic
// may write: the input is cut into records at each 0xff 0xfe pair (so that
// one input is several records, of several agents), each Added and then
// Released, and Finish ends it. Seeds: the batches three agents publish
// of g_xbroker (one per broker), and a 1970 agent's. Invariants: nothing
// panics (a panic inside is recovered and counted: a test failure here),
// Finish writes its summary and aggregate line, and the heap the run
// allocates stays bounded (no record is rebuilt beyond 1 MiB: --max-frame).
func FuzzAggregate(f *testing.F) {
	sep := []byte{0xff, 0xfe}
	for i, file := range []string{"g_xbroker.b0.pcapng", "g_xbroker.b1.pcapng", "g_xbroker.b2.pcapng"} {
		vs := agentBatches(f, file, agentOf(i), 0)
		for j := 0; j < len(vs); j += 3 {
			f.Add(bytes.Join(vs[j:min(j+3, len(vs))], sep))
		}
	}
	f.Add(bytes.Join(agentBatches(f, "g_xbroker.b0.pcapng", agentOf(9), -56*365*24*time.Hour)[:2], sep))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		ag := New(&Options{MaxLateness: time.Second, QuietAfter: time.Minute, ClockWindow: DefaultClockWindow, MaxFrame: 1 << 20,
			MaxAgents: 8, MaxRuns: 4, MaxConns: 16}, &out)
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		for i, rec := range bytes.Split(in, sep) {
			now = now.Add(time.Duration(i) * time.Second)
			ag.Add(rec, now)
			ag.Release(now, i%2 == 1)
		}
		if err := ag.Finish(); err != nil {
			t.Fatal(err)
		}
		if ag.m.caps.panics > 0 {
			t.Fatalf("%d panics recovered", ag.m.caps.panics)
		}
		if !bytes.Contains(out.Bytes(), []byte(`"type":"aggregate"`)) {
			t.Fatalf("no aggregate line:\n%s", out.Bytes())
		}
	})
}
