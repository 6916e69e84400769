package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/jsonout"
	"github.com/kwire/kwire/metrics"
)

const liveHelp = `Usage: kwire live -i IFACE [flags]

Capture Kafka traffic on a network interface (Linux AF_PACKET, no libpcap;
needs root or CAP_NET_RAW) and analyse it as it happens: the same pipeline
as kwire analyze. Only TCP to or from --port reaches kwire (a BPF filter in
the kernel). -i any captures on every interface; on loopback each packet is
taken once.

Output: group events (generation, member, commit, coordinator, hazard) and
anomalies as they happen, a "stats" line every --stats-every with every
loss counted (kernel ring drops, gaps, resyncs, undecodable frames,
unmatched responses, connections evicted), and on SIGINT/SIGTERM the final
summary and stats, as kwire analyze prints them (exit status 0). On a
terminal the lines are human-readable; with --json (or when stdout is not
a terminal) NDJSON, flushed line by line (schema: docs/schema.md).

With --tui: a terminal UI instead of output lines (groups, group detail,
hazards, traffic; ? lists the keys), redrawn four times a second from
snapshots: the capture never waits for the screen, which drops frames,
never packets. The status bar shows the interface (or ebpf), packets and
bytes, every loss counter (kernel drops, gaps, resyncs) and events/s. q
(or SIGINT/SIGTERM) stops the capture; once the terminal is restored,
kwire writes the messages it held meanwhile and the final summary and
stats. --tui excludes --json and --exchanges.

--report FILE writes an HTML report of what was captured (as kwire
analyze --html does: one file, opens offline) at exit, and whenever kwire
gets SIGUSR1 (kill -USR1 PID): the picture so far, replaced atomically.

--metrics ADDR serves Prometheus metrics at http://ADDR/metrics, every
family listed in docs/metrics.md: consumer group members, committed
offsets, lag and end offsets under kafka_exporter's names
(kafka_consumergroup_lag{consumergroup,topic,partition}...); per group
generation, rebalances, commits, hazards, records and bytes fetched; per
API and broker requests, errors and latency; capture health counters; the
time of the latest packet. A Grafana dashboard and alert rules ship in
deploy/. 127.0.0.1:9464 serves this host only; :9464 (every interface)
lets anyone who can reach the host read them, without authentication:
group, topic and client names, hosts, traffic.
Bind it to an address only the Prometheus server reaches.

Once its sockets, probes, listener and files are open, kwire live drops
every capability it no longer needs, for the rest of the run (the status
line says which it kept): all of them with -i; CAP_DAC_OVERRIDE with
--rotate-mb (the next files), CAP_DAC_READ_SEARCH with --tls-keylog (the
key logs are re-read); CAP_BPF with --ebpf; with --ebpf --tls also
CAP_SYS_ADMIN, CAP_PERFMON and CAP_SYS_PTRACE (processes that start later
are found and probed).

Examples:
  kwire live -i any --port 9092
  kwire live -i eth0 --port 9092-9094 --json | jq 'select(.type=="generation")'
  kwire live -i lo --port 19092 --metrics 127.0.0.1:9464 -w kafka.pcapng --rotate-mb 1024 --rotate-keep 20
  kwire live -i eth0 --port 9092 --tui
  kwire live -i any --port 9092 --report /var/tmp/kafka-report.html

Flags:
`

// liveFlags are kwire live's flags.
type liveFlags struct {
	common       commonFlags
	iface        string
	ringMB       int
	metrics      metricsFlags
	write        string
	rotateMB     int
	rotateKeep   int
	rotateMaxAge time.Duration
	statsEvery   time.Duration
	idleTimeout  time.Duration
	maxConns     int
	maxBufferMB  int
	maxMemoryMB  int
	duration     time.Duration
	exchanges    bool
	tui          bool
	report       string
	probe        probeFlags   // --ebpf (live_ebpf.go)
	publish      publishFlags // --publish (publish.go)
}

