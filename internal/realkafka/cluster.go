package realkafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kwire/kwire/internal/gen"
)

// Layout is how a node's listeners are laid out.
type Layout uint8

const (
	// Shared: one listener (PLAINTEXT) for clients and inter-broker
	// traffic (replica fetches, transaction markers, share-coordinator
	// calls), as many clusters run; the controller quorum on its own
	// listener (KRaft requires it).
	Shared Layout = iota
	// Separate: clients on CLIENT, inter-broker traffic on BROKER, the
	// quorum on CONTROLLER.
	Separate
)

func (l Layout) String() string {
	if l == Separate {
		return "separate"
	}
	return "shared"
}

// ClientListener is the listener clients bootstrap from in layout l (the
// first of Addrs).
func (l Layout) ClientListener() string { return listenerNames(l)[0] }

// InterBrokerListener is the listener brokers replicate on and send each
// other their requests (inter.broker.listener.name) in layout l.
func (l Layout) InterBrokerListener() string {
	if l == Separate {
		return ListenerBroker
	}
	return ListenerPlaintext
}

// Listener names, as in the nodes' server.properties.
const (
	ListenerPlaintext  = "PLAINTEXT"
	ListenerClient     = "CLIENT"
	ListenerBroker     = "BROKER"
	ListenerController = "CONTROLLER"
)

// Options configures a Cluster. The zero value (or nil) means three nodes,
// Shared, Kafka 4.4.0, free ports, a 3 s initial rebalance delay.
type Options struct {
	Nodes   int    // combined broker+controller nodes, one JVM each; default 3
	Layout  Layout // default Shared
	Version string // Version4 (default) or Version3
	// Lib is the directory of jars; default LibDir(Version).
	Lib string
	// Dir holds the nodes' directories; default a new temporary one, which
	// Stop does not remove (StartT removes it when the test passed).
	Dir string
	// Ports, if set, are the client listener's (advertised) ports, by node;
	// every other port is a free one.
	Ports []int
	// HeapMB is each JVM's -Xmx; default 512.
	HeapMB int
	// JVMArgs are more flags for every broker JVM, after the defaults.
	JVMArgs []string
	// Config overrides or adds broker settings on every node, e.g.
	// "group.initial.rebalance.delay.ms": "0" (the default is Kafka's own,
	// 3000, as in production).
	Config map[string]string
	// Recorder records the traffic; default a new gen.Recorder.
	Recorder *gen.Recorder
	// Stdout, if set, also gets every JVM's output (it always goes to the
	// node's server.log).
	Stdout func(node int32, line string)
	// Starting, if set, is called once the nodes are formatted and the
	// relays listen (every port is known), before the JVMs start: what
	// watches the cluster's traffic from there (kwire live) sees every
	// connection open. Its error ends Start.
	Starting func(c *Cluster) error
}

// Cluster is a running real Kafka cluster behind recording relays.
type Cluster struct {
	opts  Options
	java  string
	logJ  string
	id    string
	rec   *gen.Recorder
	nodes []*node

	// Formatted and Ready are how long Start took to format the nodes and
	// then to get from starting the JVMs to WaitReady's success.
	Formatted, Ready time.Duration

	mu      sync.Mutex
	stopped bool
}

// Start formats and starts the cluster and waits until it is ready (see
// WaitReady). On error everything started is stopped again.
func Start(ctx context.Context, opts *Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func newCluster(opts *Options) (*Cluster, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Version == "" {
		o.Version = Version4
	}
	if o.Lib == "" {
		o.Lib = LibDir(o.Version)
	}
	if o.HeapMB == 0 {
		o.HeapMB = 512
	}
	if len(o.Ports) > 0 && len(o.Ports) != o.Nodes {
		return nil, fmt.Errorf("realkafka: %d ports for %d nodes: give one client port per node", len(o.Ports), o.Nodes)
	}
	java, err := javaBin()
	if err != nil {
		return nil, err
	}
	if err := checkLib(o.Lib, o.Version); err != nil {
		return nil, err
	}
	logJ, err := logConfig(o.Version)
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "realkafka-"); err != nil {
			return nil, fmt.Errorf("realkafka: %w", err)
		}
	}
	if o.Recorder == nil {
		o.Recorder = gen.NewRecorder(gen.RecorderOptions{})
	}
	c := &Cluster{opts: o, java: java, logJ: logJ, id: newClusterID(), rec: o.Recorder}
	return c, nil
}

// newClusterID makes a cluster id as Kafka's Uuid.randomUuid prints one:
// 16 random bytes, base64url without padding. Like Kafka it draws again
// when the text starts with '-' (one time in 64): kafka-storage's argument
// parser takes "-t -abc…" for a missing value and an option, which is
// how a CI run once failed to format.
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40 // version 4, as java.util.UUID.randomUUID
		b[8] = b[8]&0x3f | 0x80
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// listenerNames returns the listeners of a node in layout l, the client
// one first.
func listenerNames(l Layout) []string {
	if l == Separate {
		return []string{ListenerClient, ListenerBroker, ListenerController}
	}
	return []string{ListenerPlaintext, ListenerController}
}

