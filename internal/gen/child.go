package gen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ChildFunc runs a client in a child process. It must return when ctx is
// done (SIGTERM, or the deadline), closing its clients gracefully.
type ChildFunc func(ctx context.Context, env *ChildEnv) error

var (
	childMu  sync.Mutex
	children = map[string]ChildFunc{}
)

// RegisterChild makes fn startable by name with Cluster.StartChild.
func RegisterChild(name string, fn ChildFunc) {
	childMu.Lock()
	defer childMu.Unlock()
	if _, dup := children[name]; dup {
		panic("gen: child registered twice: " + name)
	}
	children[name] = fn
}

// childEnvVar carries a childSpec from parent to child.
const childEnvVar = "KWIRE_GEN_CHILD"

type childSpec struct {
	Brokers   []string        `json:"brokers"`
	Args      json.RawMessage `json:"args"`
	CountsOut string          `json:"counts_out"`
	Deadline  time.Time       `json:"deadline"`
}

// ChildEnv is what a ChildFunc gets.
type ChildEnv struct {
	// Brokers are the cluster's listen addresses.
	Brokers []string
	// Args are the JSON arguments StartChild was given.
	Args  json.RawMessage
	hooks *hooks
}

// Kgo returns a kgo client seeded with the cluster whose counts go back to
// the parent's truth when the child exits cleanly.
func (e *ChildEnv) Kgo(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.Brokers...), kgo.WithHooks(e.hooks)}, opts...)...)
}

// stdoutMu keeps a child's stdout lines (ready, group reports) whole.
var stdoutMu sync.Mutex

func writeLine(b []byte) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// Ready tells the parent the child is up (Child.Ready closes). Call it once.
func (e *ChildEnv) Ready() { writeLine([]byte("ready")) }

// report sends a group fact to the parent as one JSON line, at once, so
// that a child killed later has reported everything up to its death.
func (e *ChildEnv) report(r groupReport) {
	if r.Nanos == 0 {
		r.Nanos = time.Now().UnixNano()
	}
	if b, err := json.Marshal(r); err == nil {
		writeLine(b)
	}
}

// ChildMain runs the child named by args[0] (kwire-gen child NAME) with
// the spec from the environment, and returns the process exit code.
// kwire-gen's main and the package's TestMain call it.
func ChildMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: kwire-gen child NAME (started by the generator, not by hand)")
		return 2
	}
	childMu.Lock()
	fn := children[args[0]]
	childMu.Unlock()
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnvVar)), &spec); err != nil || fn == nil {
		fmt.Fprintf(os.Stderr, "kwire-gen child %s: unknown child or bad %s: %v\n", args[0], childEnvVar, err)
		return 2
	}
	ctx, cancel := context.WithDeadline(context.Background(), spec.Deadline)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := &ChildEnv{Brokers: spec.Brokers, Args: spec.Args, hooks: newHooks()}
	err := fn(ctx, env)
	if b, merr := json.Marshal(env.hooks.snapshot()); merr == nil {
		_ = os.WriteFile(spec.CountsOut, b, 0o600)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "kwire-gen child %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// Child is a client running in a child process (kwire-gen re-executed with
// its hidden child subcommand), so a scenario can kill or freeze it.
type Child struct {
	Name  string
	c     *Cluster
	cmd   *exec.Cmd
	out   string
	ready chan struct{}
	done  chan struct{}
	err   error
	once  sync.Once
}

// StartChild starts the registered child name with args (marshaled to
// JSON). The child dies with the generator (Linux: PR_SET_PDEATHSIG) and
// by ctx's deadline at the latest.
func (c *Cluster) StartChild(ctx context.Context, name string, args any) (*Child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "kwire-gen-child-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "child", name)
	stdout, err := startSpec(ctx, cmd, childSpec{Brokers: c.addrs, CountsOut: filepath.Join(dir, "counts.json")}, args)
	if err != nil {
		return nil, fmt.Errorf("start child %s: %w", name, err)
	}
	ch := &Child{Name: name, c: c, cmd: cmd, out: dir, ready: make(chan struct{}), done: make(chan struct{})}
	go ch.serve(stdout, c.groups.addLine, ch.collect)
	c.mu.Lock()
	c.children = append(c.children, ch)
	c.mu.Unlock()
	return ch, nil
}

// startSpec starts cmd, a child (a re-executed kwire-gen or the Java
// driver), with spec in its environment: args marshaled to JSON and ctx's
// deadline (a minute from now without one) added. The child's stderr is
// the generator's, and it dies with the generator (Linux:
// PR_SET_PDEATHSIG). It returns the child's stdout.
func startSpec(ctx context.Context, cmd *exec.Cmd, spec childSpec, args any) (io.ReadCloser, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	spec.Args = raw
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	spec.Deadline = deadline.UTC()
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), childEnvVar+"="+string(b))
	cmd.Stderr = os.Stderr
	setChildAttrs(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return stdout, nil
}