func (f *liveFlags) register(fs *flag.FlagSet) {
	f.common.register(fs)
	// The kernel filter is built from --port: a port given replaces the
	// default 9092 instead of adding to it.
	fs.StringVar(&f.iface, "i", "", "network `IFACE` to capture on (any: all of them)")
	fs.IntVar(&f.ringMB, "ring-mb", 64, "kernel ring size in `MiB`: packets arriving while it is full are dropped and counted")
	f.metrics.register(fs)
	fs.StringVar(&f.write, "w", "", "also save the captured packets to `FILE` (pcapng), a new file readable by its owner only (payloads and passwords are in it): never an existing file, nor through a symbolic link")
	fs.IntVar(&f.rotateMB, "rotate-mb", 0, "with -w, start a new file (FILE.1.pcapng, ...) every `MiB` written; 0: one file")
	fs.IntVar(&f.rotateKeep, "rotate-keep", 0, "with --rotate-mb, keep at most `N` files, the one being written included: the oldest are deleted (as tcpdump's -W; 0: keep all)")
	fs.DurationVar(&f.rotateMaxAge, "rotate-max-age", 0, "with --rotate-mb, delete a file once it has been finished this long (e.g. 24h; 0: never)")
	fs.DurationVar(&f.statsEvery, "stats-every", 10*time.Second, "write a stats line this often")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 5*time.Minute, "forget a connection after this long without a packet")
	fs.IntVar(&f.maxConns, "max-conns", 100000, "most connections tracked at once; packets of more are dropped and counted")
	fs.IntVar(&f.maxBufferMB, "max-reorder-mb", 125, "most out-of-order bytes held for reassembly, in `MiB`, a quarter of it per connection; beyond it the missing bytes become counted gaps (buffer_limit_gaps); the same default as read and analyze")
	fs.IntVar(&f.maxMemoryMB, "max-memory-mb", 0, "soft limit on kwire's memory, in `MiB`: the garbage collector works harder near it, and memory freed after a burst goes back to the system (0: --max-buffer + --max-reorder-mb + 256 MiB; -1: no limit; GOMEMLIMIT, when set, wins)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long, as on SIGINT (0: run until interrupted)")
	fs.BoolVar(&f.exchanges, "exchanges", false, "also write a line per exchange, as kwire read does")
	fs.StringVar(&f.report, "report", "", "write an HTML report of the capture to `FILE` at exit and on SIGUSR1 (one file, opens offline; readable by its owner only)")
	fs.BoolVar(&f.tui, "tui", false, "show the terminal UI (groups, group detail, hazards, traffic, loss counters; ? lists the keys) instead of writing events; q stops the capture and writes the summary")
	f.probe.register(fs)
	f.publish.register(fs)
}

// replacePorts is a --port flag whose first use replaces the default set;
// later uses add to it.
type replacePorts struct {
	p   *capture.Ports
	set bool
}

func (r *replacePorts) String() string {
	if r.p == nil {
		return ""
	}
	return r.p.String()
}

func (r *replacePorts) Set(s string) error {
	var p capture.Ports
	if r.set {
		p = *r.p
	}
	if err := p.Set(s); err != nil {
		return err
	}
	*r.p, r.set = p, true
	return nil
}

func cmdLive(args []string, stdout, stderr io.Writer) error {
	var f liveFlags
	fs := newFlagSet("live", liveUsage(), stderr)
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kwire live: unexpected argument %q (files are for kwire analyze)\n\n", fs.Arg(0))
	case f.probe.check(&f) != "":
		fmt.Fprintf(stderr, "kwire live: %s\n\n", f.probe.check(&f))
	case f.checkTUI() != "":
		fmt.Fprintf(stderr, "kwire live: %s\n\n", f.checkTUI())
	case f.common.brokerSettingsProblem() != "":
		fmt.Fprintf(stderr, "kwire live: %s\n\n", f.common.brokerSettingsProblem())
	case (f.rotateKeep != 0 || f.rotateMaxAge != 0) && (f.rotateMB == 0 || f.write == ""):
		fmt.Fprint(stderr, "kwire live: --rotate-keep and --rotate-max-age need -w FILE and --rotate-mb\n\n")
	case f.rotateKeep < 0, f.rotateMaxAge < 0:
		fmt.Fprint(stderr, "kwire live: --rotate-keep and --rotate-max-age must not be negative\n\n")
	case f.iface == "" && !f.probe.ebpf:
		fmt.Fprintf(stderr, "kwire live: -i IFACE is required (interfaces here: %s)\n\n", strings.Join(capture.Interfaces(), ", "))
	case f.ringMB < 1, f.rotateMB < 0, f.statsEvery <= 0, f.idleTimeout <= 0, f.maxConns < 1, f.maxBufferMB < 1:
		fmt.Fprint(stderr, "kwire live: --ring-mb, --stats-every, --idle-timeout, --max-conns and --max-reorder-mb must be positive\n\n")
	default:
		ctx, stop := runContext(f.duration)
		defer stop()
		return runLive(ctx, &f, stdout, stderr)
	}
	fs.Usage()
	return errUsage
}