func (c *Cluster) start(ctx context.Context) error {
	names := listenerNames(c.opts.Layout)
	backends, err := FreePorts(c.opts.Nodes * len(names))
	if err != nil {
		return err
	}
	for i := range c.opts.Nodes {
		n := &node{c: c, id: int32(i + 1)}
		n.dir = fmt.Sprintf("%s/node%d", c.opts.Dir, n.id)
		for j, name := range names {
			addr := "127.0.0.1:0"
			if j == 0 && len(c.opts.Ports) > 0 {
				addr = "127.0.0.1:" + strconv.Itoa(c.opts.Ports[i])
			}
			r := &relay{rec: c.rec, node: n.id, name: name, addr: addr,
				backend: "127.0.0.1:" + strconv.Itoa(backends[i*len(names)+j])}
			if err := r.listen(); err != nil {
				return err
			}
			n.relays = append(n.relays, r)
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.writeConfig(); err != nil {
			return err
		}
	}
	t0 := time.Now()
	if err := c.format(ctx); err != nil {
		return err
	}
	t1 := time.Now()
	c.Formatted = t1.Sub(t0)
	if c.opts.Starting != nil {
		if err := c.opts.Starting(c); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := n.start(); err != nil {
			return err
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	c.Ready = time.Since(t1)
	return nil
}

// FreePorts returns n distinct loopback ports free now, below the
// kernel's ephemeral range. The JVMs bind them a little later: a port of
// the ephemeral range could meanwhile become the source port of one of
// the many connections a starting cluster opens (relays to backends,
// clients), and the node would fail to bind it (a run failed so, Address
// already in use). Below the range only another listener can take one;
// the node then fails to start, saying so.
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	lo, hi := listenRange()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 50*n {
			return nil, fmt.Errorf("realkafka: no %d free loopback ports in %d-%d", n, lo, hi-1)
		}
		p := lo + mrand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, p)
	}
	return ports, nil
}

// listenRange is where FreePorts picks: the 10000 ports below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range; 32768 when it
// cannot be read), not under 1024.
func listenRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v
			}
		}
	}
	return max(1024, hi-10000), hi
}

// format runs Kafka's StorageTool on every node at once, with the same
// cluster id and the same jars the brokers run: a directory formatted by a
// newer tool is not forward-compatible (KIP-1170).
func (c *Cluster) format(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.format(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ID is the cluster id the nodes were formatted with.
func (c *Cluster) ID() string { return c.id }

// Dir is the directory holding node<id>/ (server.properties, data/,
// server.log) for every node.
func (c *Cluster) Dir() string { return c.opts.Dir }

// LogFile is node id's server.log.
func (c *Cluster) LogFile(id int32) string { return c.node(id).logPath() }

// Recorder is the recorder of every relayed connection.
func (c *Cluster) Recorder() *gen.Recorder { return c.rec }

// Nodes returns the node ids, 1 to Options.Nodes.
func (c *Cluster) Nodes() []int32 {
	var ids []int32
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// Addrs returns the client listener's (advertised, relayed) addresses, by
// node: the bootstrap servers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.relays[0].addr)
	}
	return out
}

// Listeners returns every relayed address of the cluster with its node
// and listener name, e.g. "127.0.0.1:40001" -> {1, "PLAINTEXT"}.
func (c *Cluster) Listeners() map[string]Listener {
	out := map[string]Listener{}
	for _, n := range c.nodes {
		for _, r := range n.relays {
			out[r.addr] = Listener{Node: n.id, Name: r.name}
		}
	}
	return out
}

// Listener names one relayed listener.
type Listener struct {
	Node int32
	Name string
}

// Ports returns the relayed ports of the listeners named (all when none),
// sorted: what kwire's --port wants.
func (c *Cluster) Ports(names ...string) []int {
	return c.ports(names, func(r *relay) string { return r.addr })
}

// BackendPorts returns the ports the JVMs listen on behind the relays of
// the listeners named (all when none), sorted: the ports of the brokers'
// own sockets, which kwire live --ebpf on the broker processes wants.
func (c *Cluster) BackendPorts(names ...string) []int {
	return c.ports(names, func(r *relay) string { return r.backend })
}

func (c *Cluster) ports(names []string, addr func(*relay) string) []int {
	var out []int
	for _, n := range c.nodes {
		for _, r := range n.relays {
			if len(names) == 0 || slices.Contains(names, r.name) {
				_, p, _ := net.SplitHostPort(addr(r))
				port, _ := strconv.Atoi(p)
				out = append(out, port)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (c *Cluster) node(id int32) *node {
	if id < 1 || int(id) > len(c.nodes) {
		panic(fmt.Sprintf("realkafka: no node %d (nodes are 1 to %d)", id, len(c.nodes)))
	}
	return c.nodes[id-1]
}

// PID is node id's JVM process id, 0 when it is not running.
func (c *Cluster) PID(id int32) int { return c.node(id).pid() }

// Kill SIGKILLs node id's JVM and waits for it to be gone; its relays stop
// accepting (clients get connection refused) and its open connections end
// as the kernel ended them (FIN, or RST where bytes were unread).
func (c *Cluster) Kill(id int32) error { return c.node(id).kill() }

// Restart starts node id's JVM again on the same directory and ports after
// Kill. It does not wait for the node to rejoin: call WaitReady.
func (c *Cluster) Restart(id int32) error {
	n := c.node(id)
	if n.running() {
		return fmt.Errorf("realkafka: restart node %d: still running (Kill it first)", id)
	}
	for _, r := range n.relays {
		if err := r.listen(); err != nil {
			return err
		}
	}
	return n.start()
}

// Stop SIGKILLs every node, then closes the relays: a test or generator
// writes its capture first, and a controlled shutdown of a whole cluster
// takes 5 s or more (the last controllers wait for a quorum that is gone).
// It keeps Dir. Safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	c.mu.Unlock()
	for _, n := range c.nodes {
		n.signal(syscall.SIGKILL)
	}
	for _, n := range c.nodes {
		_ = n.kill()
		for _, r := range n.relays {
			r.stop(true)
		}
	}
}

// WritePcapng writes the traffic recorded so far to path (every relayed
// connection: clients, inter-broker and controller listeners) and returns
// how many packets it wrote.
func (c *Cluster) WritePcapng(path string) (int, error) {
	return c.rec.WritePcapng(path, gen.LinkEthernet, nil)
}
