package correlate

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// coordState is what the capture says about a group's coordinator.
type coordState struct {
	// From the last FindCoordinator answer for the group.
	nodeID      int32
	host        string
	port        int32
	code        int16
	learnedFrom string // broker that answered
	learnedAt   time.Time
	// The broker that last answered the group's requests as coordinator.
	servedBy string
	servedAt time.Time
	served   netip.AddrPort // servedBy's address: its text is made once
	// Answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE to group requests.
	notCoordinator int64
	notAvailable   int64

	last *CoordinatorEvent // last emitted
}

// findCoordinator handles FindCoordinator (key 10) for groups (key type 0):
// v0-v3 ask for one key, v4+ for a batch (KIP-699). The client asking is
// bound to each group; the answer names its coordinator.
func (c *Correlator) findCoordinator(e *decode.Exchange, req *kmsg.FindCoordinatorRequest) {
	if req.CoordinatorType == 1 {
		c.txnCoordinator(e, req)
		return
	}
	if req.CoordinatorType != 0 {
		return // share groups (KIP-932) and others
	}
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		if c.group(k) != nil {
			c.bind(e, k, "", nil)
		}
	}
	resp, _ := e.Resp.(*kmsg.FindCoordinatorResponse)
	if resp == nil {
		return
	}
	if req.Version < 4 {
		if g := c.groups[req.CoordinatorKey]; g != nil {
			c.coordinatorAnswer(g, e, resp.NodeID, resp.Host, resp.Port, resp.ErrorCode)
		}
		return
	}
	for _, co := range resp.Coordinators {
		if g := c.groups[co.Key]; g != nil {
			c.coordinatorAnswer(g, e, co.NodeID, co.Host, co.Port, co.ErrorCode)
		}
	}
}

// txnCoordinator learns transactional ids' coordinators (key type 1) from
// FindCoordinator answers, for ids already followed or not.
func (c *Correlator) txnCoordinator(e *decode.Exchange, req *kmsg.FindCoordinatorRequest) {
	resp, _ := e.Resp.(*kmsg.FindCoordinatorResponse)
	if resp == nil {
		return
	}
	if req.Version < 4 {
		if req.CoordinatorKey != "" && resp.ErrorCode == 0 {
			c.txn(req.CoordinatorKey).coordinator = hostPort(resp.Host, resp.Port)
		}
		return
	}
	for _, co := range resp.Coordinators {
		if co.Key != "" && co.ErrorCode == 0 {
			c.txn(co.Key).coordinator = hostPort(co.Host, co.Port)
		}
	}
}

// coordinatorAnswer records a FindCoordinator answer for g and emits it
// when it differs from the last one emitted.
func (c *Correlator) coordinatorAnswer(g *groupState, e *decode.Exchange, node int32, host string, port int32, code int16) {
	cs := &g.coord
	cs.nodeID, cs.host, cs.port, cs.code = node, host, port, code
	cs.learnedFrom, cs.learnedAt = c.connOf(e).Broker, e.RespTime.UTC()
	if code != 0 {
		cs.nodeID, cs.host, cs.port = -1, "", 0
	}
	c.emitCoordinator(g, &CoordinatorEvent{
		Group: g.name, NodeID: cs.nodeID, Host: cs.host, Port: cs.port, LearnedFrom: cs.learnedFrom,
		Source: "find_coordinator", ErrorCode: code, Error: errName(code), at: cs.learnedAt,
	})
}

// coordServed records that e's broker answered one of g's requests as its
// coordinator. Without a FindCoordinator answer, that broker is the
// coordinator learned.
func (c *Correlator) coordServed(g *groupState, e *decode.Exchange) {
	if e.Conn == nil {
		return
	}
	server := e.Conn.Server
	if server != g.coord.served || g.coord.servedBy == "" {
		g.coord.served, g.coord.servedBy = server, server.String()
	}
	g.coord.servedAt = e.RespTime.UTC()
	if !g.coord.learnedAt.IsZero() {
		return
	}
	c.emitCoordinator(g, &CoordinatorEvent{
		Group: g.name, NodeID: c.nodeAt(server.String()), Host: server.Addr().Unmap().String(),
		Port: int32(server.Port()), LearnedFrom: server.String(), Source: "group_requests", at: g.coord.servedAt,
	})
}

// emitCoordinator emits ev unless it says what the last one said.
func (c *Correlator) emitCoordinator(g *groupState, ev *CoordinatorEvent) {
	if l := g.coord.last; l != nil && l.NodeID == ev.NodeID && l.Host == ev.Host && l.Port == ev.Port && l.ErrorCode == ev.ErrorCode {
		return
	}
	g.coord.last = ev
	c.emit(ev)
}

// nodeAt returns the node id Metadata gave address addr, or -1.
func (c *Correlator) nodeAt(addr string) int32 {
	best := int32(-1)
	for id, a := range c.brokers {
		if a == addr && (best < 0 || id < best) {
			best = id
		}
	}
	return best
}

func hostPort(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
