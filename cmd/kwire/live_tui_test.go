package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestLiveTUIFlags checks what kwire live --tui refuses, and that its help
// tells about it.
func TestLiveTUIFlags(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"with --json", []string{"-i", "lo", "--tui", "--json"}, 2, "kwire live: --tui and --json are two outputs (the terminal UI, NDJSON lines): give one"},
		{"with --json and --ebpf", []string{"--ebpf", "--json", "--tui"}, 2, "kwire live: --tui and --json are two outputs"},
		{"with --exchanges", []string{"-i", "lo", "--tui", "--exchanges"}, 2, "kwire live: --exchanges writes lines, and --tui draws the terminal UI instead: give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"live"}, tt.args...), &stdout, &stderr); code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
	var help bytes.Buffer
	if code := run([]string{"help", "live"}, &help, &help); code != 0 {
		t.Fatalf("kwire help live: exit status %d", code)
	}
	for _, s := range []string{"  -tui\n", "With --tui: a terminal UI", "kwire live -i eth0 --port 9092 --tui"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("kwire help live lacks %q", s)
		}
	}
}
