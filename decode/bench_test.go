package decode_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
)

// benchCapture returns the capture named by KWIRE_BENCH_CAPTURE (make
// bench-capture writes one) and its size, or skips: a benchmark over a few
// kilobytes of testdata would measure setup, not decoding. KWIRE_BENCH_PORTS
// names the broker ports (default: kwire read's 9092, others inferred).
func benchCapture(b *testing.B) (string, int64, *capture.Options) {
	b.Helper()
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench` (or `make bench-capture` and point it at the file)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skipf("KWIRE_BENCH_CAPTURE=%s: %v (make bench-capture writes it)", path, err)
	}
	ports := os.Getenv("KWIRE_BENCH_PORTS")
	if ports == "" {
		ports = "9092"
	}
	p, err := capture.ParsePorts(ports)
	if err != nil {
		b.Fatalf("KWIRE_BENCH_PORTS: %v", err)
	}
	return path, fi.Size(), &capture.Options{Ports: p}
}

type nopHandler struct{}

func (nopHandler) Exchange(*decode.Exchange) {}
func (nopHandler) Anomaly(*decode.Anomaly)   {}

// BenchmarkDecode measures capture.OpenFiles -> decode.New over a large
// capture: MB/s of capture file and Kafka frames (requests + responses) per
// second. out=none hands exchanges to a no-op handler (decode-to-exchanges,
// issue 2's figure); out=ndjson writes them with jsonout to io.Discard, as
// `kwire read --json` does.
func BenchmarkDecode(b *testing.B) {
	path, size, copts := benchCapture(b)
	for _, bc := range []struct {
		name string
		out  func() (decode.Handler, func(capture.Stats, decode.Stats) error)
	}{
		{"out=none", func() (decode.Handler, func(capture.Stats, decode.Stats) error) {
			return nopHandler{}, func(capture.Stats, decode.Stats) error { return nil }
		}},
		{"out=ndjson", func() (decode.Handler, func(capture.Stats, decode.Stats) error) {
			w := jsonout.New(io.Discard, nil)
			return w, func(cs capture.Stats, ds decode.Stats) error {
				w.Stats(time.Time{}, cs, ds)
				return w.Flush()
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			var frames int64
			for b.Loop() {
				h, finish := bc.out()
				src, err := capture.OpenFiles([]string{path}, copts)
				if err != nil {
					b.Fatal(err)
				}
				dec := decode.New(h, nil)
				if err := src.Run(context.Background(), dec); err != nil {
					b.Fatal(err)
				}
				st := dec.Stats()
				if err := finish(src.Stats(), st); err != nil {
					b.Fatal(err)
				}
				if st.Exchanges == 0 || st.DecodeErrors != 0 {
					b.Fatalf("decode stats %+v: want exchanges and no decode errors", st)
				}
				frames += st.Requests + st.Responses
			}
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
