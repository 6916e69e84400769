package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/internal/captest"
)

// lagTruth is h_lag's truth: per group, the state its consumer was
// driven into and the timestamps of the records at its committed offsets.
type lagTruth struct {
	Committed map[string]map[string]map[string]int64 `json:"committed"`
	Lag       map[string]struct {
		State       string                      `json:"state"`
		Evidence    string                      `json:"evidence"`
		RecordTimes map[string]map[string]int64 `json:"record_times"`
	} `json:"lag"`
}

// lagSummary is what a summary says of each group partition's lag.
type lagSummary struct {
	Time   time.Time `json:"time"`
	Groups []struct {
		Group      string   `json:"group"`
		LagSeconds *float64 `json:"lag_seconds"`
		Partitions []struct {
			Topic      string   `json:"topic"`
			Partition  int32    `json:"partition"`
			Committed  *int64   `json:"committed"`
			EndOffset  *int64   `json:"end_offset"`
			Lag        *int64   `json:"lag"`
			LagSeconds *float64 `json:"lag_seconds"`
			Estimated  bool     `json:"lag_seconds_estimated"`
			TSType     string   `json:"timestamp_type"`
		} `json:"partitions"`
	} `json:"groups"`
}

// TestLagSeconds is issue 41's lag in seconds on h_lag: a producer writes
// every 100 ms and five groups are driven behind by known, growing times
// (the truth keeps the timestamp of the record at each committed offset).
// Where the batch holding the committed offset was on the wire the
// figure is within 100 ms of the truth; on a copy cut to the capture's
// later part, where the batches at the stopped groups' offsets are not,
// it is estimated from the offsets and times seen, marked so, and within
// 10%. A group that keeps up has lag 0 and lag_seconds 0; a group's
// lag_seconds is its largest partition's.
func TestLagSeconds(t *testing.T) {
	var tr lagTruth
	if err := json.Unmarshal(readFile(t, filepath.Join(testdataDir(), "h_lag.truth.json")), &tr); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(testdataDir(), "h_lag.pcapng")
	late, err := captest.Window(readFile(t, src), 0.8, 1)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "h_lag.late.pcapng")
	if err := os.WriteFile(cut, late, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		file      string
		estimated int // at least this many partitions estimated
	}{{"whole", src, 0}, {"started late", cut, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs := runOutput([]string{"analyze", "--json", tc.file})
			var s lagSummary
			summaryLine(t, out, &s)
			estimated, behind, unknown := 0, 0, 0
			for _, g := range s.Groups {
				lt, ok := tr.Lag[g.Group]
				if !ok {
					continue
				}
				most := -1.0
				for _, p := range g.Partitions {
					id := g.Group + " " + p.Topic + "/" + strconv.Itoa(int(p.Partition))
					if tc.estimated > 0 && p.LagSeconds == nil && p.Lag != nil && *p.Lag > 0 {
						// Started late, past the Metadata that names the
						// topic ids of kgo's Fetches: no batch and no end of
						// these partitions is known but the last ListOffsets:
						// unknown, not a guess.
						unknown++
						continue
					}
					if p.LagSeconds == nil || p.Lag == nil || p.Committed == nil {
						t.Errorf("%s: lag %v, lag_seconds %v, committed %v (%s)", id, p.Lag, p.LagSeconds, p.Committed, errs)
						continue
					}
					most = max(most, *p.LagSeconds)
					if want := tr.Committed[g.Group][p.Topic][strconv.Itoa(int(p.Partition))]; *p.Committed != want {
						t.Errorf("%s: committed %d, truth %d", id, *p.Committed, want)
					}
					ms, ok := lt.RecordTimes[p.Topic][strconv.Itoa(int(p.Partition))]
					if !ok { // caught up
						if *p.Lag != 0 || *p.LagSeconds != 0 {
							t.Errorf("%s: caught up by the truth, lag %d, lag_seconds %v", id, *p.Lag, *p.LagSeconds)
						}
						continue
					}
					want := s.Time.Sub(time.UnixMilli(ms)).Seconds()
					behind++
					tol := 0.1
					if p.Estimated {
						estimated++
						tol = 0.1 * want
					} else if tc.estimated == 0 && p.TSType != "create_time" {
						t.Errorf("%s: timestamp_type %q, want create_time (kgo's records)", id, p.TSType)
					}
					t.Logf("%s: lag %d, lag_seconds %.3f (estimated %v), truth %.3f", id, *p.Lag, *p.LagSeconds, p.Estimated, want)
					if d := math.Abs(*p.LagSeconds - want); d > tol {
						t.Errorf("%s: lag_seconds %.3f (estimated %v), truth %.3f: off by %.3fs, more than %.3fs", id, *p.LagSeconds, p.Estimated, want, d, tol)
					}
				}
				if most < 0 && g.LagSeconds == nil { // all unknown (started late)
					continue
				}
				if g.LagSeconds == nil || *g.LagSeconds != most {
					t.Errorf("group %s: lag_seconds %v, its partitions' largest %v", g.Group, g.LagSeconds, most)
				}
			}
			t.Logf("%d partitions behind, %d estimated, %d unknown", behind, estimated, unknown)
			if behind+unknown < 12 || unknown > 6 {
				t.Errorf("%d partitions behind and %d unknown, want h_lag's 12 (4 groups of 3), at most 6 unknown", behind, unknown)
			}
			if tc.estimated == 0 && estimated > 0 || estimated < tc.estimated {
				t.Errorf("%d partitions estimated, want %d", estimated, tc.estimated)
			}
		})
	}
}

