package realkafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/gen"
)

// fakeCluster lays out nodes and relays as start does, with made-up
// ports (relay 10000+node*10+listener, backend 20000+...), without
// starting anything.
func fakeCluster(l Layout, nodes int) *Cluster {
	c := &Cluster{opts: Options{Layout: l, Dir: "/d"}}
	for i := range nodes {
		n := &node{c: c, id: int32(i + 1), dir: fmt.Sprintf("/d/node%d", i+1)}
		for j, name := range listenerNames(l) {
			n.relays = append(n.relays, &relay{node: n.id, name: name,
				addr:    fmt.Sprintf("127.0.0.1:%d", 10000+(i+1)*10+j),
				backend: fmt.Sprintf("127.0.0.1:%d", 20000+(i+1)*10+j)})
		}
		c.nodes = append(c.nodes, n)
	}
	return c
}

// TestConfig checks the listener wiring that makes the relays see every
// byte: what each node advertises and the quorum's voters are relays,
// what it binds is its backend, and inter-broker traffic uses the
// listener the layout says.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		l     Layout
		nodes int
		want  map[string]string // node 2's settings
	}{{
		name: "shared", l: Shared, nodes: 3,
		want: map[string]string{
			"controller.quorum.voters":         "1@127.0.0.1:10011,2@127.0.0.1:10021,3@127.0.0.1:10031",
			"listeners":                        "PLAINTEXT://127.0.0.1:20020,CONTROLLER://127.0.0.1:20021",
			"advertised.listeners":             "PLAINTEXT://127.0.0.1:10020",
			"inter.broker.listener.name":       "PLAINTEXT",
			"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"offsets.topic.replication.factor": "3",
			"transaction.state.log.min.isr":    "2",
			"group.initial.rebalance.delay.ms": "3000",
		},
	}, {
		name: "separate", l: Separate, nodes: 3,
		want: map[string]string{
			"controller.quorum.voters":         "1@127.0.0.1:10012,2@127.0.0.1:10022,3@127.0.0.1:10032",
			"listeners":                        "CLIENT://127.0.0.1:20020,BROKER://127.0.0.1:20021,CONTROLLER://127.0.0.1:20022",
			"advertised.listeners":             "CLIENT://127.0.0.1:10020,BROKER://127.0.0.1:10021",
			"inter.broker.listener.name":       "BROKER",
			"listener.security.protocol.map":   "CLIENT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"offsets.topic.replication.factor": "3",
			"transaction.state.log.min.isr":    "2",
			"group.initial.rebalance.delay.ms": "3000",
		},
	}, {
		name: "one node", l: Shared, nodes: 1,
		want: map[string]string{
			"controller.quorum.voters":         "1@127.0.0.1:10011",
			"listeners":                        "PLAINTEXT://127.0.0.1:20010,CONTROLLER://127.0.0.1:20011",
			"advertised.listeners":             "PLAINTEXT://127.0.0.1:10010",
			"inter.broker.listener.name":       "PLAINTEXT",
			"listener.security.protocol.map":   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"offsets.topic.replication.factor": "1",
			"transaction.state.log.min.isr":    "1",
			"group.initial.rebalance.delay.ms": "3000",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeCluster(tc.l, tc.nodes)
			cfg := c.nodes[len(c.nodes)/2].config()
			got := map[string]string{}
			for k := range tc.want {
				got[k] = cfg[k]
			}
			if d := diffStrings(tc.want, got); d != "" {
				t.Errorf("server.properties (-want +got):\n%s", d)
			}
		})
	}
}

func diffStrings(want, got map[string]string) string {
	var b strings.Builder
	for k, w := range want {
		if g := got[k]; g != w {
			fmt.Fprintf(&b, "-%s=%s\n+%s=%s\n", k, w, k, g)
		}
	}
	return b.String()
}

// TestMissing checks that a machine without the jars gets ErrMissing
// naming the directory and the command that fixes it.
func TestMissing(t *testing.T) {
	if _, err := javaBin(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	_, err := Start(context.Background(), &Options{Lib: dir, Dir: t.TempDir()})
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("Start with an empty lib: %v, want ErrMissing", err)
	}
	for _, want := range []string{dir, "kafka_2.13-4.4.0.jar", "make realkafka-deps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestRelay puts a relay in front of a kfake broker and checks that the
// tap records a client's requests through it, and that a broker-side close
// reaches the client and the capture.
func TestRelay(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	rec := gen.NewRecorder(gen.RecorderOptions{})
	r := &relay{rec: rec, node: 1, name: ListenerPlaintext, addr: "127.0.0.1:0", backend: kf.ListenAddrs()[0]}
	if err := r.listen(); err != nil {
		t.Fatal(err)
	}
	defer r.stop(true)
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	// A seed broker's request goes through the relay (kfake's own
	// address is what Metadata answers, so later ones do not).
	if _, err := cl.Request(ctx, req); err != nil {
		t.Fatalf("metadata through the relay: %v", err)
	}
	conns := rec.Conns()
	if len(conns) != 1 {
		t.Fatalf("%d relayed connections, want 1", len(conns))
	}
	c := conns[0]
	if got := c.Requests(18); got != 1 {
		t.Errorf("relayed %d ApiVersions requests, want 1", got)
	}
	if got := c.Requests(3); got < 1 {
		t.Errorf("relayed %d Metadata requests, want 1 or more", got)
	}
	if c.Server.String() != r.addr || c.Node != 1 {
		t.Errorf("connection to %v (node %d), want the relay %s (node 1)", c.Server, c.Node, r.addr)
	}
	r.stop(true) // as a broker going away: the relay closes its side
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the relayed connection did not end after the relay stopped")
	}
	path := t.TempDir() + "/relay.pcapng"
	n, err := rec.WritePcapng(path, gen.LinkEthernet, nil)
	if err != nil || n == 0 {
		t.Fatalf("write: %d packets, %v", n, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("capture file: %v", err)
	}
}

// TestClusterID draws many cluster ids: none may start with '-', which
// kafka-storage format reads as an option (a CI run failed on one), and
// each must decode to Kafka's 16 bytes. 20000 draws miss a regression
// with odds of (63/64)^20000.
func TestClusterID(t *testing.T) {
	for range 20000 {
		id := newClusterID()
		if strings.HasPrefix(id, "-") || len(id) != 22 {
			t.Fatalf("cluster id %q: starts with '-' or is not 22 characters", id)
		}
	}
}

// TestFreePorts: the ports are distinct, free, and below the kernel's
// ephemeral range, where no outgoing connection takes one.
func TestFreePorts(t *testing.T) {
	ps, err := FreePorts(30)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := listenRange()
	seen := map[int]bool{}
	for _, p := range ps {
		if p < lo || p >= hi || seen[p] {
			t.Errorf("port %d: repeated or outside %d-%d", p, lo, hi-1)
		}
		seen[p] = true
	}
}
