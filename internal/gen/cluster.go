package gen

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Defaults for Options.
const (
	// DefaultMSS is loopback-like: Linux lo has an MTU of 65536, so large
	// segments are normal there.
	DefaultMSS = 16344
	// EthernetMSS is the usual MSS behind a 1500-byte MTU with TCP
	// timestamps.
	EthernetMSS = 1448
	// DefaultChunk is the most one tapped Read or Write relays at once.
	DefaultChunk = 64 << 10
)

// Split says which capture files a cluster writes.
type Split uint8

const (
	// Combined writes one file with every broker's connections.
	Combined Split = iota
	// PerBroker writes one file per broker, <name>.b<node>.pcapng, each
	// with only that broker's connections, as a capture per broker host
	// would be.
	PerBroker
	// CombinedAndPerBroker writes both.
	CombinedAndPerBroker
)

// Options configures a Cluster. The zero value (or nil) means 3 brokers on
// random ports, newest versions, Ethernet, DefaultMSS, one combined file.
type Options struct {
	Brokers     int                // number of brokers; default 3
	Ports       []int              // fixed listen ports (overrides Brokers)
	MaxVersions *kversion.Versions // cap what kfake advertises and accepts
	Kfake       []kfake.Opt        // more kfake options (SeedTopics, BrokerConfigs...)
	Link        Link
	MSS         int // maximum TCP payload per packet; default DefaultMSS
	Chunk       int // maximum bytes per tapped Read/Write; default DefaultChunk
	// BytesPerSecond, if set, paces every connection's relaying in each
	// direction to this rate, as a slower link would: bytes are unchanged,
	// large frames just take time, so requests and responses overlap.
	BytesPerSecond int
	Split          Split
	// Encrypted says the brokers listen with TLS (kfake.TLS in Kfake:
	// above the taps, which record ciphertext). The truth then has no
	// frames (Frames lists the connections only).
	Encrypted bool
	// ClientOpts are added to every kgo client of Kgo (the truth
	// clients' too): e.g. kgo.DialTLSConfig for Encrypted clusters.
	ClientOpts []kgo.Opt
}

// Cluster is a kfake cluster whose every connection is tapped, plus the
// truth recorder. Scenarios drive clients against it; Close ends the
// traffic and Write writes the capture and truth.
type Cluster struct {
	opts   Options
	kf     *kfake.Cluster
	rec    *recorder
	addrs  []string
	hooks  *hooks
	broker brokerCounts
	groups *groupRecorder
	// bgroups holds broker-side group facts (see watchGroup, expiries).
	bgroups *brokerGroups

	mu       sync.Mutex
	clients  []*kgo.Client
	cleanups []func()
	extra    []extraFile
	children []*Child
	notes    []string
	produced ClientCounts // recorded by hand (sarama)
	truth    truthExtra
	closed   bool
}

// NewCluster starts kfake with taps on every broker listener.
func NewCluster(opts *Options) (*Cluster, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.MSS == 0 {
		o.MSS = DefaultMSS
	}
	if o.Chunk == 0 {
		o.Chunk = DefaultChunk
	}
	c := &Cluster{
		opts:     o,
		rec:      &recorder{mss: o.MSS, chunk: o.Chunk, rate: o.BytesPerSecond, encrypted: o.Encrypted},
		hooks:    newHooks(),
		produced: newClientCounts(),
		groups:   newGroupRecorder(),
		bgroups:  newBrokerGroups(),
	}
	var nextNode int32 // kfake listens for brokers in node order
	kopts := []kfake.Opt{
		kfake.NumBrokers(o.Brokers),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			l := &listener{Listener: ln, r: c.rec, node: nextNode}
			nextNode++
			return l, nil
		}),
	}
	if len(o.Ports) > 0 {
		kopts = append(kopts, kfake.Ports(o.Ports...))
	}
	if o.MaxVersions != nil {
		kopts = append(kopts, kfake.MaxVersions(o.MaxVersions))
	}
	// Before o.Kfake, so that a scenario's own logger wins (and its
	// KIP-848 expiries are then unknown).
	kopts = append(kopts, kfake.WithLogger(c.bgroups))
	kopts = append(kopts, o.Kfake...)
	kf, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	c.kf = kf
	c.addrs = kf.ListenAddrs()
	// Observe every request and handle none (false): kfake keeps an
	// unhandled control function, and runs it once per request, even for
	// a Fetch that waits and comes back (see kfake tryControlKey).
	kf.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.broker.observe(kf.CurrentNode(), req)
		c.bgroups.observe(req)
		return nil, nil, false
	})
	return c, nil
}

