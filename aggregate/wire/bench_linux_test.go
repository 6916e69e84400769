//go:build linux

package wire

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// encodeSink decodes a capture and, when enc is set, encodes every
// exchange and anomaly into batches of about 64 KiB, as an agent does.
type encodeSink struct {
	dec            *decode.Decoder
	enc            *Encoder
	seq            uint64
	items, batches int
	bytes          int64
	keep           bool // keep every batch in values
	values         [][]byte
}

func (s *encodeSink) Exchange(e *decode.Exchange) {
	if s.enc != nil {
		s.enc.Exchange(e.RespTime, e)
		s.flush()
	}
}

func (s *encodeSink) Anomaly(a *decode.Anomaly) {
	if s.enc != nil {
		s.enc.Anomaly(a.Time, a)
		s.flush()
	}
}

func (s *encodeSink) flush() {
	s.items++
	if s.enc.Len() >= 64<<10 {
		s.batches++
		s.bytes += int64(s.enc.Len())
		s.seq++
		if v := s.enc.Take(); s.keep {
			s.values = append(s.values, v)
		}
		s.enc.Reset(s.seq)
	}
}

// BenchmarkEncode is the agent's encoding cost on the bulk capture
// (KWIRE_BENCH_CAPTURE, KWIRE_BENCH_PORTS; make bench-capture): each
// iteration captures and decodes it alone, then again with every exchange
// and anomaly encoded into batches of about 64 KiB, as an agent does.
// Reported: the CPU time of this process per byte of each pass and the
// share encoding adds (CPU, not wall time: the machine may be shared).
// The agent's full cost (correlator, producing) is cmd/kwire's
// BenchmarkAgentPublish.
func BenchmarkEncode(b *testing.B) {
	path, fi, ports := benchCapture(b)
	pass := func(encode bool) *encodeSink {
		s := &encodeSink{}
		if encode {
			s.enc = NewEncoder(Agent{Host: "bench", Run: 1})
			s.enc.Reset(1)
		}
		s.dec = decode.New(s, &decode.Options{DropProduceRecords: true})
		src, err := capture.OpenFiles([]string{path}, &capture.Options{Ports: ports})
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		if err := src.Run(context.Background(), s.dec); err != nil {
			b.Fatal(err)
		}
		return s
	}
	var plain, encoded time.Duration
	var s *encodeSink
	b.SetBytes(fi.Size())
	for b.Loop() {
		c0 := cpuTime()
		pass(false)
		c1 := cpuTime()
		s = pass(true)
		plain, encoded = plain+c1-c0, encoded+cpuTime()-c1
	}
	n := float64(b.N) * float64(fi.Size())
	b.ReportMetric(float64(plain.Nanoseconds())/n, "decode-cpu-ns/B")
	b.ReportMetric(float64(encoded.Nanoseconds())/n, "decode+encode-cpu-ns/B")
	b.ReportMetric(float64((encoded-plain).Nanoseconds())/float64(b.N)/float64(max(s.items, 1)), "encode-cpu-ns/item")
	b.ReportMetric(float64(s.bytes)/float64(fi.Size())*100, "encoded-%-of-traffic")
}

