//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// The eBPF source against real processes: a kfake cluster, a producer and
// kgo consumer group members each run as a child process (this test
// binary re-executed, see TestMain), captured at once by the eBPF probes
// and by a packet capture on lo. Both captures must rebuild the same
// group; the eBPF one must also name each member's process.

// childEnv names the child role to run instead of the tests; childArgs
// carries its JSON arguments.
const (
	childEnv  = "KWIRE_EBPF_TEST_CHILD"
	childArgs = "KWIRE_EBPF_TEST_ARGS"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role, os.Getenv(childArgs)))
	}
	os.Exit(m.Run())
}

// childSpec are a child's arguments.
type childSpec struct {
	Brokers    []string `json:"brokers,omitempty"`
	Topic      string   `json:"topic"`
	Partitions int32    `json:"partitions"`
	Group      string   `json:"group,omitempty"`
	ClientID   string   `json:"client_id,omitempty"`
	// RecordBytes is the traffic child's record size; ProduceOnly leaves
	// out its consumers.
	RecordBytes int  `json:"record_bytes,omitempty"`
	ProduceOnly bool `json:"produce_only,omitempty"`
	// TLS, when set, makes the broker listen with TLS and the clients
	// dial with it (ebpf_tls_linux_test.go).
	TLS *tlsSpec `json:"tls,omitempty"`
}

// runChild runs a child role until SIGTERM and returns its exit code. It
// writes "ready" (and for the broker its addresses) on stdout.
func runChild(role, args string) int {
	var a childSpec
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var err error
	switch role {
	case "broker":
		err = childBroker(ctx, a)
	case "producer":
		err = childProducer(ctx, a)
	case "member":
		err = childMember(ctx, a)
	case "jvm":
		err = childJVM(ctx)
	case "traffic":
		err = childTraffic(ctx, a)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
		return 1
	}
	return 0
}

func childBroker(ctx context.Context, a childSpec) error {
	opts := []kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(a.Partitions, a.Topic)}
	if a.TLS != nil {
		cfg, err := a.TLS.server()
		if err != nil {
			return err
		}
		opts = append(opts, kfake.TLS(cfg))
	}
	kf, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer kf.Close()
	fmt.Println("ready " + strings.Join(kf.ListenAddrs(), ","))
	<-ctx.Done()
	return nil
}

// childProducer writes a record to every partition every 20ms, 6 KB each:
// Produce requests and Fetch responses are bigger than the eBPF capture's
// copy limit (4 KiB per call), so their tails are gaps of known size.
func childProducer(ctx context.Context, a childSpec) error {
	tlsOpt, err := a.TLS.dial()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers...), kgo.ClientID(a.ClientID),
		kgo.DefaultProduceTopic(a.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), tlsOpt)
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := 0; ctx.Err() == nil; i++ {
		var rs []*kgo.Record
		for p := range a.Partitions {
			v := make([]byte, 6000) // random: kgo compresses batches
			rand.Read(v)
			rs = append(rs, &kgo.Record{Partition: p, Value: v})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil && ctx.Err() == nil {
			return err
		}
		if i == 0 {
			fmt.Println("ready")
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// childMember is a group member committing what it polls; it is ready
// after its first commit with partitions assigned, and leaves the group
// on SIGTERM.
func childMember(ctx context.Context, a childSpec) error {
	tlsOpt, err := a.TLS.dial()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers...), kgo.ClientID(a.ClientID), tlsOpt,
		kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(a.Topic), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	ready := false
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			break
		}
		if len(fs.Records()) == 0 {
			continue
		}
		if err := cl.CommitUncommittedOffsets(ctx); err == nil && !ready {
			ready = true
			fmt.Println("ready")
		}
	}
	return nil
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	ready chan string // the ready line's argument
	done  chan struct{}
}

func startChild(t *testing.T, role string, a childSpec) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return startChildAs(t, exe, role, a)
}

// startChildAs runs the child from exe, maybe a symlink to the test
// binary: the process's comm is the name it is started by.
func startChildAs(t *testing.T, exe, role string, a childSpec) *child {
	t.Helper()
	b, _ := json.Marshal(a)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childArgs+"="+string(b))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, ready: make(chan string, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ready"); ok {
				select {
				case c.ready <- strings.TrimSpace(rest):
				default:
				}
			}
		}
		cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

