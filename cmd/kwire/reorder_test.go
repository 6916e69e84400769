package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/internal/captest"
)

// TestReorderSame runs kwire read --json and analyze --json on every
// committed capture and on copies reordered as a loaded host, a
// multi-queue NIC or a SPAN port delivers them (captest.Reorder: in half
// the connections every FIN or RST before the last data segment of its
// direction and the handshake's last ACK after the first data; 5% of data
// segments swapped with the next of their direction; timestamps kept
// increasing), with several seeds: the story must be the same. Compared:
// every exchange, event and summary line, less what reordering may
// rightly change (reorderView): capture times and durations, the
// out_of_order counter, and which exchanges a hazard names as evidence.
// Gaps, resyncs and skipped bytes must not change at all.
//
// Seeds 1-3 run here; KWIRE_REORDER_SEEDS="N [FIRST]" runs N from FIRST+1.
func TestReorderSame(t *testing.T) {
	n, first := uint64(3), uint64(0)
	if s := os.Getenv("KWIRE_REORDER_SEEDS"); s != "" {
		fmt.Sscan(s, &n, &first)
	}
	var seeds []uint64
	for s := first + 1; s <= first+n; s++ {
		seeds = append(seeds, s)
	}
	dir := t.TempDir()
	for _, c := range captures(t) {
		for _, seed := range seeds {
			var files []string
			moved := 0
			for i, f := range c.files {
				r, err := captest.Reorder(readFile(t, f), nil, seed+uint64(i)*100)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				moved += r.ClosesMoved + r.EarlyData + r.Swapped
				p := filepath.Join(dir, fmt.Sprintf("%s.%d.%d.pcapng", c.name, seed, i))
				if err := os.WriteFile(p, r.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
			}
			for _, cmd := range []string{"read", "analyze"} {
				t.Run(fmt.Sprintf("%s/seed=%d/%s", c.name, seed, cmd), func(t *testing.T) {
					if moved == 0 {
						t.Fatal("the reorderer moved nothing")
					}
					want, wantErr := runOutput(append([]string{cmd, "--json"}, c.files...))
					got, gotErr := runOutput(append([]string{cmd, "--json"}, files...))
					if wantErr != gotErr {
						t.Errorf("stderr and exit: reordered %q, original %q", gotErr, wantErr)
					}
					w, g := reorderView(t, want), reorderView(t, got)
					if d := diffLines(w, g); d != "" {
						t.Errorf("reordered copy (%d packets moved) tells another story (-original +reordered):\n%s", moved, d)
					}
				})
			}
		}
	}
}

// reorderMay are the keys reordering may rightly change: times and
// durations measured between packets that moved, and the count of
// segments that came out of order.
var reorderMay = map[string]bool{
	"ts": true, "time": true, "out_of_order": true, "summary": true, "evidence": true,
	"duration_ms": true, "silent_ms": true, "max_heartbeat_gap_ms": true, "latency_us": true,
}

// reorderView returns the NDJSON lines of out, each without the keys
// reordering may change and without any value that is a time, sorted:
// lines of one timestamp may come in either order.
func reorderView(t *testing.T, out []byte) []string {
	t.Helper()
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var v any
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		b, err := json.Marshal(dropTimes(v))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	slices.Sort(lines)
	return lines
}

func dropTimes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); reorderMay[k] || (ok && isTime(s)) {
				delete(x, k)
				continue
			}
			x[k] = dropTimes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropTimes(e)
		}
	}
	return v
}

func isTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && strings.Contains(s, "T")
}

// diffLines lists the lines of a missing from b (-) and of b not in a (+),
// as multisets, the first few of each, cut short.
func diffLines(a, b []string) string {
	n := map[string]int{}
	for _, l := range a {
		n[l]++
	}
	for _, l := range b {
		n[l]--
	}
	var out []string
	for _, sign := range []struct {
		c    string
		from []string
		want int
	}{{"-", a, 1}, {"+", b, -1}} {
		shown := 0
		for _, l := range sign.from {
			if n[l]*sign.want <= 0 {
				continue
			}
			n[l] -= sign.want
			if shown++; shown <= 5 {
				out = append(out, sign.c+" "+l[:min(len(l), 600)])
			}
		}
		if shown > 5 {
			out = append(out, fmt.Sprintf("%s ... %d more", sign.c, shown-5))
		}
	}
	return strings.Join(out, "\n")
}