// Kfake returns the cluster, for admin calls (MoveTopicPartition,
// CoordinatorFor...). Do not add Control functions that handle requests
// without noting it: requests_broker counts only what reaches the handlers.
func (c *Cluster) Kfake() *kfake.Cluster { return c.kf }

// Addrs returns the brokers' listen addresses, by node.
func (c *Cluster) Addrs() []string { return slices.Clone(c.addrs) }

// Hooks returns the kgo option that feeds the truth (requests_client,
// produced, fetch_batches). Kgo adds it for you.
func (c *Cluster) Hooks() kgo.Opt { return kgo.WithHooks(c.hooks) }

// Kgo returns a kgo client seeded with the cluster and counted in the
// truth. Clients still open when the cluster closes are closed then.
func (c *Cluster) Kgo(opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{kgo.SeedBrokers(c.addrs...), c.Hooks()}, c.opts.ClientOpts...)
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl, nil
}

// Sarama returns a sarama config with timeouts short enough for a
// scenario. Sarama has no hooks: its requests are in requests_broker but
// not in requests_client, and its produced records only if the scenario
// calls AddProduced.
func (c *Cluster) Sarama(clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.MaxWaitTime = 250 * time.Millisecond
	return cfg
}

// AddProduced records n acknowledged records for the truth, for clients
// without hooks.
func (c *Cluster) AddProduced(topic string, partition int32, n int64) {
	c.mu.Lock()
	c.produced.addProduced(topic, fmt.Sprint(partition), n)
	c.mu.Unlock()
}

// OnClose registers fn to run when the cluster closes, before kfake stops
// (last registered runs first).
func (c *Cluster) OnClose(fn func()) {
	c.mu.Lock()
	c.cleanups = append(c.cleanups, fn)
	c.mu.Unlock()
}

// Note adds a line to the truth's notes.
func (c *Cluster) Note(format string, args ...any) {
	c.mu.Lock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

// Conns returns the tapped connections so far, in accept order.
func (c *Cluster) Conns() []*Conn {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	return slices.Clone(c.rec.conns)
}

// OnFrame calls fn for every complete frame a tap relays, after it is
// recorded, from the goroutine relaying it (responses already carry their
// request's Key, Version and API). fn may call Conn.Close (for
// example after a FindCoordinator response) but must not block.
func (c *Cluster) OnFrame(fn func(conn *Conn, dir Dir, f Frame)) {
	c.rec.mu.Lock()
	c.rec.onFrame = append(c.rec.onFrame, fn)
	c.rec.mu.Unlock()
}

// Close ends the traffic: it runs OnClose functions, terminates children,
// closes kgo clients still open, stops kfake, and waits for every tapped
// connection to be over (closing stragglers from the broker side).
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	cleanups, children, clients := c.cleanups, c.children, c.clients
	c.mu.Unlock()

	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, ch := range children {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = ch.Terminate(ctx)
		cancel()
	}
	for i := len(clients) - 1; i >= 0; i-- {
		if !c.hooks.isClosed(clients[i]) {
			clients[i].Close()
		}
	}
	// Clients are closed: give kfake a moment to read their FINs, so
	// connections end in the order they did, client first.
	grace := time.NewTimer(time.Second)
	for _, conn := range c.Conns() {
		select {
		case <-conn.Done():
			continue
		case <-grace.C:
		}
		break
	}
	grace.Stop()
	c.kf.Close()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	expired := false
	for _, conn := range c.Conns() {
		if !expired {
			select {
			case <-conn.Done():
				continue
			case <-deadline.C:
				expired = true
			}
		}
		conn.Close()
	}
}
