package realgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/internal/realkafka"
)

// Scenario is one real-Kafka capture: a cluster (3 nodes, Kafka 4.4.0 or
// 3.9.2 defaults plus Config, Shared or Separate layout), the topics
// created first, then Run driving Java clients.
type Scenario struct {
	Name, Doc string
	// Kafka is the cluster's line: realkafka.Version4 (the default) or
	// Version3. On Version3 the group members, producers and transactional
	// clients are the 3.9.2 Java clients (gen.FindJavaDriverKafka3), so
	// the capture holds a 3.9 client's request versions; the Admin steps
	// (topic creation, describes) stay on the 4.4 driver, which alone has
	// the admin mode.
	Kafka string
	// Layout is the cluster's listener layout (default Shared: clients and
	// replication on one listener).
	Layout realkafka.Layout
	// Quorum keeps the controller quorum's listeners (Raft fetches, broker
	// heartbeats and registrations) in the capture; left out by default.
	Quorum bool
	// Config overrides broker settings (realkafka.Options.Config); the
	// initial rebalance delay stays Kafka's default (3 s) unless set.
	Config map[string]string
	// Topics are created (replication 3) before Run.
	Topics map[string]int
	// Groups are the groups whose truth is written.
	Groups []string
	// Share are the share groups (KIP-932) whose truth is written.
	Share []string
	// Transactions are the transactional ids whose truth is written.
	Transactions []string
	// Kwire are the flags an operator gives kwire analyze for broker
	// settings that are not on the wire (Truth.KwireArgs).
	Kwire []string
	Run   func(ctx context.Context, e *Env) error
	// Truth, if set, adds the scenario's own truth (read after the
	// capture was written, like the rest).
	Truth func(ctx context.Context, e *Env, t *Truth) error
}

var scenarios []Scenario

// Scenarios lists the scenarios in the order they were registered.
func Scenarios() []Scenario { return append([]Scenario(nil), scenarios...) }

// Lookup finds a scenario by name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

func register(s Scenario) { scenarios = append(scenarios, s) }

// Env is what a scenario's Run drives: the cluster, the Java driver and
// the reports its clients sent.
type Env struct {
	C *realkafka.Cluster
	// D runs the scenario's Java clients (the cluster's line); admin runs
	// the admin mode (the 4.4 clients: D itself on a 4.4 cluster).
	D     *gen.JavaDriver
	admin *gen.JavaDriver
	Logf  func(format string, args ...any)
	// kafka is the cluster's line (realkafka.Version4, Version3).
	kafka string

	mu       sync.Mutex
	reports  []Report
	more     chan struct{}
	children []*gen.Child
	start    time.Time
}

// Report is one JSON line of a Java client (java/driver/README.md), with
// the fields the scenarios and the truth read; Raw keeps the whole line.
type Report struct {
	Kind       string             `json:"kind"`
	Ns         int64              `json:"ns"`
	Group      string             `json:"group,omitempty"`
	ClientID   string             `json:"client_id,omitempty"`
	MemberID   string             `json:"member_id,omitempty"`
	Generation *int32             `json:"generation,omitempty"`
	Assignment map[string][]int32 `json:"assignment,omitempty"`
	// Offsets: commit and committed reports, topic -> partition -> offset.
	Offsets map[string]map[string]int64 `json:"offsets,omitempty"`
	// Topic, Partition, Records, FirstOffset, LastOffset: consumed
	// reports; Offset: a worker's processed and held reports (topic and
	// partition too).
	Topic       string          `json:"topic,omitempty"`
	Partition   int32           `json:"partition,omitempty"`
	Records     int64           `json:"records,omitempty"`
	FirstOffset int64           `json:"first_offset,omitempty"`
	LastOffset  int64           `json:"last_offset,omitempty"`
	Offset      int64           `json:"offset,omitempty"`
	Raw         json.RawMessage `json:"raw"`
}

func (e *Env) addLine(b []byte) {
	var r Report
	if json.Unmarshal(b, &r) != nil {
		return
	}
	r.Raw = append(json.RawMessage(nil), b...)
	e.mu.Lock()
	e.reports = append(e.reports, r)
	if e.more != nil {
		close(e.more)
		e.more = nil
	}
	e.mu.Unlock()
}

// Start starts a Java client (mode gen.JavaConsumer...) against the
// cluster's relayed listeners; its reports are kept.
func (e *Env) Start(ctx context.Context, mode string, args any) (*gen.Child, error) {
	return e.StartOn(ctx, e.C.Addrs(), mode, args)
}

// StartOn starts a Java client with bootstrap servers addrs (some of the
// cluster's relayed listeners).
func (e *Env) StartOn(ctx context.Context, addrs []string, mode string, args any) (*gen.Child, error) {
	d := e.D
	if mode == gen.JavaAdmin {
		d = e.admin
	}
	ch, err := d.Start(ctx, addrs, mode, args, e.addLine)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.children = append(e.children, ch)
	e.mu.Unlock()
	return ch, nil
}

