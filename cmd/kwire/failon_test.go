package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFailOn checks analyze's exit status for CI pipelines: 3 when a
// hazard matches --fail-on, 0 otherwise, 2 for a list it cannot read.
func TestFailOn(t *testing.T) {
	tests := []struct {
		name, capture, failOn string
		want                  int
	}{
		{"report 4's lost record is critical", "h_commit_gap", "critical", 3},
		{"a clean group has no warning", "group", "warn", 0},
		{"a clean group with commit-on-receive infos passes critical", "group", "critical", 0},
		{"a killed member's expiry is a warning", "g_churn", "warn", 3},
		{"info is refused: every new group has some", "group", "info", 2},
		{"rejected commits replay, and are warn, not critical", "h_commit_rejected", "critical", 0},
		{"rejected commits replay", "h_commit_rejected", "replayed", 3},
		{"rejected commits lose nothing", "h_commit_rejected", "lost", 0},
		{"a reset forward loses records", "h_offset_reset", "lost", 3},
		{"a reset back replays", "h_reset_regression", "replayed", 3},
		{"expired members' uncommitted records replay", "h_rebalance_storm", "replayed", 3},
		{"a kind at any severity: the routine info of a new group", "group", "commit_on_receive", 3},
		{"a kind at a severity: commit_on_receive is only info here", "group", "commit_on_receive:warn", 0},
		{"a kind not found", "h_commit_rejected", "commit_gap", 0},
		{"an exclusion wins over the severity", "h_commit_rejected", "warn,-commit_rejected", 0},
		{"an exclusion leaves the other kinds", "h_rebalance_storm", "warn,-member_expired", 3},
		{"every warning of the storm excluded", "h_rebalance_storm", "warn,-member_expired,-rebalance_slow,-rebalance_storm", 0},
		{"an unknown word", "group", "warn,bogus", 2},
		{"an unknown kind to leave out", "group", "-bogus", 2},
		{"an unknown severity of a kind", "group", "commit_gap:bad", 2},
		{"a kind both named and left out", "group", "commit_gap,-commit_gap", 2},
		{"an empty term", "group", "warn,", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			file := filepath.Join(testdataDir(), tt.capture+".pcapng")
			got := run([]string{"analyze", "--json", "--fail-on", tt.failOn, file}, &stdout, &stderr)
			if got != tt.want {
				t.Errorf("--fail-on=%s on %s: exit status %d, want %d (stderr: %s)", tt.failOn, tt.capture, got, tt.want, stderr.String())
			}
			if got == 3 && !strings.Contains(stderr.String(), "match --fail-on="+tt.failOn) {
				t.Errorf("exit 3 without saying which hazards matched: %q", stderr.String())
			}
		})
	}
}

// TestREADMEFailOn runs the README's CI example as it is written there on
// the capture of rejected commits (records processed again): it must fail
// the pipeline, as the README says, and the example of a clean group must
// pass it.
func TestREADMEFailOn(t *testing.T) {
	readme := string(readFile(t, "../../README.md"))
	m := regexp.MustCompile(`(?m)^# in CI: fail the pipeline when a capture[^\n]*\n# lost or replayed records[^\n]*\n(?:#[^\n]*\n)*kwire (analyze [^\n]*) integration\.pcapng$`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no CI example (\"# in CI: fail the pipeline when a capture ... lost or replayed records\" then \"kwire analyze ... integration.pcapng\")")
	}
	args := strings.Fields(m[1])
	for _, tt := range []struct {
		capture string
		want    int
	}{{"h_commit_rejected", 3}, {"h_offset_reset", 3}, {"g_stable", 0}} {
		var stdout, stderr bytes.Buffer
		if got := run(append(args, filepath.Join(testdataDir(), tt.capture+".pcapng")), &stdout, &stderr); got != tt.want {
			t.Errorf("kwire %s on %s: exit status %d, want %d (stderr: %s)", m[1], tt.capture, got, tt.want, stderr.String())
		}
	}
}