// TestConsumerHealth is issue 41's consumer health on h_lag, judged over
// the last 4 s (--health-window): each group is in the state its consumer
// was driven into, and says what the wire shows behind it; the group that
// keeps up is ok, with no warn or critical hazard.
func TestConsumerHealth(t *testing.T) {
	var tr lagTruth
	if err := json.Unmarshal(readFile(t, filepath.Join(testdataDir(), "h_lag.truth.json")), &tr); err != nil {
		t.Fatal(err)
	}
	evidence := map[string]string{ // the truth's evidence -> what kwire's says
		"commits move, lag grows":      "the lag grew",
		"fetches answered, no commits": "fetches answered, no commits",
		"heartbeats, no fetches":       "heartbeats, no fetches",
		"commits the same offset":      "all of offset",
	}
	out, errs := runOutput([]string{"analyze", "--json", "--health-window", "4s", filepath.Join(testdataDir(), "h_lag.pcapng")})
	var s struct {
		Groups []struct {
			Group  string `json:"group"`
			Health *struct {
				State    string `json:"state"`
				Evidence string `json:"evidence"`
			} `json:"health"`
			Hazards []struct {
				Kind     string `json:"kind"`
				Severity string `json:"severity"`
			} `json:"hazards"`
		} `json:"groups"`
	}
	summaryLine(t, out, &s)
	seen := 0
	for _, g := range s.Groups {
		lt, ok := tr.Lag[g.Group]
		if !ok {
			continue
		}
		seen++
		if g.Health == nil {
			t.Errorf("%s: no health (%s)", g.Group, errs)
			continue
		}
		t.Logf("%s: %s (%s); driven %s", g.Group, g.Health.State, g.Health.Evidence, lt.State)
		if g.Health.State != lt.State {
			t.Errorf("%s: health %s (%s), driven %s", g.Group, g.Health.State, g.Health.Evidence, lt.State)
		}
		if want := evidence[lt.Evidence]; want != "" && !strings.Contains(g.Health.Evidence, want) {
			t.Errorf("%s: evidence %q, want it to say %q", g.Group, g.Health.Evidence, want)
		}
		if lt.State == "ok" {
			for _, h := range g.Hazards {
				if h.Severity != "info" {
					t.Errorf("%s keeps up, but has a %s %s hazard", g.Group, h.Severity, h.Kind)
				}
			}
		}
	}
	if seen != len(tr.Lag) {
		t.Errorf("%d of the truth's %d groups in the summary", seen, len(tr.Lag))
	}
	// A stop or stall is a hazard per partition; lagging and ok are not.
	kinds := map[string]string{"stopped": "consumer_stopped", "stalled": "consumer_stalled"}
	got := map[string]int{}
	for _, l := range bytes.Split(out, []byte("\n")) {
		var h struct {
			Type, Kind, Group string
			Evidence          []json.RawMessage
		}
		if json.Unmarshal(l, &h) != nil || h.Type != "hazard" || !strings.HasPrefix(h.Kind, "consumer_") {
			continue
		}
		got[h.Group+" "+h.Kind]++
		if len(h.Evidence) == 0 {
			t.Errorf("%s %s without evidence", h.Group, h.Kind)
		}
	}
	for g, lt := range tr.Lag {
		want := 0
		if kinds[lt.State] != "" {
			want = 3 // one per partition
		}
		if n := got[g+" "+kinds[lt.State]]; kinds[lt.State] != "" && n != want {
			t.Errorf("%s (%s): %d %s hazards, want %d", g, lt.State, n, kinds[lt.State], want)
		}
		for _, k := range kinds {
			if k != kinds[lt.State] && got[g+" "+k] > 0 {
				t.Errorf("%s (%s): %d %s hazards, want none", g, lt.State, got[g+" "+k], k)
			}
		}
	}
}

// TestHTMLReportLag: the HTML report of h_lag shows each group
// partition's lag in seconds and health, as the summary has them.
func TestHTMLReportLag(t *testing.T) {
	page := filepath.Join(t.TempDir(), "lag.html")
	out, errs := runOutput([]string{"analyze", "--json", "--health-window", "4s", "--html", page, filepath.Join(testdataDir(), "h_lag.pcapng")})
	var s struct {
		Groups []struct {
			Group      string `json:"group"`
			Partitions []struct {
				Partition  int32    `json:"partition"`
				LagSeconds *float64 `json:"lag_seconds"`
				Health     *struct {
					State string `json:"state"`
				} `json:"health"`
			} `json:"partitions"`
		} `json:"groups"`
	}
	summaryLine(t, out, &s)
	html := string(readFile(t, page))
	n := 0
	for _, g := range s.Groups {
		for _, p := range g.Partitions {
			if p.LagSeconds == nil || p.Health == nil {
				t.Errorf("%s/%d: lag_seconds %v, health %v (%s)", g.Group, p.Partition, p.LagSeconds, p.Health, errs)
				continue
			}
			row := fmt.Sprintf(`%s</td>(<td[^>]*>[^<]*</td>){5}<td[^>]*>%s s</td><td[^>]*>%s</td>`,
				regexp.QuoteMeta(fmt.Sprintf("hl-orders[%d]", p.Partition)), regexp.QuoteMeta(strconv.FormatFloat(*p.LagSeconds, 'f', 1, 64)), p.Health.State)
			if !regexp.MustCompile(row).MatchString(html) {
				t.Errorf("%s %d: no table row with lag %.1f s and health %s", g.Group, p.Partition, *p.LagSeconds, p.Health.State)
			}
			n++
		}
	}
	if n != 15 {
		t.Errorf("%d group partitions, want h_lag's 15", n)
	}
}
