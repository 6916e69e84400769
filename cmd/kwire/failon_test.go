package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestFailOn checks analyze's exit status for CI pipelines: 3 when a
// hazard at or above --fail-on is found, 0 otherwise.
func TestFailOn(t *testing.T) {
	tests := []struct {
		name, capture, failOn string
		want                  int
	}{
		{"report 4's lost record is critical", "h_commit_gap", "critical", 3},
		{"a clean group has no warning", "group", "warn", 0},
		{"a clean group with commit-on-receive infos passes critical", "group", "critical", 0},
		{"a killed member's expiry is a warning", "g_churn", "warn", 3},
		{"bad severity is a usage error", "group", "info", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			file := filepath.Join(testdataDir(), tt.capture+".pcapng")
			if got := run([]string{"analyze", "--json", "--fail-on", tt.failOn, file}, &stdout, &stderr); got != tt.want {
				t.Errorf("exit status %d, want %d (stderr: %s)", got, tt.want, stderr.String())
			}
		})
	}
}
