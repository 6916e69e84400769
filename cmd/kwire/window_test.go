package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ndjsonLines decodes every NDJSON line of out.
func ndjsonLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("not NDJSON: %q: %v", l, err)
		}
		ls = append(ls, m)
	}
	return ls
}

// groupEvents are the line types that belong to one consumer group.
var groupEvents = []string{"generation", "member", "commit", "coordinator", "hazard", "share_group"}

// TestWindowGroup: analyze --group writes and judges only that group's
// events, hazards and summary, on a capture of two groups.
func TestWindowGroup(t *testing.T) {
	file := filepath.Join(testdataDir(), "h_offset_reset.pcapng")
	for _, group := range []string{"hor-fresh", "hor-lagging"} {
		n := 0
		for _, m := range ndjsonLines(t, runKwire(t, "analyze", "--json", "--group", group, file)) {
			switch typ := m["type"].(string); {
			case slices.Contains(groupEvents, typ):
				n++
				if m["group"] != group {
					t.Errorf("--group %s: a %s line of group %v", group, typ, m["group"])
				}
			case typ == "summary":
				for _, g := range m["groups"].([]any) {
					if name := g.(map[string]any)["group"]; name != group {
						t.Errorf("--group %s: the summary has group %v", group, name)
					}
				}
				for _, h := range m["hazards"].([]any) {
					if g := h.(map[string]any)["group"]; g != group {
						t.Errorf("--group %s: the summary has a hazard of group %v", group, g)
					}
				}
				if len(m["groups"].([]any)) != 1 {
					t.Errorf("--group %s: the summary has %d groups, want 1", group, len(m["groups"].([]any)))
				}
			}
		}
		if n == 0 {
			t.Errorf("--group %s: no event of the group", group)
		}
	}
	// The critical reset is hor-lagging's: only a run that keeps that group fails.
	for group, want := range map[string]int{"hor-fresh": 0, "hor-lagging": 3, "": 3} {
		var stdout, stderr bytes.Buffer
		if got := run([]string{"analyze", "--json", "--fail-on=critical", "--group=" + group, file}, &stdout, &stderr); got != want {
			t.Errorf("--fail-on=critical --group=%q: exit %d, want %d (%s)", group, got, want, stderr.String())
		}
	}
	text := string(runKwire(t, "analyze", "--text", "--group", "hor-fresh", file))
	if strings.Contains(text, "hor-lagging") || !strings.Contains(text, "== group hor-fresh") {
		t.Errorf("--text --group hor-fresh: the report names hor-lagging, or not hor-fresh:\n%s", text)
	}
}

// TestWindowTime: --since and --until keep the events, anomalies and
// hazards of their time, while the correlator still uses what came
// before: a commit_regression kept alone in a window is found from the
// commit before it, outside the window.
func TestWindowTime(t *testing.T) {
	file := filepath.Join(testdataDir(), "h_commit_regression.pcapng")
	var at time.Time
	for _, m := range ndjsonLines(t, runKwire(t, "analyze", "--json", file)) {
		if m["type"] == "hazard" && m["kind"] == "commit_regression" {
			at, _ = time.Parse(time.RFC3339Nano, m["ts"].(string))
		}
	}
	if at.IsZero() {
		t.Fatal("no commit_regression in the capture")
	}
	since, until := at.Add(-time.Millisecond), at.Add(time.Millisecond)
	for _, args := range [][]string{
		{"--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano)},
		{"--since", since.Format("15:04:05.000000"), "--until", until.Format("2006-01-02 15:04:05.000000")},
	} {
		out := runKwire(t, append(append([]string{"analyze", "--json"}, args...), file)...)
		var kinds []string
		for _, m := range ndjsonLines(t, out) {
			typ := m["type"].(string)
			if typ == "summary" {
				for _, h := range m["hazards"].([]any) {
					if k := h.(map[string]any)["kind"]; k != "commit_regression" {
						t.Errorf("%v: the summary has a %v hazard outside the window", args, k)
					}
				}
				continue
			}
			if typ == "stats" {
				continue
			}
			ts, _ := time.Parse(time.RFC3339Nano, m["ts"].(string))
			if ts.Before(since) || !ts.Before(until) {
				t.Errorf("%v: a %s line at %v, outside %v..%v", args, typ, ts, since, until)
			}
			if typ == "hazard" {
				kinds = append(kinds, m["kind"].(string))
			}
		}
		if !slices.Equal(kinds, []string{"commit_regression"}) {
			t.Errorf("%v: hazards %v, want the commit_regression only (judged from the commit before --since)", args, kinds)
		}
	}
	var stdout, stderr bytes.Buffer
	if got := run([]string{"analyze", "--json", "--fail-on=warn", "--until", since.Format(time.RFC3339Nano), file}, &stdout, &stderr); got != 0 {
		t.Errorf("--fail-on=warn before the regression: exit %d, want 0 (%s)", got, stderr.String())
	}
	if got := run([]string{"analyze", "--json", "--fail-on=warn", "--since", since.Format(time.RFC3339Nano), file}, &stdout, &stderr); got != 3 {
		t.Errorf("--fail-on=warn from just before the regression: exit %d, want 3 (%s)", got, stderr.String())
	}
}

// TestWindowUsage: times kwire cannot read, an empty window and the
// filters with the terminal UI are usage errors (exit 2).
func TestWindowUsage(t *testing.T) {
	file := filepath.Join(testdataDir(), "group.pcapng")
	for _, args := range [][]string{
		{"--since", "yesterday"},
		{"--until", "25:00:00"},
		{"--since", "2026-12-02T00:20:00Z", "--until", "2026-12-02T00:19:00Z"},
		{"--group", "g", "--tui"},
	} {
		var stdout, stderr bytes.Buffer
		if got := run(append(append([]string{"analyze"}, args...), file), &stdout, &stderr); got != 2 {
			t.Errorf("kwire analyze %v: exit %d, want 2 (%s)", args, got, stderr.String())
		}
	}
}
