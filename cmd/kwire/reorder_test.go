package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	testReordered(t, &captest.DefaultReorder, func(cmd string) func(*testing.T, []byte) []string {
		return reorderView
	})
}

// TestReorderCross is TestReorderSame with the two directions of every
// connection on paths of their own, as a tap with one feed per direction,
// a SPAN port or a cloud traffic mirror delivers them (captest.CrossReorder:
// the clients' or the brokers' packets, picked by the seed, up to 5 ms
// late, on top of TestReorderSame's disorder): SYN-ACKs come before their
// SYN, segments after their acknowledgement, and, with the clients late,
// requests after their responses. Nothing may be lost: the same gaps,
// skipped bytes and unmatched responses as the original (none where it
// has none), the same exchanges and anomalies (read), the same stats and
// the same warn hazards by kind and group (analyze). Which exchange or
// member an event names, and info hazards, may differ: exchanges on
// different connections that complete within the skew of each other are
// processed in the order their last byte was captured, which the skew
// changes.
//
// KWIRE_REORDER_SKEW (a duration) and KWIRE_REORDER_LATE (clients or
// brokers) change the disorder.
func TestReorderCross(t *testing.T) {
	opts := captest.CrossReorder
	if s := os.Getenv("KWIRE_REORDER_SKEW"); s != "" {
		var err error
		if opts.Skew, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	if s := os.Getenv("KWIRE_REORDER_LATE"); s != "" {
		opts.Late = map[string]captest.Feed{"clients": captest.FeedClients, "brokers": captest.FeedBrokers}[s]
	}
	testReordered(t, &opts, func(cmd string) func(*testing.T, []byte) []string {
		if cmd == "read" {
			return typesView("exchange", "anomaly", "stats")
		}
		return storyView
	})
}

// storyView is what a reordered copy across directions must tell as the
// original does (typesView's warn hazards and stats), and of the summary,
// each group's story: its type, state and generation; each generation's
// members and assignments; each member's status; each partition's owner,
// committed offset, end offset and lag. Left out: what rests on which of
// two exchanges on different connections within the skew of each other
// came first (which member a generation's cause names, on which
// connection a binding was learned, a Fetch near a rebalance attributed
// to one member or the next, info hazards) and durations measured across
// the feeds; the tap stamps each packet when it comes, so that order is
// not on the wire to restore.
func storyView(t *testing.T, out []byte) []string {
	lines := typesView("hazard", "stats")(t, out)
	for _, l := range bytes.Split(out, []byte("\n")) {
		var s struct {
			Type   string `json:"type"`
			Groups []struct {
				Group       string `json:"group"`
				GroupType   string `json:"group_type"`
				State       string `json:"state"`
				Generation  int32  `json:"generation"`
				Generations []struct {
					Generation int32 `json:"generation"`
					Members    []struct {
						MemberID   string           `json:"member_id"`
						Assignment map[string][]int `json:"assignment"`
					} `json:"members"`
				} `json:"generations"`
				Members []struct {
					MemberID string `json:"member_id"`
					Status   string `json:"status"`
				} `json:"members"`
				Partitions []struct {
					Topic     string `json:"topic"`
					Partition int32  `json:"partition"`
					Owner     string `json:"owner"`
					Committed *int64 `json:"committed"`
					EndOffset *int64 `json:"end_offset"`
					Lag       *int64 `json:"lag"`
				} `json:"partitions"`
			} `json:"groups"`
		}
		if json.Unmarshal(l, &s) != nil || s.Type != "summary" {
			continue
		}
		for _, g := range s.Groups {
			b, _ := json.Marshal(g)
			lines = append(lines, "group "+string(b))
		}
	}
	slices.Sort(lines)
	return lines
}

// testReordered runs read and analyze on every capture and on its copies
// reordered with opts, and compares what view, by command, keeps of them.
func testReordered(t *testing.T, opts *captest.ReorderOptions, view func(cmd string) func(*testing.T, []byte) []string) {
	n, first := uint64(3), uint64(0)
	if s := os.Getenv("KWIRE_REORDER_SEEDS"); s != "" {
		fmt.Sscan(s, &n, &first)
	}
	var seeds []uint64
	for s := first + 1; s <= first+n; s++ {
		seeds = append(seeds, s)
	}
	dir := t.TempDir()
	cases := captures(t)
	if opts.Skew > 0 {
		cases = append(cases, realCaptures(t)...)
	}
	for _, c := range cases {
		for _, seed := range seeds {
			var files []string
			moved, crossed := 0, 0
			for i, f := range c.files {
				r, err := captest.Reorder(readFile(t, f), opts, seed+uint64(i)*100)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				moved += r.ClosesMoved + r.EarlyData + r.Swapped + r.Crossed
				crossed += r.Crossed
				p := filepath.Join(dir, fmt.Sprintf("%s.%d.%d.pcapng", strings.ReplaceAll(c.name, "/", "_"), seed, i))
				if err := os.WriteFile(p, r.Data, 0o600); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
			}
			for _, cmd := range []string{"read", "analyze"} {
				t.Run(fmt.Sprintf("%s/seed=%d/%s", c.name, seed, cmd), func(t *testing.T) {
					if moved == 0 || opts.Skew > 0 && crossed == 0 {
						t.Fatalf("the reorderer moved %d packets, %d across directions", moved, crossed)
					}
					want, wantErr := runOutput(append(append([]string{cmd, "--json"}, c.args...), c.files...))
					got, gotErr := runOutput(append(append([]string{cmd, "--json"}, c.args...), files...))
					if wantErr != gotErr {
						t.Errorf("stderr and exit: reordered %q, original %q", gotErr, wantErr)
					}
					if w, g := lossCounts(t, want), lossCounts(t, got); w != g {
						t.Errorf("reordered copy (%d packets moved, %d across directions) lost more: %+v, original %+v", moved, crossed, g, w)
					}
					v := view(cmd)
					if d := diffLines(v(t, want), v(t, got)); d != "" {
						t.Errorf("reordered copy (%d packets moved, %d across directions) tells another story (-original +reordered):\n%s", moved, crossed, d)
					}
				})
			}
		}
	}
}

// typesView returns a view of NDJSON output that keeps reorderView's
// lines of the given types, a hazard only by kind, severity and group,
// and only if it warns: info hazards such as offset_reset are drawn from
// the order of exchanges on different connections.
func typesView(types ...string) func(*testing.T, []byte) []string {
	return func(t *testing.T, out []byte) []string {
		var lines []string
		for _, l := range reorderView(t, out) {
			var v map[string]any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(types, v["type"].(string)) {
				continue
			}
			if v["type"] == "hazard" {
				if v["severity"] == "info" {
					continue
				}
				b, _ := json.Marshal(map[string]any{"kind": v["kind"], "severity": v["severity"], "group": v["group"]})
				l = string(b)
			}
			lines = append(lines, l)
		}
		slices.Sort(lines)
		return lines
	}
}

// losses are the counters of the stats line that say bytes or exchanges
// were lost.
type losses struct {
	CaptureGaps  int64
	DecodeGaps   int64
	SkippedBytes int64
	Unmatched    int64
}

// lossCounts returns the losses of the stats line of out.
func lossCounts(t *testing.T, out []byte) losses {
	t.Helper()
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var v struct {
			Type    string
			Capture struct{ Gaps int64 }
			Decode  struct {
				Gaps               int64
				SkippedBytes       int64 `json:"skipped_bytes"`
				UnmatchedResponses int64 `json:"unmatched_responses"`
			}
		}
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if v.Type == "stats" {
			return losses{v.Capture.Gaps, v.Decode.Gaps, v.Decode.SkippedBytes, v.Decode.UnmatchedResponses}
		}
	}
	t.Fatal("no stats line")
	return losses{}
}

