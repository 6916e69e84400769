//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/jsonout"
)

// Issue 16's throughput figures, on the bulk capture (make bench-capture;
// KWIRE_BENCH_CAPTURE, KWIRE_BENCH_PORTS as for BenchmarkAnalyze):
//
//	go test -run '^$' -bench 'Agent|AggregateMerge' -benchtime 3x ./cmd/kwire
//
// BenchmarkAgentPublish is the agent's cost: the capture file through
// kwire live's pipeline (decode, correlate, output; one goroutine, as
// live runs it) without and with --publish to a transport broker in a
// process of its own, CPU time of this process per byte of Kafka traffic
// (KWIRE_BENCH_COMPRESSION: --publish-compression).
// BenchmarkAggregateMerge is one aggregator taking three agents' batches
// (the file's three brokers, one agent each): decode, merge, correlate.

// benchCapture returns the bulk capture and its --port list, or skips.
func benchCapture(b *testing.B) (path string, size int64, ports []string) {
	path = os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench-capture` and point it at the file")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skipf("KWIRE_BENCH_CAPTURE=%s: %v", path, err)
	}
	// --port syntax: a list and/or ranges (29092-29094).
	for _, s := range strings.Split(cmpOr(os.Getenv("KWIRE_BENCH_PORTS"), "9092"), ",") {
		var lo, hi int
		if n, _ := fmt.Sscanf(s, "%d-%d", &lo, &hi); n < 2 {
			hi = lo
		}
		for q := lo; q <= hi; q++ {
			ports = append(ports, fmt.Sprint(q))
		}
	}
	return path, fi.Size(), ports
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// transportProc is a 1-broker kfake in a child process (this test binary
// with KWIRE_TEST_KFAKE=1, see TestMain), so that its CPU is not the
// agent's.
func transportProc(b *testing.B) []string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "KWIRE_TEST_KFAKE=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("transport: %v", err)
	}
	return strings.Fields(line)
}

// serveKfake is the child of transportProc: it prints the brokers'
// addresses and serves until stdin closes.
func serveKfake() {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(c.ListenAddrs(), " "))
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	os.Exit(0)
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerSource passes on the chunks of connections to one broker port
// only, as the agent on that broker's host sees them (a capture file's
// --port decides which side is the broker; it filters nothing).
type brokerSource struct {
	capture.Source
	port uint16
}

func (s brokerSource) Run(ctx context.Context, sink capture.Sink) error {
	return s.Source.Run(ctx, capture.SinkFunc(func(c *capture.Chunk) {
		if c.Conn.Server.Port() == s.port {
			sink.Chunk(c)
		}
	}))
}

// runBenchAgent runs path through kwire live's pipeline for ports (the
// connections to one of them only, when one), the agent's code,
// publishing to url when it is not empty (as agent host, with a buffer
// large enough that nothing is dropped), and returns the publisher's
// counters.
func runBenchAgent(b *testing.B, path, ports, url, host string) wire.PublishStats {
	var cf commonFlags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	cf.register(fs)
	if err := fs.Parse([]string{"--port", ports}); err != nil {
		b.Fatal(err)
	}
	p := newPipeline(&cf, io.Discard, false)
	p.out = jsonout.New(io.Discard, &jsonout.Options{LineFlush: true})
	files, err := capture.OpenFiles([]string{path}, &capture.Options{Ports: cf.ports, MaxConns: cf.limits.conns})
	if err != nil {
		b.Fatal(err)
	}
	defer files.Close()
	src := capture.Source(files)
	var port uint16
	if _, err := fmt.Sscanf(ports, "%d", &port); err == nil && !strings.ContainsAny(ports, ",-") {
		src = brokerSource{files, port}
	}
	if url == "" {
		clock := &lastTime{next: p.dec}
		err := src.Run(context.Background(), clock)
		if err := joinErr(err, p.finish(clock.t, clock.t, src.Stats(), false)); err != nil {
			b.Fatal(err)
		}
		return wire.PublishStats{}
	}
	pf := &publishFlags{kafka: kafkaFlags{url: url}, bufferMB: 4096, compress: os.Getenv("KWIRE_BENCH_COMPRESSION")}
	pub, err := newPublisher(pf, wire.Agent{Host: host, Run: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := runAgent(context.Background(), src, p, pub); err != nil {
		b.Fatal(err)
	}
	return pub.Stats()
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// BenchmarkAgentPublish: per iteration, one pass over the capture through
// kwire live's pipeline alone and one with --publish, in alternating
// order; CPU per byte of each, the share publishing adds (of the sums,
// and the median and quartiles of the iterations' own shares: steadier on
// a shared machine), and what that is at 1 Gbit/s of Kafka traffic
// (cores). ns/op and MB/s are the pass with publishing.
func BenchmarkAgentPublish(b *testing.B) {
	path, size, ports := benchCapture(b)
	all := strings.Join(ports, ",")
	url := "kafka://" + strings.Join(transportProc(b), ",") + "/kwire"
	var base, pub time.Duration
	var shares []float64
	var st wire.PublishStats
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var c0, cb, cp time.Duration
		for pass := range 2 {
			if withPub := (pass+i)%2 == 1; !withPub {
				b.StopTimer()
				c0 = cpuTime()
				runBenchAgent(b, path, all, "", "")
				cb = cpuTime() - c0
				b.StartTimer()
				continue
			}
			c0 = cpuTime()
			s := runBenchAgent(b, path, all, url, fmt.Sprintf("bench%d", i))
			cp = cpuTime() - c0
			st.Batches += s.Batches
			st.Items += s.Items
			st.Bytes += s.Bytes
			st.BatchesDropped += s.BatchesDropped
		}
		base, pub = base+cb, pub+cp
		shares = append(shares, float64(cp-cb)/float64(cb)*100)
	}
	n := float64(b.N) * float64(size)
	slices.Sort(shares)
	q := func(f float64) float64 { return shares[int(f*float64(len(shares)-1)+0.5)] }
	b.ReportMetric(float64(base.Nanoseconds())/n, "live-cpu-ns/B")
	b.ReportMetric(float64(pub.Nanoseconds())/n, "agent-cpu-ns/B")
	b.ReportMetric(float64((pub-base).Nanoseconds())/float64(base.Nanoseconds())*100, "publish-cpu-%")
	b.ReportMetric(q(0.5), "publish-cpu-%-median")
	b.ReportMetric(q(0.25), "publish-cpu-%-q1")
	b.ReportMetric(q(0.75), "publish-cpu-%-q3")
	b.ReportMetric(float64((pub-base).Nanoseconds())/n*125e6/1e9, "publish-cores@1Gbit/s")
	b.ReportMetric(float64(st.Bytes)/n*100, "published-%-of-traffic")
	b.ReportMetric(float64(st.Items)/float64(b.N), "items/pass")
	b.ReportMetric(float64(st.Batches)/float64(b.N), "batches/pass")
	b.ReportMetric(float64(st.BatchesDropped), "batches-dropped")
}

// BenchmarkAggregateMerge: three agents (one per broker port of the
// capture) publish it once; then each iteration is one aggregator taking
// all their batches as kwire aggregate does: decode, merge behind the
// watermark (released every 64 batches, as after a poll), correlate,
// output discarded. MB/s is of the Kafka traffic the batches stand for:
// three agents at 1 Gbit/s each are 375 MB/s; by wall time and by this
// process's CPU time.
func BenchmarkAggregateMerge(b *testing.B) {
	path, size, ports := benchCapture(b)
	if len(ports) != 3 {
		b.Skipf("want the 3 broker ports of the bulk capture in KWIRE_BENCH_PORTS, have %v", ports)
	}
	addrs := transportProc(b)
	url := "kafka://" + strings.Join(addrs, ",") + "/kwire"
	batches := 0
	for i, p := range ports {
		st := runBenchAgent(b, path, p, url, fmt.Sprintf("b%d", i))
		b.Logf("agent b%d (port %s): %d batches, %d items, %d bytes", i, p, st.Batches, st.Items, st.Bytes)
		batches += int(st.Batches)
	}
	values := consumeAll(b, addrs, "kwire", batches)
	items := 0
	for _, v := range values {
		bt, err := wire.Decode(bytes.Clone(v), nil)
		if err != nil {
			b.Fatal(err)
		}
		items += len(bt.Items)
	}
	b.SetBytes(size)
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		in := make([][]byte, len(values))
		for j, v := range values {
			in[j] = bytes.Clone(v) // Decode keeps what it decodes
		}
		ag := benchAggregator()
		b.StartTimer()
		c0 := cpuTime()
		now := time.Now()
		for j, v := range in {
			ag.Add(v, now) // the values decoded above
			if j%64 == 63 {
				ag.Release(now, false)
			}
		}
		if err := ag.Finish(); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	b.StopTimer()
	b.ReportMetric(float64(items)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
	b.ReportMetric(float64(len(values)), "batches")
	b.ReportMetric(float64(size)/1e6/b.Elapsed().Seconds()*float64(b.N)/375, "x3agents@1Gbit/s")
	// By CPU time: what one core of this process would do, steadier than
	// wall time on a shared machine (the merge and correlator are one
	// goroutine; the garbage collector's CPU counts).
	b.ReportMetric(float64(items)*float64(b.N)/cpu.Seconds(), "items/cpu-s")
	b.ReportMetric(float64(size)/1e6/cpu.Seconds()*float64(b.N)/375, "x3agents@1Gbit/s-cpu")
}

// benchAggregator is kwire aggregate's aggregator, as runAggregate wires
// it with the default flags, writing nowhere.
func benchAggregator() *aggregate.Aggregator {
	var f aggregateFlags
	f.register(flag.NewFlagSet("aggregate", flag.ContinueOnError))
	co := f.correlateOptions()
	return aggregate.New(&aggregate.Options{Correlate: co, MaxLateness: f.maxLateness, MaxSkew: f.maxSkew, QuietAfter: f.quietAfter}, io.Discard)
}

// consumeAll reads n records of topic.
func consumeAll(b *testing.B, brokers []string, topic string, n int) [][]byte {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out [][]byte
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r.Value) })
	}
	if len(out) != n {
		b.Fatalf("read %d records of %s, want %d", len(out), topic, n)
	}
	return out
}