// StartReady starts a Java client and waits until it is ready (a consumer:
// it owns partitions).
func (e *Env) StartReady(ctx context.Context, mode string, args any) (*gen.Child, error) {
	return e.StartReadyOn(ctx, e.C.Addrs(), mode, args)
}

// StartReadyOn is StartReady with bootstrap servers addrs.
func (e *Env) StartReadyOn(ctx context.Context, addrs []string, mode string, args any) (*gen.Child, error) {
	ch, err := e.StartOn(ctx, addrs, mode, args)
	if err != nil {
		return nil, err
	}
	select {
	case <-ch.Ready():
		return ch, nil
	case <-ch.Done():
		return nil, fmt.Errorf("java %s exited before it was ready: %v", mode, ch.Wait(ctx))
	case <-ctx.Done():
		return nil, fmt.Errorf("java %s: waiting until ready: %w", mode, ctx.Err())
	}
}

// Run runs a Java client to its end (a producer, an admin).
func (e *Env) RunJava(ctx context.Context, mode string, args any) error {
	ch, err := e.Start(ctx, mode, args)
	if err != nil {
		return err
	}
	if err := ch.Wait(ctx); err != nil {
		return fmt.Errorf("java %s: %w", mode, err)
	}
	return nil
}

// WaitFor waits until cond holds on the reports so far; what names the
// wait in its error.
func (e *Env) WaitFor(ctx context.Context, what string, cond func([]Report) bool) error {
	for {
		e.mu.Lock()
		ok := cond(e.reports)
		if e.more == nil {
			e.more = make(chan struct{})
		}
		more := e.more
		e.mu.Unlock()
		if ok {
			e.Logf("%s", what)
			return nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// Reports returns the reports so far.
func (e *Env) Reports() []Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Report(nil), e.reports...)
}

// Produce runs a Java producer (acks=all) writing n records spread by key
// over topic's partitions.
func (e *Env) Produce(ctx context.Context, clientID, topic string, n int) error {
	return e.produceTo(ctx, clientID, topic, -1, n)
}

// produceTo writes n records to topic/partition (-1: spread by key) with
// acks=all.
func (e *Env) produceTo(ctx context.Context, client, topic string, partition int32, n int) error {
	return e.RunJava(ctx, gen.JavaProducer, map[string]any{
		"client_id": client, "topic": topic, "partition": partition, "records": n, "size": 20, "acks": "all",
	})
}

// describe asks the Admin client to describe group (the group's type,
// epochs, members and whether each uses the consumer protocol); the answer
// is a report of the truth.
func (e *Env) describe(ctx context.Context, groups ...string) error {
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{{"op": "describe_groups", "groups": groups}}}); err != nil {
		return fmt.Errorf("describe %v: %w", groups, err)
	}
	return nil
}

// stopAll terminates the clients still running.
func (e *Env) stopAll(ctx context.Context) {
	e.mu.Lock()
	chs := append([]*gen.Child(nil), e.children...)
	e.mu.Unlock()
	for _, ch := range chs {
		_ = ch.Terminate(ctx)
	}
}

// Options configures Run.
type Options struct {
	// Logf gets progress lines (default: none).
	Logf func(format string, args ...any)
	// KeepDir keeps the cluster's directory (broker logs) instead of
	// removing it after a successful run.
	KeepDir bool
	// Watch, if set, is called before the cluster's JVMs start (its
	// relays listen: every port is known), and the stop function it
	// returns once the scenario has run and its clients are stopped,
	// before the truth is read (reading it is traffic too): a test runs
	// kwire live over the scenario with it, seeing every connection open.
	// An error of either ends Run.
	Watch func(ctx context.Context, c *realkafka.Cluster) (stop func() error, err error)
}

