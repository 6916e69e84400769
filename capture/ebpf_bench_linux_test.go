//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
)

// childTraffic is the benchmark's workload, in its own process: a kfake
// broker (produce discarded, fetches answered from a canned batch, so it
// holds no data), two producers of RecordBytes records (8 per request)
// and a two-member consumer group reading 16 records of that size per
// batch, as fast as they go. For every line on stdin it writes
// the record bytes produced and consumed so far, then those produced.
func childTraffic(ctx context.Context, a childSpec) error {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(a.Partitions, a.Topic), kfake.BlackholeProduce(),
		kfake.SyntheticFetch(kfake.SyntheticBatch{Records: 16, RecordBytes: a.RecordBytes}))
	if err != nil {
		return err
	}
	defer kf.Close()
	var total, produced atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	for i := range 2 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			benchProduce(ctx, kf.ListenAddrs(), a.Topic, fmt.Sprintf("producer-%d", i), a.RecordBytes, &produced)
		}()
		go func() {
			defer wg.Done()
			if !a.ProduceOnly {
				benchConsume(ctx, kf.ListenAddrs(), a.Topic, fmt.Sprintf("consumer-%d", i), &total)
			}
		}()
	}
	fmt.Println("ready " + strings.Join(kf.ListenAddrs(), ","))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(total.Load()+produced.Load(), produced.Load())
	}
	return nil
}

func benchProduce(ctx context.Context, brokers []string, topic, id string, size int, total *atomic.Int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID(id), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return
	}
	defer cl.Close()
	value := make([]byte, size)
	for ctx.Err() == nil {
		rs := make([]*kgo.Record, 8)
		for j := range rs {
			rs[j] = &kgo.Record{Value: value}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err == nil {
			total.Add(int64(len(rs) * len(value)))
		}
	}
}

func benchConsume(ctx context.Context, brokers []string, topic, id string, total *atomic.Int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ClientID(id), kgo.ConsumerGroup("bench"),
		kgo.ConsumeTopics(topic), kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(4<<20))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { total.Add(int64(len(r.Value))) })
	}
}

// trafficProc is the workload child and a way to read its byte count.
type trafficProc struct {
	pid int
	in  io.Writer
	out *bufio.Scanner
}

func startTraffic(b *testing.B, a childSpec) (*trafficProc, string) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	// One P: on 2 vCPUs the workload's goroutines contending across two
	// swing its throughput by 4x from second to second; on one it is
	// steady, and the other CPU is kwire's.
	args, _ := json.Marshal(a)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", childEnv+"=traffic", childArgs+"="+string(args))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &trafficProc{pid: cmd.Process.Pid, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() { in.(io.Closer).Close(); cmd.Process.Kill(); cmd.Wait() })
	if !p.out.Scan() {
		b.Fatal("traffic child exited before it was ready")
	}
	addrs, ok := strings.CutPrefix(p.out.Text(), "ready ")
	if !ok {
		b.Fatalf("traffic child: %q", p.out.Text())
	}
	return p, addrs
}