// serve reads a started child's stdout until it exits: "ready" closes
// Ready, JSON lines (group reports) go to line; then it waits for the
// process, runs finish (if any) and closes Done. Java children
// (child_java.go) speak the same protocol.
func (ch *Child) serve(stdout io.Reader, line func([]byte), finish func()) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		switch b := sc.Bytes(); {
		case string(b) == "ready":
			ch.once.Do(func() { close(ch.ready) })
		case len(b) > 0 && b[0] == '{':
			line(b) // a group report (ChildEnv.report)
		}
	}
	ch.err = ch.cmd.Wait()
	if finish != nil {
		finish()
	}
	close(ch.done)
}

// collect merges the child's counts into the truth, or notes their loss.
func (ch *Child) collect() {
	defer os.RemoveAll(ch.out)
	b, err := os.ReadFile(filepath.Join(ch.out, "counts.json"))
	var counts ClientCounts
	if err == nil {
		err = json.Unmarshal(b, &counts)
	}
	if err != nil {
		ch.c.Note("child %s (pid %d) ended without reporting its client-side counts (%v): they are not in requests_client/produced/fetch_batches",
			ch.Name, ch.cmd.Process.Pid, ch.err)
		return
	}
	if counts.Writes == nil {
		counts = newClientCounts()
	}
	ch.c.hooks.merge(counts)
}

// Pid is the child's process id.
func (ch *Child) Pid() int { return ch.cmd.Process.Pid }

// Ready is closed when the child called ChildEnv.Ready.
func (ch *Child) Ready() <-chan struct{} { return ch.ready }

// Done is closed when the child has exited and its counts are merged.
func (ch *Child) Done() <-chan struct{} { return ch.done }

// Signal sends sig to the child.
func (ch *Child) Signal(sig os.Signal) error { return ch.cmd.Process.Signal(sig) }

// Kill SIGKILLs the child: its connections are closed by the kernel
// (FIN or RST) with no LeaveGroup.
func (ch *Child) Kill() error { return ch.Signal(syscall.SIGKILL) }

// Stop freezes the child (SIGSTOP); Cont thaws it.
func (ch *Child) Stop() error { return ch.Signal(syscall.SIGSTOP) }

// Cont resumes a stopped child (SIGCONT).
func (ch *Child) Cont() error { return ch.Signal(syscall.SIGCONT) }

// startReady starts a child (StartChild) and waits until it is ready:
// who names it in errors, and ready says what being ready means
// ("owning partitions").
func (c *Cluster) startReady(ctx context.Context, name string, args any, who, ready string) (*Child, error) {
	ch, err := c.StartChild(ctx, name, args)
	if err != nil {
		return nil, err
	}
	select {
	case <-ch.Ready():
		return ch, nil
	case <-ch.Done():
		return nil, fmt.Errorf("%s exited before %s: %v", who, ready, ch.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("%s waited for %s: %w", who, ready, ctx.Err())
	}
}

// Wait waits for the child to exit and returns its exit error.
func (ch *Child) Wait(ctx context.Context) error {
	select {
	case <-ch.done:
		return ch.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Terminate asks the child to finish (SIGCONT then SIGTERM, so a stopped
// child can act on it) and waits; past ctx it SIGKILLs.
func (ch *Child) Terminate(ctx context.Context) error {
	select {
	case <-ch.done:
		return ch.err
	default:
	}
	_ = ch.Cont()
	_ = ch.Signal(syscall.SIGTERM)
	if err := ch.Wait(ctx); err != nil && ctx.Err() != nil {
		_ = ch.Kill()
		<-ch.done
		return fmt.Errorf("child %s did not stop in time: killed", ch.Name)
	}
	return ch.err
}

// ChildNames lists registered children, sorted.
func ChildNames() []string {
	childMu.Lock()
	defer childMu.Unlock()
	var out []string
	for n := range children {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