// reorderMay are the keys reordering may rightly change: times and
// durations measured between packets that moved, and the count of
// segments that came out of order.
var reorderMay = map[string]bool{
	"ts": true, "ts_ms": true, "time": true, "out_of_order": true, "summary": true, "evidence": true,
	"duration_ms": true, "silent_ms": true, "max_heartbeat_gap_ms": true, "latency_us": true,
	// Measured between a request and a response, or between two
	// requests: a feed that runs late shifts one end.
	"lead_ms": true, "heartbeat_gap_ms": true,
	// Measured against the capture's last time (lag_seconds, rounded to
	// the millisecond) or over a window ending there (health): packets
	// changing places change that time by microseconds (h_txn_offsets_
	// aborted: 0.204 s against 0.203 s), as they change durations.
	"lag_seconds": true, "lag_seconds_estimated": true, "timestamp_type": true, "health": true,
	// A hazard's range_id is its first hazard's id (below).
	"range_id": true,
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
		if _, ok := x["severity"]; ok {
			// A hazard's id is a hash of its time and summary among
			// others (its other fields, and the offsets of its range,
			// stay); a connection's id is no hazard's.
			delete(x, "id")
		}
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

// realCaptures are the captures of real Apache Kafka in testdata/real, with
// their brokers' ports (kwire analyze --port) from their truth.
func realCaptures(t *testing.T) []goldenCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir(), "real", "*.pcapng"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in testdata/real (%v)", err)
	}
	var cases []goldenCase
	for _, f := range files {
		var tr struct {
			Ports []int `json:"ports"`
		}
		if err := json.Unmarshal(readFile(t, strings.TrimSuffix(f, ".pcapng")+".truth.json"), &tr); err != nil || len(tr.Ports) == 0 {
			t.Fatalf("%s: no ports in its truth (%v)", f, err)
		}
		ports := make([]string, len(tr.Ports))
		for i, p := range tr.Ports {
			ports[i] = strconv.Itoa(p)
		}
		name := "real/" + strings.TrimSuffix(filepath.Base(f), ".pcapng")
		cases = append(cases, goldenCase{name: name, files: []string{f}, args: []string{"--port", strings.Join(ports, ",")}})
	}
	return cases
}
