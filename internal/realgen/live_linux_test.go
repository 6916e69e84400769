//go:build linux

package realgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realkafka"
)

// liveScenario is the scenario TestLiveReal runs: joins one by one under
// the initial delay, a leave, a SIGKILL and its expiry, auto and sync
// commits; about 30 s of clients.
const liveScenario = "r_joins"

// TestLiveReal runs a real-Kafka scenario (liveScenario: a 3-node Kafka
// 4.4.0 cluster behind its relays, Java clients) while two kwire live
// processes, the binary an operator runs, watch it:
//
//   - lo: kwire live -i lo on the relayed client ports (the clients' side
//     of each relay; loopback also carries the relays' own connections to
//     the JVMs, on other ports), saving the packets with -w. Its story
//     must equal kwire analyze's of the file it wrote, and both must be
//     exact against the broker's truth.
//   - ebpf: kwire live --ebpf on the broker JVMs (--comm java) and the
//     ports they listen on behind the relays: the brokers' own system
//     calls. The brokers send Fetch record data with sendfile, which the
//     probes see the size of, never the bytes: the story, commits and
//     hazards must still be exact against the truth, and the bytes the
//     decoder did not get must be counted, equal to the record bytes of
//     the Fetch responses on the wire (the lo capture).
//
// It needs root (AF_PACKET, eBPF), Java and the Kafka jars: it skips
// saying what is missing, and fails instead under CI=true.
func TestLiveReal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real Kafka cluster and Java clients for about a minute")
	}
	if why := noPacketCapture(); why != "" {
		skipOrFail(t, why)
	}
	ebpfWhy := noEBPF()
	if _, err := gen.FindJavaDriver(); err != nil {
		skipOrFail(t, err.Error())
	}
	s, ok := Lookup(liveScenario)
	if !ok {
		t.Fatalf("no scenario %s", liveScenario)
	}
	kwire := realkafka.BuildKwire(t)
	dir, err := os.MkdirTemp("", "kwire-livereal-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kwire live's outputs, the capture it wrote and the relays' are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	loCapture := filepath.Join(dir, "lo.pcapng")
	var lo, eb *kwireLive
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	truth, err := Run(ctx, s, dir, Options{Logf: t.Logf, Watch: func(ctx context.Context, c *realkafka.Cluster) (func() error, error) {
		var err error
		lo, err = startKwireLive(ctx, kwire, dir, "lo", "-i", "lo", "--port", portList(c.Ports(realkafka.ListenerPlaintext)), "-w", loCapture)
		if err != nil {
			return nil, err
		}
		if ebpfWhy == "" {
			eb, err = startKwireLive(ctx, kwire, dir, "ebpf", "--ebpf", "--comm", "java", "--port", portList(c.BackendPorts(realkafka.ListenerPlaintext)))
			if err != nil {
				return nil, errors.Join(err, lo.stop())
			}
		}
		t.Logf("kwire live on lo: %s", lo.status)
		if eb != nil {
			t.Logf("kwire live --ebpf: %s", eb.status)
		}
		return func() error {
			var err error
			if eb != nil {
				err = eb.stop()
			}
			return errors.Join(err, lo.stop())
		}, nil
	}})
	if errors.Is(err, realkafka.ErrMissing) {
		skipOrFail(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ran with kwire live watching in %v", liveScenario, time.Since(start).Round(time.Second))
	wire := fetchRecordBytes(t, loCapture, truth.Ports)
	if wire.recordBytes == 0 {
		t.Fatalf("no Fetch response on lo carries records (%d responses): the consumers read %s's records, their bytes must be there", wire.responses, liveScenario)
	}
	offline := analyze(t, kwire, loCapture, truth.Ports, truth.KwireArgs...)
	t.Run("lo", func(t *testing.T) {
		live := story(t, "kwire live -i lo", lo.out)
		if d := diffLines(storyLines(offline), storyLines(live)); d != "" {
			t.Errorf("kwire live's story vs kwire analyze's of the packets it saved (-analyze +live):\n%s", d)
		}
		t.Run("live", func(t *testing.T) { checkTruth(t, liveScenario, *truth, live) })
		t.Run("analyze", func(t *testing.T) { checkTruth(t, liveScenario, *truth, offline) })
		st := lastStatsLine(t, lo.out)
		t.Logf("lo: %d packets, %d Fetch responses with %d record bytes; kernel drops %d, gaps %d",
			st.Capture.Packets, wire.responses, wire.recordBytes, st.Capture.Live.KernelDrops, st.Decode.Gaps)
	})
	t.Run("ebpf", func(t *testing.T) {
		if ebpfWhy != "" {
			skipOrFail(t, ebpfWhy)
		}
		ebpf := story(t, "kwire live --ebpf", eb.out)
		if d := diffLines(storyLines(offline), storyLines(ebpf)); d != "" {
			t.Errorf("kwire live --ebpf's story vs kwire analyze's of the packets on lo (-analyze +ebpf):\n%s", d)
		}
		checkTruth(t, liveScenario, *truth, ebpf)
		st := lastStatsLine(t, eb.out)
		e := st.Capture.EBPF
		t.Logf("ebpf: %d calls moving %d bytes, %d copied; %d bytes sent by sendfile, %d left by --snap; decoder: %d bytes not copied, %d of them record bytes, %d frames cut elsewhere; ring drops %d",
			e.Calls, e.CallBytes, e.CopiedBytes, e.SendfileBytes, e.SnapBytes, st.Decode.NotCopiedBytes, st.Decode.RecordsNotCopiedBytes, st.Decode.NotCopiedFrames, e.RingDrops)
		if e.RingDrops != 0 {
			t.Errorf("%d probe events dropped with the ring buffer full", e.RingDrops)
		}
		if e.SendfileBytes != wire.recordBytes {
			t.Errorf("the brokers sent %d bytes with sendfile (probe count); the Fetch responses on the wire hold %d record bytes", e.SendfileBytes, wire.recordBytes)
		}
		if st.Decode.RecordsNotCopiedBytes != int64(wire.recordBytes) || st.Decode.NotCopiedFrames != 0 {
			t.Errorf("the decoder counted %d record bytes not copied and %d frames cut outside their records; the Fetch responses on the wire hold %d record bytes, all sent with sendfile",
				st.Decode.RecordsNotCopiedBytes, st.Decode.NotCopiedFrames, wire.recordBytes)
		}
	})
}

// skipOrFail skips the test saying why, or fails it under CI=true, where
// every real-Kafka test must run.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and this test cannot run: %s", why)
	}
	t.Skip(why)
}