// Run runs scenario s on a new cluster and writes <out>/<name>.pcapng and
// <out>/<name>.truth.json. The capture is written before the truth is
// read, so the truth reading is not in it.
func Run(ctx context.Context, s Scenario, out string, o Options) (*Truth, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	kafka := s.Kafka
	if kafka == "" {
		kafka = realkafka.Version4
	}
	admin, err := gen.FindJavaDriver()
	if err != nil {
		return nil, err
	}
	d := admin
	if kafka == realkafka.Version3 {
		if d, err = gen.FindJavaDriverKafka3(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "realgen-"+s.Name+"-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if ok && !o.KeepDir {
			os.RemoveAll(dir)
		} else {
			logf("%s: broker logs kept in %s", s.Name, dir)
		}
	}()
	stopWatch := func() error { return nil }
	ro := &realkafka.Options{Dir: dir, Config: s.Config, Version: kafka, Layout: s.Layout}
	if o.Watch != nil {
		ro.Starting = func(c *realkafka.Cluster) error {
			stop, err := o.Watch(ctx, c)
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			stopWatch = stop
			return nil
		}
	}
	c, err := realkafka.Start(ctx, ro)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%s: start cluster: %w", s.Name, err), stopWatch())
	}
	defer c.Stop()
	start := time.Now()
	e := &Env{C: c, D: d, admin: admin, kafka: kafka, start: start}
	e.Logf = func(format string, args ...any) {
		logf("%s %6.1fs "+format, append([]any{s.Name, time.Since(start).Seconds()}, args...)...)
	}
	e.Logf("cluster ready (%v to format, %v to start); listeners %v", c.Formatted.Round(time.Millisecond), c.Ready.Round(time.Millisecond), c.Listeners())
	if err := e.createTopics(ctx, s.Topics); err != nil {
		return nil, errors.Join(fmt.Errorf("%s: %w", s.Name, err), stopWatch())
	}
	if err := s.Run(ctx, e); err != nil {
		e.stopAll(ctx)
		return nil, errors.Join(fmt.Errorf("%s: %w", s.Name, err), stopWatch())
	}
	e.stopAll(ctx)
	if err := stopWatch(); err != nil {
		return nil, fmt.Errorf("%s: watch: %w", s.Name, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	capture := filepath.Join(out, s.Name+".pcapng")
	// Unless the scenario asks for them, the controller quorum's
	// listeners (Raft fetches, broker heartbeats and registrations) are
	// left out: a quarter of the packets, and no group traffic.
	captured := []string{s.Layout.ClientListener(), s.Layout.InterBrokerListener()}
	if s.Quorum {
		captured = append(captured, realkafka.ListenerController)
	}
	listeners := c.Listeners()
	include := func(conn *gen.Conn) bool { return slices.Contains(captured, listeners[conn.Server.String()].Name) }
	n, err := c.Recorder().WritePcapng(capture, gen.LinkEthernet, include)
	if err != nil {
		return nil, fmt.Errorf("%s: write capture: %w", s.Name, err)
	}
	e.Logf("%d packets in %s", n, capture)

	t := &Truth{Scenario: s.Name, Doc: s.Doc, Kafka: kafka, Clients: d.Clients, Layout: s.Layout.String(),
		Capture: filepath.Base(capture), Packets: n, Ports: c.Ports(captured...),
		ClientPorts: c.Ports(s.Layout.ClientListener()), InterBrokerPorts: c.Ports(s.Layout.InterBrokerListener()),
		Listeners: map[string]string{}, Requests: map[string]map[string]int{}, KwireArgs: s.Kwire}
	if s.Quorum {
		t.ControllerPorts = c.Ports(realkafka.ListenerController)
	}
	for addr, l := range listeners {
		t.Listeners[addr] = fmt.Sprintf("node %d %s", l.Node, l.Name)
	}
	t.ClientIDs = map[string][]string{}
	for _, conn := range c.Recorder().Conns() {
		name := listeners[conn.Server.String()].Name
		if !include(conn) {
			continue
		}
		if t.Requests[name] == nil {
			t.Requests[name] = map[string]int{}
		}
		for _, f := range conn.RequestFrames() {
			t.Requests[name][fmt.Sprintf("%s v%d", f.API, f.Version)]++
			if !slices.Contains(t.ClientIDs[name], f.ClientID) {
				t.ClientIDs[name] = append(t.ClientIDs[name], f.ClientID)
			}
		}
	}
	for _, ids := range t.ClientIDs {
		slices.Sort(ids)
	}
	for name, p := range s.Topics {
		t.Topics = append(t.Topics, TopicTruth{Topic: name, Partitions: p})
	}
	sort.Slice(t.Topics, func(i, j int) bool { return t.Topics[i].Topic < t.Topics[j].Topic })
	if err := e.readTruth(ctx, t, s.Groups, s.Share); err != nil {
		return nil, fmt.Errorf("%s: truth: %w", s.Name, err)
	}
	if t.Transactions, err = e.transactions(ctx, s.Transactions); err != nil {
		return nil, fmt.Errorf("%s: truth: %w", s.Name, err)
	}
	if s.Truth != nil {
		if err := s.Truth(ctx, e, t); err != nil {
			return nil, fmt.Errorf("%s: truth: %w", s.Name, err)
		}
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, s.Name+".truth.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// createTopics creates the scenario's topics (replication 3) with the
// Java Admin client.
func (e *Env) createTopics(ctx context.Context, topics map[string]int) error {
	if len(topics) == 0 {
		return nil
	}
	var ts []map[string]any
	for name, p := range topics {
		ts = append(ts, map[string]any{"name": name, "partitions": p})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i]["name"].(string) < ts[j]["name"].(string) })
	if err := e.RunJava(ctx, gen.JavaAdmin, map[string]any{"client_id": "rk-admin", "stop_on_error": true,
		"ops": []map[string]any{{"op": "create_topics", "topics": ts, "replication": 3}}}); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	e.Logf("topics created: %v", topics)
	return nil
}

// quietReplicas lets an idle follower's Fetch wait up to 5 s (Kafka's
// default: 500 ms) for new records: ten times fewer replica fetches in a
// capture where nothing is produced most of the time. A produce or a
// commit still wakes the parked fetch at once, so nothing the groups do
// waits longer.
var quietReplicas = map[string]string{"replica.fetch.wait.max.ms": "5000"}

// jsonInto reads r's whole line into v (the fields Report does not keep).
func jsonInto(r Report, v any) error { return json.Unmarshal(r.Raw, v) }