// errNoCapNetRaw is what a user without the capability is told.
const errNoCapNetRaw = "live capture needs CAP_NET_RAW: run as root or setcap cap_net_raw+ep kwire, or capture with tcpdump and use kwire analyze"

// runLive captures until ctx is done, then writes the summary.
func runLive(ctx context.Context, f *liveFlags, stdout, stderr io.Writer) error {
	if f.publish.kafka.url != "" {
		f.publish.kafka.warn(stderr)
		if err := f.publish.check(ctx); err != nil {
			return err
		}
	}
	if f.tui {
		if err := checkTerminal(); err != nil {
			return err
		}
	}
	if !f.tui {
		f.common.noteNDJSON("live", stdout, stderr)
	}
	if f.probe.ebpf {
		return runLiveEBPF(ctx, f, stdout, stderr)
	}
	p := newPipeline(&f.common, stdout, f.exchanges)
	p.out = jsonout.New(stdout, &jsonout.Options{Text: p.text, FullIDs: f.common.fullIDs, LineFlush: true})

	var pw *capture.PcapngWriter
	lo := &capture.LiveOptions{Interface: f.iface, RingBytes: f.ringMB << 20, TickEvery: f.tickEvery()}
	if f.write != "" {
		var err error
		rot := &capture.Rotation{Bytes: int64(f.rotateMB) << 20, Keep: f.rotateKeep, MaxAge: f.rotateMaxAge}
		if pw, err = capture.CreatePcapng(f.write, f.iface, rot); err != nil {
			return fmt.Errorf("-w: %w", err)
		}
		lo.Write = pw
	}
	src, err := capture.OpenLive(lo, &capture.Options{
		Ports: f.common.ports, IdleTimeout: f.idleTimeout, MaxConns: f.maxConns,
		// Reassembly pages are 1900 bytes; a connection may use a quarter.
		MaxBufferedPagesTotal: f.maxBufferMB << 20 / 1900, MaxBufferedPagesPerConn: max(1, f.maxBufferMB<<20/1900/4),
	})
	if err != nil {
		if pw != nil {
			pw.Close()
			os.Remove(f.write)
		}
		var errno syscall.Errno
		if errors.Is(err, capture.ErrPermission) && errors.As(err, &errno) {
			return fmt.Errorf("%s (%v)", errNoCapNetRaw, errno)
		}
		return err
	}

	r := &liveRun{p: p, src: src, stderr: stderr, statsEvery: f.statsEvery, ports: f.common.ports.String()}
	status := fmt.Sprintf("kwire: capturing on %s, kernel filter: %s, ring %d MiB", src.Interface(), src.Filter(), f.ringMB)
	if pw != nil {
		status += ", saving to " + f.write
	}
	ran, runErr := r.serve(ctx, f, status, src.Run)
	if !ran { // --metrics could not listen
		src.Close()
		if pw != nil {
			pw.Close()
		}
		return runErr
	}
	if pw != nil {
		if err := pw.Close(); err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("-w: %w", err))
		}
		deleted := ""
		if n := pw.Deleted(); n > 0 {
			deleted = fmt.Sprintf(" (%d older files deleted: --rotate-keep, --rotate-max-age)", n)
		}
		fmt.Fprintf(stderr, "kwire: saved %d packets to %s%s\n", src.Stats().Live.PacketsWritten, strings.Join(pw.Files(), ", "), deleted)
	}
	return runErr
}