// noPacketCapture says why this process cannot capture packets, "" when
// it can.
func noPacketCapture() string {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		return fmt.Sprintf("kwire live -i lo needs root or CAP_NET_RAW (AF_PACKET socket: %v)", err)
	}
	unix.Close(fd)
	return ""
}

// noEBPF says why kwire's eBPF probes cannot run here, "" when they can.
func noEBPF() string {
	ports, err := capture.ParsePorts("9092")
	if err != nil {
		return err.Error()
	}
	src, err := capture.OpenEBPF(nil, &capture.Options{Ports: ports})
	if err != nil {
		return fmt.Sprintf("kwire live --ebpf cannot run here (root on a BTF kernel, Linux 5.8+): %v", err)
	}
	src.Close()
	return ""
}

// kwireLive is a kwire live process: its NDJSON goes to out once it
// stopped.
type kwireLive struct {
	name   string
	cmd    *exec.Cmd
	stdout *os.File
	status string // its "capturing on" line
	stderr bytes.Buffer
	mu     sync.Mutex
	done   chan error
	out    []byte
}

// startKwireLive starts kwire live --json args (its output in dir) and
// returns once it is capturing.
func startKwireLive(ctx context.Context, kwire, dir, name string, args ...string) (*kwireLive, error) {
	stdout, err := os.Create(filepath.Join(dir, name+".ndjson"))
	if err != nil {
		return nil, err
	}
	l := &kwireLive{name: name, stdout: stdout, done: make(chan error, 1)}
	l.cmd = exec.Command(kwire, append([]string{"live", "--json"}, args...)...)
	l.cmd.Stdout = stdout
	pr, pw := io.Pipe()
	l.cmd.Stderr = pw
	if err := l.cmd.Start(); err != nil {
		stdout.Close()
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l.mu.Lock()
			l.stderr.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "kwire: capturing on") {
				ready <- sc.Text()
			}
		}
	}()
	go func() {
		err := l.cmd.Wait()
		pw.Close()
		l.done <- err
	}()
	select {
	case l.status = <-ready:
		return l, nil
	case err := <-l.done:
		stdout.Close()
		return nil, fmt.Errorf("kwire live %s exited before capturing (%v): %s", name, err, l.errors())
	case <-ctx.Done():
		l.cmd.Process.Kill()
		stdout.Close()
		return nil, fmt.Errorf("kwire live %s: waiting until it captures: %w", name, ctx.Err())
	}
}

func (l *kwireLive) errors() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.String()
}

