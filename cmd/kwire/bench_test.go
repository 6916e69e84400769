package main

import (
	"io"
	"os"
	"testing"
)

// BenchmarkRead measures `kwire read --json FILE > /dev/null` in process,
// flags and all, on the capture named by KWIRE_BENCH_CAPTURE (make
// bench-capture writes one); KWIRE_BENCH_PORTS is passed as --port.
func BenchmarkRead(b *testing.B) { benchCommand(b, "read") }

// BenchmarkAnalyze measures `kwire analyze --json FILE > /dev/null` (the
// full pipeline: decode, correlate, report) the same way.
func BenchmarkAnalyze(b *testing.B) { benchCommand(b, "analyze") }

func benchCommand(b *testing.B, command string) {
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench` (or `make bench-capture` and point it at the file)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skipf("KWIRE_BENCH_CAPTURE=%s: %v (make bench-capture writes it)", path, err)
	}
	args := []string{command, "--json"}
	if p := os.Getenv("KWIRE_BENCH_PORTS"); p != "" {
		args = append(args, "--port", p)
	}
	args = append(args, path)
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		if code := run(args, io.Discard, os.Stderr); code != 0 {
			b.Fatalf("kwire %v: exit status %d", args, code)
		}
	}
}