// serve runs a live capture through r's pipeline: metrics (when asked)
// and the status line first, then run until ctx is done (a signal or
// --duration is the normal end) or, with --tui, the user quits the UI,
// then the summary and final stats. ran is false when --metrics cannot
// listen or --report's directory takes no file: then nothing ran, and the
// caller closes its source.
func (r *liveRun) serve(ctx context.Context, f *liveFlags, status string, run func(context.Context, capture.Sink) error) (ran bool, err error) {
	entry, err := r.p.entry(&f.common, true, r.stderr)
	if err != nil {
		return false, err
	}
	r.clock.next = entry
	if f.report != "" {
		r.p.html = newHTMLReport(f.report, []string{r.src.Interface()}, true)
		if err := r.p.html.check(); err != nil { // now, not at exit
			return false, err
		}
		r.usr1 = make(chan os.Signal, 1)
		signal.Notify(r.usr1, syscall.SIGUSR1)
		defer signal.Stop(r.usr1)
	}
	if f.metrics.addr != "" {
		r.metrics = metrics.New(f.metrics.options(f.common.limits.groups))
		r.p.tap = r.metrics
		srv, addr, err := serveMetrics(f.metrics.addr, r.metrics)
		if err != nil {
			return false, err
		}
		defer srv.Close()
		status += fmt.Sprintf(", metrics on http://%s/metrics", addr)
	}
	if f.publish.kafka.url != "" {
		if err := r.startPublish(f, &status); err != nil {
			return false, err
		}
	}
	if f.tui {
		r.openTUI(f)
	}
	// Everything privileged is open: sockets, eBPF programs, the
	// listener, -w's file, the terminal.
	status += r.dropLiveCaps(f)
	if r.p.html != nil {
		status += ", report to " + f.report + " at exit and on SIGUSR1"
	}
	fmt.Fprintln(r.stderr, status)
	defer limitMemory(f.memoryLimit())()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	start := time.Now()
	r.nextStats, r.hintAt = start.Add(f.statsEvery), start.Add(hintAfter)
	var runErr error
	if r.tui != nil {
		runErr = r.runTUI(ctx, cancel, run)
	} else {
		runErr = run(ctx, r)
	}
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		runErr = nil // stopped by a signal or --duration: the normal end
	}
	outErr := r.p.finish(r.clock.t, time.Now(), r.src.Stats(), true)
	if r.err != nil {
		outErr = nil // already reported
	}
	if r.metrics != nil {
		if folded := r.metrics.Folded(); folded != "" {
			fmt.Fprintln(r.stderr, "kwire: "+folded)
		}
	}
	return true, errors.Join(runErr, r.err, outErr, r.stopPublish())
}

// dropCaps says whether kwire live drops the capabilities it no longer
// needs once capturing (caps_linux.go). main sets it: tests run kwire live
// in their own process, whose capabilities the tests after them need.
var dropCaps bool

// hintAfter is how long kwire live waits for Kafka traffic before it says
// where else to look (a variable for tests).
var hintAfter = 10 * time.Second

// snapshotEvery is how often the metrics get the correlator's state (a
// snapshot copies it all).
const snapshotEvery = 2 * time.Second

// liveRun is the live capture's Sink: chunks go down the pipeline, ticks
// write the periodic stats, refresh the metrics and give the hint. All of
// it runs on the capture goroutine, which owns the decoder and correlator.
type liveRun struct {
	p          *pipeline
	src        liveSource
	metrics    *metrics.Exporter
	tui        *liveTUI // --tui (tui.go)
	clock      lastTime
	cancel     context.CancelFunc // stops the capture (output failed)
	stderr     io.Writer
	ports      string
	statsEvery time.Duration
	nextStats  time.Time
	nextSnap   time.Time
	hintAt     time.Time
	hinted     bool
	pub        *publisher // --publish (publish.go)
	own        *ownConns  // the publisher's connections, left out of the capture
	nextPub    time.Time
	drops      uint64         // kernel or ring drops given to the correlator
	nextDrops  time.Time      // when to look at them again
	usr1       chan os.Signal // --report: write it now
	err        error
}