// cpuTime is this process's user and system CPU time so far.
// benchCapture returns the capture the benchmarks read
// (KWIRE_BENCH_CAPTURE), its size and its broker ports
// (KWIRE_BENCH_PORTS); without one they skip.
func benchCapture(b *testing.B) (string, os.FileInfo, capture.Ports) {
	b.Helper()
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench-capture` and point it at the file")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skip(err)
	}
	ports, err := capture.ParsePorts(cmpOr(os.Getenv("KWIRE_BENCH_PORTS"), "9092"))
	if err != nil {
		b.Fatal(err)
	}
	return path, fi, ports
}

// encodeCapture decodes the benchmarks' capture once and encodes all of
// it into batches kept in the returned sink's values.
func encodeCapture(b *testing.B) (os.FileInfo, *encodeSink) {
	b.Helper()
	path, fi, ports := benchCapture(b)
	s := &encodeSink{enc: NewEncoder(Agent{Host: "bench", Run: 1}), keep: true}
	s.enc.Reset(1)
	s.dec = decode.New(s, &decode.Options{DropProduceRecords: true})
	src, err := capture.OpenFiles([]string{path}, &capture.Options{Ports: ports})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	if err := src.Run(context.Background(), s.dec); err != nil {
		b.Fatal(err)
	}
	return fi, s
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// BenchmarkEncodeExchanges is the encoder alone: the bulk capture's
// exchanges and anomalies (decoded once, through the wire, so that they
// own their bytes) encoded again and again into batches of about 64 KiB.
// MB/s is of the Kafka traffic they stand for; ns/item per exchange.
func BenchmarkEncodeExchanges(b *testing.B) {
	fi, s := encodeCapture(b)
	s.values = append(s.values, s.enc.Take())
	var items []Item
	for _, v := range s.values {
		bt, err := Decode(v, nil)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, bt.Items...)
	}
	enc := NewEncoder(Agent{Host: "bench", Run: 1})
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		seq := uint64(1)
		enc.Reset(seq)
		for i := range items {
			it := &items[i]
			switch it.Kind {
			case KindExchange:
				enc.Exchange(it.At, it.Exchange)
			case KindAnomaly:
				enc.Anomaly(it.At, it.Anomaly)
			}
			if enc.Len() >= 64<<10 {
				enc.Take()
				seq++
				enc.Reset(seq)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(items)), "ns/item")
}

// BenchmarkCompress is the cost of --publish-compression: the bulk
// capture's batches (about 64 KiB, as an agent sends them) compressed by
// the producer's compressor with each codec. Reported per codec: the CPU
// time per byte of Kafka traffic the batches stand for (compare with
// BenchmarkEncode's decode-cpu-ns/B) and the compressed size as a share
// of the batches' and of the traffic's bytes.
func BenchmarkCompress(b *testing.B) {
	fi, s := encodeCapture(b)
	var raw int64
	for _, v := range s.values {
		raw += int64(len(v))
	}
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		b.Run(c.name, func(b *testing.B) {
			comp, err := kgo.DefaultCompressor(c.codec)
			if err != nil {
				b.Fatal(err)
			}
			var out int64
			var cpu time.Duration
			var buf bytes.Buffer
			b.SetBytes(raw)
			for b.Loop() {
				out = 0
				c0 := cpuTime()
				for _, v := range s.values {
					buf.Reset()
					z, _ := comp.Compress(&buf, v)
					out += int64(len(z))
				}
				cpu += cpuTime() - c0
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(fi.Size()), "cpu-ns/traffic-B")
			b.ReportMetric(float64(out)/float64(raw)*100, "%-of-batches")
			b.ReportMetric(float64(out)/float64(fi.Size())*100, "%-of-traffic")
		})
	}
}

// BenchmarkEncodeWarm is the encoder on data in cache: the bulk capture's
// first 4,000 exchanges (decoded through the wire, Fetch record batches
// left out: DeferRecords) encoded again and again into per-client
// batches, as an agent keys them. cpu-ns/item is the CPU time of the
// benchmark's own thread: steadier than wall time or the process's CPU
// time on a shared machine, where the other benchmarks' figures move
// by half.
func BenchmarkEncodeWarm(b *testing.B) {
	_, s := encodeCapture(b)
	var xs []*decode.Exchange
	for _, v := range s.values {
		bt, err := Decode(v, &Options{DeferRecords: true})
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range bt.Items {
			if it.Kind == KindExchange && len(xs) < 4000 {
				xs = append(xs, it.Exchange)
			}
		}
	}
	encs := make(map[string]*Encoder)
	for _, x := range xs {
		if encs[x.ClientID] == nil {
			encs[x.ClientID] = NewEncoder(Agent{Host: "bench", Run: 1})
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPUTime()
	for b.Loop() {
		for _, enc := range encs {
			enc.Reset(1)
		}
		for _, x := range xs {
			enc := encs[x.ClientID]
			enc.Exchange(x.RespTime, x)
			if enc.Len() >= 64<<10 {
				enc.Reset(2)
			}
		}
	}
	cpu := threadCPUTime() - c0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(len(xs)), "cpu-ns/item")
}

// threadCPUTime is the calling thread's user and system CPU time so far.
func threadCPUTime() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, Linux
	var ru syscall.Rusage
	syscall.Getrusage(rusageThread, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
