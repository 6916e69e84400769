package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kwire/kwire/internal/captest"
)

// TestReferenceSame runs kwire read --json and analyze --json on every
// committed capture, and on damaged (flipped bytes) and lossy (dropped
// segments) copies of each and a pcap copy, with the fast paths (reference.go) and with
// KWIRE_REFERENCE=all: the output must be the same bytes.
func TestReferenceSame(t *testing.T) {
	dir := t.TempDir()
	for _, c := range captures(t) {
		inputs := map[string][]string{"clean": c.files}
		for _, v := range []struct {
			name string
			make func([]byte, uint64) ([]byte, error)
		}{
			{"flipped", func(b []byte, seed uint64) ([]byte, error) { return captest.FlipBytes(b, 0.002, seed), nil }},
			{"dropped", func(b []byte, seed uint64) ([]byte, error) { return captest.DropData(b, 0.05, seed) }},
			{"pcap", func(b []byte, _ uint64) ([]byte, error) { return captest.ToPcap(b) }},
		} {
			var files []string
			for i, f := range c.files {
				b, err := v.make(readFile(t, f), uint64(i+1))
				if err != nil {
					t.Fatalf("%s: %s: %v", f, v.name, err)
				}
				p := filepath.Join(dir, fmt.Sprintf("%s.%s.%d.pcapng", c.name, v.name, i))
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
			}
			inputs[v.name] = files
		}
		for variant, files := range inputs {
			for _, cmd := range []string{"read", "analyze"} {
				t.Run(c.name+"/"+variant+"/"+cmd, func(t *testing.T) {
					args := append([]string{cmd, "--json"}, files...)
					t.Setenv(referenceEnv, "")
					fast, fastErr := runOutput(args)
					t.Setenv(referenceEnv, "all")
					ref, refErr := runOutput(args)
					if fastErr != refErr {
						t.Errorf("stderr and exit: fast %q, reference %q", fastErr, refErr)
					}
					if !bytes.Equal(fast, ref) {
						t.Errorf("output differs from the reference's: %s", firstDiff(fast, ref))
					}
				})
			}
		}
	}
}

// runOutput runs kwire and returns its stdout, and its exit code and
// stderr as one string.
func runOutput(args []string) ([]byte, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.Bytes(), fmt.Sprintf("exit %d: %s", code, stderr.String())
}

// firstDiff describes the first line where a and b differ.
func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n fast      %s\n reference %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(la), len(lb))
}