// stop sends SIGINT, as a user's Ctrl-C, waits for the summary and reads
// the output.
func (l *kwireLive) stop() error {
	if err := l.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("kwire live %s: %w", l.name, err)
	}
	var err error
	select {
	case err = <-l.done:
	case <-time.After(time.Minute):
		l.cmd.Process.Kill()
		err = fmt.Errorf("did not stop within a minute of SIGINT")
	}
	l.stdout.Close()
	if err != nil {
		return fmt.Errorf("kwire live %s: %w: %s", l.name, err, l.errors())
	}
	l.out, err = os.ReadFile(l.stdout.Name())
	return err
}

// statsLine is what these tests read of kwire's last stats line.
type statsLine struct {
	Capture struct {
		Packets uint64            `json:"packets"`
		Live    capture.LiveStats `json:"live"`
		EBPF    capture.EBPFStats `json:"ebpf"`
	} `json:"capture"`
	Decode decode.Stats `json:"decode"`
}

// lastStatsLine reads kwire's last stats line (the one written at exit).
func lastStatsLine(t *testing.T, out []byte) statsLine {
	t.Helper()
	var st statsLine
	found := false
	for _, l := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(l, []byte(`"type":"stats"`)) {
			st = statsLine{}
			if err := json.Unmarshal(l, &st); err != nil {
				t.Fatalf("stats line: %v", err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("kwire live wrote no stats line")
	}
	return st
}

// storyLines is what kwire live and kwire analyze must both tell of the
// same packets, a line per item: each group's type, state, generation and
// leader; each generation's protocol, leader, members and assignments;
// each member's client, status, reason and generation; each partition's
// owner, committed offset, commits, end offset and lag; each hazard; each
// coordinator event.
func storyLines(r kwireRun) []string {
	s, coords := r.snap, r.coords
	var lines []string
	add := func(kind string, v any) {
		b, _ := json.Marshal(v)
		lines = append(lines, kind+" "+string(b))
	}
	for _, g := range s.Groups {
		add("group", []any{g.Group, g.GroupType, g.State, g.Generation, g.Leader, g.Protocol})
		for _, ge := range g.Generations {
			ms := map[string]string{}
			for _, m := range ge.Members {
				ms[m.MemberID] = assignmentString(m.Assignment)
			}
			add("generation", []any{g.Group, ge.Generation, ge.Protocol, ge.Leader, ms})
		}
		for _, m := range g.Members {
			add("member", []any{g.Group, m.MemberID, m.ClientID, m.Status, m.Reason, m.Generation, assignmentString(m.Assignment)})
		}
		for _, p := range g.Partitions {
			var commits []string
			for _, c := range p.Commits {
				commits = append(commits, fmt.Sprintf("%s@%d:%d:%s", c.MemberID, c.Generation, c.Offset, c.Outcome))
			}
			add("partition", []any{g.Group, p.Topic, p.Partition, p.Owner, p.Committed, p.CommittedGeneration, commits, p.CommitsDropped, p.EndOffset, p.Lag})
		}
	}
	for _, h := range s.Hazards {
		add("hazard", []any{h.Severity, h.Kind, h.Group, h.MemberID, h.Summary})
	}
	for _, c := range coords {
		add("coordinator", []any{c.Group, c.NodeID, c.ErrorCode})
	}
	slices.Sort(lines)
	return lines
}

// diffLines is a (-want +got) diff of two sorted line lists.
func diffLines(want, got []string) string {
	var b strings.Builder
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i] < got[j]:
			fmt.Fprintf(&b, "-%s\n", want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			fmt.Fprintf(&b, "+%s\n", got[j])
			j++
		default:
			i++
			j++
		}
	}
	return b.String()
}

// wireFetches are the Fetch responses of a capture file.
type wireFetches struct {
	responses   int
	recordBytes uint64 // their partitions' record data, in bytes
	anomalies   []string
}

func (w *wireFetches) Exchange(e *decode.Exchange) {
	resp, ok := e.Resp.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	w.responses++
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			w.recordBytes += uint64(len(p.RecordBatches))
		}
	}
}

func (w *wireFetches) Anomaly(a *decode.Anomaly) {
	w.anomalies = append(w.anomalies, fmt.Sprintf("%s: %s", a.Kind, a.Detail))
}

// fetchRecordBytes decodes the capture file at path (ports: the brokers')
// and sums the record data of its Fetch responses.
func fetchRecordBytes(t *testing.T, path string, ports []int) *wireFetches {
	t.Helper()
	ps, err := capture.ParsePorts(portList(ports))
	if err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, &capture.Options{Ports: ps})
	if err != nil {
		t.Fatal(err)
	}
	var w wireFetches
	dec := decode.New(&w, nil)
	if err := src.Run(context.Background(), dec); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if len(w.anomalies) > 0 {
		t.Logf("%s: %d decode anomalies, the first: %s", path, len(w.anomalies), w.anomalies[0])
	}
	return &w
}
