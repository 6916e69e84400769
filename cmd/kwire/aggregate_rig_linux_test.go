//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// flakyListener is a transport broker's listener that a test takes down
// and brings back: while down its port is closed (dials are refused) and
// the connections it accepted are cut; up listens on the same port again.
// The broker's accept loop (kfake) only ever waits in Accept.
type flakyListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	mu    sync.Mutex
	ln    net.Listener
	open  []net.Conn
}

// listenFlaky is a kfake.ListenFn; each listener is sent on made.
func listenFlaky(made chan<- *flakyListener) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		f := &flakyListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{}), ln: ln}
		go f.accept(ln)
		made <- f
		return f, nil
	}
}

func (f *flakyListener) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.open = append(f.open, c)
		f.mu.Unlock()
		select {
		case f.conns <- c:
		case <-f.done:
			c.Close()
			return
		}
	}
}

func (f *flakyListener) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *flakyListener) Addr() net.Addr { return f.addr }

func (f *flakyListener) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	if f.ln != nil {
		f.ln.Close()
	}
	return nil
}

// down closes the port and cuts every connection accepted so far.
func (f *flakyListener) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ln.Close()
	f.ln = nil
	for _, c := range f.open {
		c.Close()
	}
	f.open = nil
}

// up listens on the port again.
func (f *flakyListener) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", f.addr.String())
	if err != nil {
		t.Fatalf("transport back up: %v", err)
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go f.accept(ln)
}

// fcGate keeps a client away from every broker but one until a
// FindCoordinator it sent there was answered, so that the request goes to
// that broker (kgo and sarama ask a broker picked at random; a refused
// dial never reaches the wire, and both clients then try another broker).
type fcGate struct {
	allowed string
	mu      sync.Mutex
	open    bool
	asked   map[int32]bool // correlation ids of FindCoordinator requests
}

func newFCGate(allowed string) *fcGate { return &fcGate{allowed: allowed, asked: map[int32]bool{}} }

func (g *fcGate) dial(ctx context.Context, network, host string) (net.Conn, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if !open && host != g.allowed {
		return nil, errors.New("test: broker held back until FindCoordinator was answered")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil || open {
		return c, err
	}
	return &fcConn{Conn: c, g: g}, nil
}

// Dial makes an fcGate a sarama proxy dialer.
func (g *fcGate) Dial(network, host string) (net.Conn, error) {
	return g.dial(context.Background(), network, host)
}

// fcConn watches a connection to the allowed broker for a FindCoordinator
// request (clients write a request in one Write) and its response.
type fcConn struct {
	net.Conn
	g  *fcGate
	in []byte
}

func (c *fcConn) Write(p []byte) (int, error) {
	if len(p) >= 12 && int16(binary.BigEndian.Uint16(p[4:])) == int16(kmsg.FindCoordinator) {
		c.g.mu.Lock()
		c.g.asked[int32(binary.BigEndian.Uint32(p[8:]))] = true
		c.g.mu.Unlock()
	}
	return c.Conn.Write(p)
}

func (c *fcConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in = append(c.in, p[:n]...)
	for len(c.in) >= 8 {
		size := int(binary.BigEndian.Uint32(c.in))
		if len(c.in) < 4+size {
			break
		}
		c.g.mu.Lock()
		if c.g.asked[int32(binary.BigEndian.Uint32(c.in[4:]))] {
			c.g.open = true
		}
		c.g.mu.Unlock()
		c.in = c.in[4+size:]
	}
	return n, err
}

// groupOn returns a group name that kfake's hashing gives coordinator
// broker node.
func groupOn(t *testing.T, kf *kfake.Cluster, prefix string, node int32) string {
	t.Helper()
	for i := range 1000 {
		if name := fmt.Sprintf("%s-%d", prefix, i); kf.CoordinatorFor(name) == node {
			return name
		}
	}
	t.Fatalf("no group name %s-N hashes to broker %d", prefix, node)
	return ""
}

// leadersRoundRobin makes broker p%3 the leader of partition p of topic.
func leadersRoundRobin(t *testing.T, kf *kfake.Cluster, topic string, parts int32) {
	t.Helper()
	for p := range parts {
		if err := kf.MoveTopicPartition(topic, p, p%3); err != nil {
			t.Fatal(err)
		}
	}
}

// joinSarama starts sarama member id (range assignor, sarama's Kafka 2.8
// requests), asking broker 0 for its coordinator; it commits what it
// consumed whenever it has read all its claim had.
func (g *group) joinSarama(id string) {
	g.t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = id
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = newFCGate(g.kf.ListenAddrs()[0])
	cg, err := sarama.NewConsumerGroup(g.kf.ListenAddrs()[:1], g.name, cfg)
	if err != nil {
		g.t.Fatalf("sarama member %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.members[id], g.stopped[id] = cancel, done
	h := &saramaHandler{g: g, id: id}
	go func() {
		defer close(done)
		defer cg.Close() // leaves the group
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{g.topic}, h); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}()
	g.t.Cleanup(func() { g.leave(id) })
}

// saramaHandler records a sarama member's partitions, consumption and
// commits in its group.
type saramaHandler struct {
	g  *group
	id string
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.g.update(func() {
		h.g.assigned[h.id] = map[int32]bool{}
		for _, p := range s.Claims()[h.g.topic] {
			h.g.assigned[h.id][p] = true
		}
	})
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.g.update(func() { h.g.assigned[h.id] = nil })
	return nil
}

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(m, "")
			h.g.update(func() { h.g.consumed[m.Partition] = max(h.g.consumed[m.Partition], m.Offset+1) })
			if len(c.Messages()) > 0 {
				continue
			}
			s.Commit() // synchronous
			h.g.update(func() { h.g.commit[m.Partition] = max(h.g.commit[m.Partition], m.Offset+1) })
		case <-s.Context().Done():
			return nil
		}
	}
}
