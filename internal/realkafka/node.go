package realkafka

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// node is one combined broker+controller: its relays (client listener
// first) and, while it runs, its JVM.
type node struct {
	c      *Cluster
	id     int32
	dir    string
	relays []*relay

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{} // closed when the JVM has exited
}

func (n *node) logPath() string   { return filepath.Join(n.dir, "server.log") }
func (n *node) propsPath() string { return filepath.Join(n.dir, "server.properties") }

// config is node n's server.properties, before Options.Config.
func (n *node) config() map[string]string {
	c := n.c
	nodes := len(c.nodes)
	rf := strconv.Itoa(min(3, nodes))
	isr := strconv.Itoa(min(2, nodes))
	var voters, listeners, advertised, protocols []string
	for _, m := range c.nodes {
		ctl := m.relays[len(m.relays)-1]
		voters = append(voters, fmt.Sprintf("%d@%s", m.id, ctl.addr))
	}
	for _, r := range n.relays {
		listeners = append(listeners, r.name+"://"+r.backend)
		protocols = append(protocols, r.name+":PLAINTEXT")
		if r.name != ListenerController {
			advertised = append(advertised, r.name+"://"+r.addr)
		}
	}
	return map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        strconv.Itoa(int(n.id)),
		"controller.quorum.voters":       strings.Join(voters, ","),
		"controller.listener.names":      ListenerController,
		"listeners":                      strings.Join(listeners, ","),
		"advertised.listeners":           strings.Join(advertised, ","),
		"listener.security.protocol.map": strings.Join(protocols, ","),
		"inter.broker.listener.name":     c.opts.Layout.InterBrokerListener(),
		"log.dirs":                       filepath.Join(n.dir, "data"),
		// Internal topics replicated as in production (3, min ISR 2),
		// with fewer partitions than the defaults (50) so that the first
		// FindCoordinator does not wait for 150 replicas on two cores.
		"offsets.topic.replication.factor":                 rf,
		"offsets.topic.num.partitions":                     "5",
		"transaction.state.log.replication.factor":         rf,
		"transaction.state.log.min.isr":                    isr,
		"transaction.state.log.num.partitions":             "5",
		"share.coordinator.state.topic.replication.factor": rf,
		"share.coordinator.state.topic.min.isr":            isr,
		"share.coordinator.state.topic.num.partitions":     "5",
		"default.replication.factor":                       rf,
		"group.initial.rebalance.delay.ms":                 "3000",
		// Few threads: three JVMs share two cores.
		"num.network.threads":               "2",
		"num.io.threads":                    "2",
		"background.threads":                "2",
		"num.replica.fetchers":              "1",
		"num.recovery.threads.per.data.dir": "1",
		"log.cleaner.threads":               "1",
		"log.cleaner.dedupe.buffer.size":    "2097152",
	}
}

// writeConfig writes server.properties, Options.Config last.
func (n *node) writeConfig() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	cfg := n.config()
	for k, v := range n.c.opts.Config {
		cfg[k] = v
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "# node %d of a %s-layout cluster written by internal/realkafka\n", n.id, n.c.opts.Layout)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, cfg[k])
	}
	if err := os.WriteFile(n.propsPath(), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	return nil
}

// classpath is the jars' wildcard classpath.
func (n *node) classpath() string { return filepath.Join(n.c.opts.Lib, "*") }

// format runs kafka.tools.StorageTool format (a static quorum: the voters
// are in server.properties, so no --standalone or --initial-controllers).
func (n *node) format(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, n.c.java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", n.c.logJ, "-cp", n.classpath(),
		"kafka.tools.StorageTool", "format", "-t", n.c.id, "-c", n.propsPath())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("realkafka: format node %d: %w\n%s", n.id, err, out)
	}
	return nil
}

// jvmArgs are the broker JVM's flags: a small heap, G1 as Kafka's scripts
// use it, the project's logging configuration, and only the C1 compiler
// (-XX:TieredStopAtLevel=1): three JVMs starting at once on two busy cores
// were ready in 36-39 s with it and 75-96 s without (load average 20-37),
// and a test cluster never runs long enough for C2's code to pay.
func (n *node) jvmArgs() []string {
	heap := strconv.Itoa(n.c.opts.HeapMB) + "m"
	return append([]string{
		"-Xms128m", "-Xmx" + heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-XX:TieredStopAtLevel=1",
		"-Djava.awt.headless=true", n.c.logJ,
	}, append(slices.Clone(n.c.opts.JVMArgs), "-cp", n.classpath(), "kafka.Kafka", n.propsPath())...)
}

// start starts the JVM; its output goes to server.log.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	cmd := exec.Command(n.c.java, n.jvmArgs()...)
	setNodeAttrs(cmd)
	var w io.Writer = f
	var pw *io.PipeWriter
	if fn := n.c.opts.Stdout; fn != nil {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		w = io.MultiWriter(f, pw)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				fn(n.id, sc.Text())
			}
		}()
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("realkafka: start node %d: %w", n.id, err)
	}
	exit := make(chan struct{})
	n.cmd, n.exit = cmd, exit
	go func() {
		_ = cmd.Wait()
		f.Close()
		if pw != nil {
			pw.Close()
		}
		close(exit)
	}()
	return nil
}

func (n *node) running() bool {
	select {
	case <-n.done():
		return false
	default:
		return true
	}
}

// done is closed when the JVM is not running.
func (n *node) done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exit == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.exit
}

func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the JVM, waits for it to exit, then stops the relays'
// listeners and waits for their connections to end.
func (n *node) kill() error {
	n.signal(syscall.SIGKILL)
	<-n.done()
	for _, r := range n.relays {
		r.stop(false)
	}
	return nil
}

// exited says the JVM was started and has exited.
func (n *node) exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exit == nil {
		return false
	}
	select {
	case <-n.exit:
		return true
	default:
		return false
	}
}

// pid is the JVM's process id, 0 when not running.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.exit == nil {
		return 0
	}
	select {
	case <-n.exit:
		return 0
	default:
		return n.cmd.Process.Pid
	}
}
