package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var gXBrokerScenario = Scenario{
	Name: "g_xbroker",
	Doc: "field report 1: group xb-group-N is coordinated by broker 1 (kfake hashes the name) while both kgo " +
		"members (seeded with broker 0 only, and unable to reach brokers 1 and 2 until they have a coordinator) ask " +
		"broker 0 FindCoordinator; xb-orders has 6 partitions led by brokers 0, 1, 2 in turn, so fetches go to all " +
		"three; mid-way broker 0 closes the connections that carried FindCoordinator, and the members keep " +
		"consuming while a kgo producer writes; one capture file per broker, no combined file",
	Options: Options{
		Link:  LinkEthernet,
		Split: PerBroker,
		Kfake: []kfake.Opt{kfake.SeedTopics(6, "xb-orders")},
	},
	Run: runXBroker,
}

// fcGate keeps a client away from every broker but the first until its
// FindCoordinator was answered, so that request goes to broker 0: kgo
// asks a random broker, and a refused dial never reaches the wire (kgo
// retries on the next broker).
type fcGate struct {
	allowed string
	mu      sync.Mutex
	open    bool
	conn    *Conn // the tapped connection that carried FindCoordinator
}

func (g *fcGate) dial(ctx context.Context, network, host string) (net.Conn, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if !open && host != g.allowed {
		return nil, errors.New("kwire-gen: broker held back until FindCoordinator was answered")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, host)
}

func runXBroker(ctx context.Context, c *Cluster) error {
	const topic, parts = "xb-orders", 6
	addrs := c.Addrs()
	group := ""
	for i := range 1000 {
		if name := fmt.Sprintf("xb-group-%d", i); c.kf.CoordinatorFor(name) == 1 {
			group = name
			break
		}
	}
	if group == "" {
		return errors.New("no group name hashes to broker 1")
	}
	for p := range int32(parts) {
		if err := c.kf.MoveTopicPartition(topic, p, p%3); err != nil {
			return err
		}
	}
	gates := newFCGates(c, addrs[0])
	prod, err := startProducer(ctx, c, "xb-producer", topic, 12, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	var ms []*gMember
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("xb-member-%d", i)
		g := gates.add(name)
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: name, Group: group, Topics: []string{topic}, Balancers: []string{"range"},
			Extra: []kgo.Opt{kgo.SeedBrokers(addrs[0]), kgo.Dialer(g.dial)}})
		if err != nil {
			return err
		}
		ms = append(ms, m)
		if _, err := c.waitStable(ctx, group, i, parts); err != nil {
			return err
		}
		if fc := g.carrier(); fc == nil || fc.Node != 0 {
			return fmt.Errorf("%s: FindCoordinator did not go to broker 0 (%v)", name, fc)
		}
		sleepCtx(ctx, 1500*time.Millisecond)
	}
	all := gates.all()
	for _, name := range slices.Sorted(maps.Keys(all)) {
		fc := all[name].carrier()
		c.Note("g_xbroker: %s asked FindCoordinator on connection %d (%s -> %s, broker %d); broker 0 closed that connection mid-way",
			name, fc.ID, fc.Client, fc.Server, fc.Node)
		if err := fc.Close(); err != nil {
			return err
		}
	}
	c.Note("g_xbroker: group %s is coordinated by broker %d; partition leaders: %v", group, c.kf.CoordinatorFor(group), leaders(c, topic, parts))
	sleepCtx(ctx, 3*time.Second)
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	ms[1].leave()
	if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
		return err
	}
	ms[0].leave()
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

// fcGates are the gates of a cluster's clients, opened from the tap.
type fcGates struct {
	allowed string
	mu      sync.Mutex
	gates   map[string]*fcGate // by client id
}

// newFCGates watches the tap for FindCoordinator: a gate remembers the
// connection its client's request went on and opens once the answer
// passed on it.
func newFCGates(c *Cluster, allowed string) *fcGates {
	gs := &fcGates{allowed: allowed, gates: map[string]*fcGate{}}
	c.OnFrame(func(conn *Conn, d Dir, f Frame) {
		if f.Key != int16(kmsg.FindCoordinator) {
			return
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		for id, g := range gs.gates {
			g.mu.Lock()
			switch {
			case d == ToServer && id == f.ClientID && g.conn == nil:
				g.conn = conn
			case d == ToClient && g.conn == conn:
				g.open = true
			}
			g.mu.Unlock()
		}
	})
	return gs
}

func (gs *fcGates) add(clientID string) *fcGate {
	g := &fcGate{allowed: gs.allowed}
	gs.mu.Lock()
	gs.gates[clientID] = g
	gs.mu.Unlock()
	return g
}

func (gs *fcGates) all() map[string]*fcGate {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return maps.Clone(gs.gates)
}

// carrier is the connection that carried the client's FindCoordinator.
func (g *fcGate) carrier() *Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conn
}

func leaders(c *Cluster, topic string, parts int) map[int32]int32 {
	out := map[int32]int32{}
	for p := range int32(parts) {
		out[p] = c.kf.LeaderFor(topic, p)
	}
	return out
}