const waitTimeout = 60 * time.Second

func (c *child) waitReady(t *testing.T, what string) string {
	t.Helper()
	select {
	case s := <-c.ready:
		return s
	case <-c.done:
		t.Fatalf("%s exited before it was ready", what)
	case <-time.After(waitTimeout):
		t.Fatalf("%s not ready after %s", what, waitTimeout)
	}
	return ""
}

// stop asks the child to finish (SIGTERM) and waits for it.
func (c *child) stop(t *testing.T) {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		c.cmd.Process.Kill()
		<-c.done
		t.Errorf("child pid %d did not stop on SIGTERM: killed", c.cmd.Process.Pid)
	}
}

func (c *child) pid() uint32 { return uint32(c.cmd.Process.Pid) }

// openEBPF opens the eBPF source or skips the test with the reason.
func openEBPF(t testing.TB, eo *capture.EBPFOptions, ports string) *capture.EBPF {
	t.Helper()
	p, err := capture.ParsePorts(ports)
	if err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenEBPF(eo, &capture.Options{Ports: p})
	if errors.Is(err, capture.ErrEBPFUnavailable) {
		t.Skipf("eBPF probes cannot run here (CI runs this as root on a BTF kernel): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// ports returns the port list of addrs (host:port).
func portsOf(addrs string) string {
	var ps []string
	for _, a := range strings.Split(addrs, ",") {
		ps = append(ps, a[strings.LastIndexByte(a, ':')+1:])
	}
	return strings.Join(ps, ",")
}

// connLog collects the connections of a source and whether a Kafka
// request was decoded on them.
type connLog struct {
	dec      *decode.Decoder
	conns    map[uint64]*capture.Conn
	requests map[uint64]int
}

func newConnLog() *connLog {
	l := &connLog{conns: map[uint64]*capture.Conn{}, requests: map[uint64]int{}}
	l.dec = decode.New(l, nil)
	return l
}

func (l *connLog) Chunk(c *capture.Chunk)      { l.conns[c.Conn.ID] = c.Conn; l.dec.Chunk(c) }
func (l *connLog) Exchange(e *decode.Exchange) { l.requests[e.Conn.ID]++ }
func (l *connLog) Anomaly(*decode.Anomaly)     {}

// TestEBPFFilters captures with a pid filter and a comm filter at once
// (two sets of probes): each must see only its process's connections.
func TestEBPFFilters(t *testing.T) {
	const topic, parts = "filtered", 3
	broker := startChild(t, "broker", childSpec{Topic: topic, Partitions: parts})
	addrs := broker.waitReady(t, "broker")
	brokers := strings.Split(addrs, ",")
	prod := startChild(t, "producer", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, ClientID: "producer"})
	prod.waitReady(t, "producer")

	byPID := openEBPF(t, &capture.EBPFOptions{PID: prod.pid()}, portsOf(addrs))
	const comm = "kwire-filtered"
	byComm := openEBPF(t, &capture.EBPFOptions{Comm: comm}, portsOf(addrs))
	logs := map[string]*connLog{"pid": newConnLog(), "comm": newConnLog()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, src := range map[string]*capture.EBPF{"pid": byPID, "comm": byComm} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := src.Run(ctx, logs[name]); err != context.Canceled {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), comm)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	member := startChildAs(t, link, "member", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, Group: "g", ClientID: "m"})
	member.waitReady(t, "member")
	member.stop(t)
	prod.stop(t) // its last produce requests are in flight: no need to wait for them
	cancel()
	wg.Wait()

	for name, want := range map[string]func(*capture.Process) bool{
		"pid":  func(p *capture.Process) bool { return p.PID == prod.pid() },
		"comm": func(p *capture.Process) bool { return p.Comm == comm && p.PID == member.pid() },
	} {
		l, requests := logs[name], 0
		for id, c := range l.conns {
			if c.Process == nil || !want(c.Process) {
				t.Errorf("%s filter: connection %d %s -> %s of process %+v", name, id, c.Client, c.Server, c.Process)
			}
			requests += l.requests[id]
		}
		if requests == 0 {
			t.Errorf("%s filter: no request decoded on %d connections", name, len(l.conns))
		}
	}
}