// Chunk implements capture.Sink.
func (r *liveRun) Chunk(c *capture.Chunk) {
	if r.own != nil && r.own.skip(c) {
		return // --publish's own traffic (owntraffic.go)
	}
	if r.pub != nil && c.Kind == capture.Close && c.Reason == capture.CloseEOF {
		r.pub.stopping(time.Now()) // what the decoder gives now, it gives at the end
	}
	r.clock.Chunk(c)
}

// Tick implements capture.Ticker.
func (r *liveRun) Tick(now time.Time) {
	if r.p.tls != nil {
		r.p.tls.Tick(now) // chunks queued behind a connection waiting for its secrets
	}
	if r.tui != nil {
		r.tui.s.poll(false)
	}
	if !now.Before(r.nextStats) {
		r.nextStats = now.Add(r.statsEvery)
		r.p.out.Stats(now, r.p.captureStats(r.src.Stats()), r.p.dec.Stats())
		r.publishStats()
		if err := r.p.out.Flush(); err != nil && r.err == nil {
			r.err = fmt.Errorf("write output: %w", err)
			r.cancel()
		}
	}
	if r.pub != nil && !now.Before(r.nextPub) {
		r.nextPub = now.Add(publishEvery)
		r.pub.tick(maxTime(r.clock.t, now), false)
	}
	if !now.Before(r.nextDrops) {
		r.nextDrops = now.Add(time.Second)
		r.sourceLoss(now)
	}
	if r.metrics != nil && !now.Before(r.nextSnap) {
		r.nextSnap = now.Add(snapshotEvery)
		r.metrics.Stats(r.src.Stats(), r.p.dec.Stats())
		r.metrics.Snapshot(r.p.corr.Snapshot())
		r.metrics.LastPacket(r.clock.t)
	}
	select {
	case <-r.usr1: // nil without --report
		if err := r.p.writeReportNow(r.src.Stats(), now); err != nil {
			fmt.Fprintf(r.stderr, "kwire: %v\n", err)
		} else {
			fmt.Fprintf(r.stderr, "kwire: report written to %s (SIGUSR1)\n", r.p.html.path)
		}
	default:
	}
	if !r.hinted && !now.Before(r.hintAt) {
		r.hinted = true
		r.hint()
	}
}

// sourceLoss gives the correlator the kernel's (or eBPF ring's) new drops.
// They belong to no known connection: absence-based hazards over this
// stretch may rest on what was dropped.
func (r *liveRun) sourceLoss(now time.Time) {
	if st := r.src.Stats().Live; st != nil && st.KernelDrops > r.drops {
		at := r.clock.t
		if at.IsZero() {
			at = now
		}
		r.p.corr.SourceLoss(at, int64(st.KernelDrops-r.drops))
		r.p.written()
		r.drops = st.KernelDrops
	}
}

// hint says why nothing was decoded yet, when nothing was.
func (r *liveRun) hint() {
	cs, ds := r.src.Stats(), r.p.dec.Stats()
	ports := "port " + r.ports
	if r.ports == "" {
		ports = "any port"
	}
	switch {
	case ds.Requests > 0:
	case cs.TCPPackets == 0:
		fmt.Fprintf(r.stderr, "kwire: no TCP traffic on %s seen on %s in %s: is that the brokers' listener port (--port) and their interface (-i; any captures on all: %s)?\n",
			ports, r.src.Interface(), hintAfter, strings.Join(capture.Interfaces(), ", "))
	case ds.TLSConns > 0:
		fmt.Fprintf(r.stderr, "kwire: the traffic on %s is TLS, which kwire decodes only with the clients' key log (--tls-keylog FILE), the clients' plaintext (kwire live --ebpf --tls on their host) or a plaintext listener\n", ports)
	default:
		fmt.Fprintf(r.stderr, "kwire: %d TCP packets on %s in %s but no Kafka request decoded yet: is it a Kafka listener (--port)? (connections opened before the capture are picked up at their next request)\n",
			cs.TCPPackets, ports, hintAfter)
	}
}