// bytes asks the child for its byte count.
func (p *trafficProc) bytes(b *testing.B) int64 {
	fmt.Fprintln(p.in)
	if !p.out.Scan() {
		b.Fatal("traffic child exited")
	}
	total, _, _ := strings.Cut(p.out.Text(), " ")
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// cpu returns the CPU time the child has used (user + system): the
// probes run in the threads making the system calls, so their cost is in
// it.
func (p *trafficProc) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (in parentheses): state is the 3rd
	// field of stat, utime and stime the 14th and 15th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// phase is one measurement: the workload's bytes per second, and its
// CPU time per GB moved.
type phase struct{ rate, cpuPerGB float64 }

// measure measures the workload over d.
func (p *trafficProc) measure(b *testing.B, d time.Duration) phase {
	start, n0, c0 := time.Now(), p.bytes(b), p.cpu(b)
	time.Sleep(d) // the measurement window itself, not a wait for an event
	n, c := p.bytes(b)-n0, p.cpu(b)-c0
	return phase{rate: float64(n) / time.Since(start).Seconds(), cpuPerGB: c.Seconds() / (float64(n) / 1e9)}
}

// BenchmarkEBPFOverhead measures what the probes cost a loopback Kafka
// workload (producers and a consumer group against kfake, in a child
// process): its throughput alternately without and with the probes
// attached and kwire's pipeline (decode, correlate) reading them, in one
// run, rounds interleaved against drift. It reports both rates, their
// ratio, the workload's CPU time per GB with and without (less sensitive
// to other load on the machine than the rates), the events per second and
// the ring-buffer drops. Run it with
// -benchtime 1x (make bench-ebpf); KWIRE_BENCH_EBPF_SECONDS sets each
// phase's length (default 5), KWIRE_BENCH_EBPF_SNAP the copy limit,
// KWIRE_BENCH_EBPF_RECORD the record size (default 65536); with
// KWIRE_BENCH_EBPF_PRODUCE_ONLY set there are only the producers, whose
// synchronous requests make many small system calls.
func BenchmarkEBPFOverhead(b *testing.B) {
	length := 5 * time.Second
	if s, err := strconv.Atoi(os.Getenv("KWIRE_BENCH_EBPF_SECONDS")); err == nil && s > 0 {
		length = time.Duration(s) * time.Second
	}
	snap, _ := strconv.Atoi(os.Getenv("KWIRE_BENCH_EBPF_SNAP"))
	record := 64 << 10
	if n, err := strconv.Atoi(os.Getenv("KWIRE_BENCH_EBPF_RECORD")); err == nil && n > 0 {
		record = n
	}
	produceOnly := os.Getenv("KWIRE_BENCH_EBPF_PRODUCE_ONLY") != ""
	pid, _ := strconv.Atoi(os.Getenv("KWIRE_BENCH_EBPF_PID"))
	nullSink := os.Getenv("KWIRE_BENCH_EBPF_NULL_SINK") != ""
	traffic, addrs := startTraffic(b, childSpec{Topic: "bench", Partitions: 6, RecordBytes: record, ProduceOnly: produceOnly})
	ports := portsOf(addrs)
	openEBPF(b, nil, ports).Close()   // skips here when eBPF is unavailable
	traffic.measure(b, 5*time.Second) // warm-up: the rate climbs for a few seconds
	const rounds = 3
	var off, on phase
	var st capture.Stats
	b.ResetTimer()
	for r := range rounds {
		o := traffic.measure(b, length)
		src := openEBPF(b, &capture.EBPFOptions{SnapBytes: snap, PID: uint32(pid)}, ports)
		ctx, cancel := context.WithCancel(context.Background())
		var done <-chan error
		if nullSink {
			ch := make(chan error, 1)
			go func() { ch <- src.Run(ctx, capture.SinkFunc(func(*capture.Chunk) {})) }()
			done = ch
		} else {
			done = newAnalysis("ebpf").run(ctx, src)
		}
		w := traffic.measure(b, length)
		cancel()
		<-done
		s := src.Stats()
		b.Logf("round %d: without %.0f MB/s %.2f CPU-s/GB, with %.0f MB/s %.2f CPU-s/GB (%d events, %d drops)",
			r+1, o.rate/1e6, o.cpuPerGB, w.rate/1e6, w.cpuPerGB, s.EBPF.Events, s.EBPF.RingDrops)
		off.rate += o.rate / rounds
		off.cpuPerGB += o.cpuPerGB / rounds
		on.rate += w.rate / rounds
		on.cpuPerGB += w.cpuPerGB / rounds
		st.EBPF = addEBPFStats(st.EBPF, s.EBPF)
	}
	b.StopTimer()
	e := st.EBPF
	b.ReportMetric(off.rate/1e6, "MB/s-without")
	b.ReportMetric(on.rate/1e6, "MB/s-with")
	b.ReportMetric(on.rate/off.rate, "ratio")
	b.ReportMetric(on.cpuPerGB/off.cpuPerGB, "cpu-ratio")
	b.ReportMetric(float64(e.RingDrops), "drops")
	b.ReportMetric(float64(e.Events)/(rounds*length.Seconds()), "events/s")
	b.Logf("without probes %.0f MB/s, with %.0f MB/s: ratio %.3f (cost %.1f%%); workload CPU per GB %.2fs -> %.2fs (x%.3f); %d events (%d read), %d ring drops; copied %d of %d bytes",
		off.rate/1e6, on.rate/1e6, on.rate/off.rate, 100*(1-on.rate/off.rate), off.cpuPerGB, on.cpuPerGB, on.cpuPerGB/off.cpuPerGB,
		e.KernelEvents, e.Events, e.RingDrops, e.CopiedBytes, e.CallBytes)
}

func addEBPFStats(a, b *capture.EBPFStats) *capture.EBPFStats {
	if a == nil {
		a = &capture.EBPFStats{}
	}
	a.Events += b.Events
	a.KernelEvents += b.KernelEvents
	a.RingDrops += b.RingDrops
	a.CallBytes += b.CallBytes
	a.CopiedBytes += b.CopiedBytes
	return a
}
