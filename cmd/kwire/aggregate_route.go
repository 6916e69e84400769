package main

import (
	"hash/fnv"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/aggregate/wire"
)

// The router is the first stage of kwire aggregate --group
// (docs/aggregate.md, "Several aggregators"). Agents key their batches by
// client (host + client id), so one client's exchanges with every broker
// are in one partition of the agents' topic, and the router that owns the
// partition sees them all: it binds clients to the groups their requests
// name, as the correlator does, and sends each item to the partitions of
// the routed topic whose owners need it (routeKey):
//
//   - a client's items to its own key and to the key of every group it was
//     ever bound to (sticky: the correlator's attribution needs the other
//     groups' requests to call a client ambiguous); a client newly bound
//     to a group gets its buffered earlier items sent to that group too
//     (its Fetches may have been published by another broker's agent
//     before its JoinGroup was);
//   - a request naming groups without binding (LeaveGroup,
//     DescribeGroups) also to those groups;
//   - a client's earliest item so far also to its host's key
//     (client_id_churn counts the client ids a host creates);
//   - what teaches everyone (Metadata: topic names and brokers; ListGroups),
//     every agent's counters (its clock, loss, and that it stopped), and
//     anomalies of connections no exchange named a client of, to every
//     partition.
//
// Every agent batch read is also receipted to its agent's key, whose owner
// alone counts the agent's duplicate and missing batches.

// Routing keys: the routed topic's partition of a key is routeHash(key)
// modulo its partition count.
func groupRouteKey(group string) string     { return "g\x00" + group }
func clientRouteKey(client string) string   { return "c\x00" + client }
func hostRouteKey(host string) string       { return "h\x00" + host }
func agentRouteKey(a wire.Agent) string     { return "a\x00" + a.String() }
func clientOf(host, clientID string) string { return host + "\x00" + clientID }

// routeHash is FNV-1a 32 of key, modulo n: the routed topic's partition.
func routeHash(key string, n int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32() % uint32(n))
}

// Bounds of the router's memory.
const (
	// routeBufferItems: the latest items of a client kept for a group it
	// binds to later.
	routeBufferItems = 4096
	// routeRecent: agent batches remembered to drop duplicates.
	routeRecent = 1 << 16
	// routeClients: clients remembered; beyond, the least recently seen
	// are forgotten (their bindings with them).
	routeClients = 1 << 16
)

// router is the routing state of the partitions of the agents' topic a
// router owns. It runs on one goroutine.
type router struct {
	parts   int32 // of the routed topic
	clients map[string]*routeClient
	conns   map[connRef]string // an agent's connection: its latest client
	recent  map[wire.Receipt]bool
	order   []wire.Receipt // recent's, oldest first
	enc     *wire.Encoder
	encFor  wire.Agent
	out     map[int32]*wire.Routed
	seq     uint64 // items routed: the least recently seen client goes first
}

// routeClient is one client as the router knows it.
type routeClient struct {
	host    string
	groups  []string       // bound to, sorted
	parts   map[int32]bool // partitions its items go to
	buf     []wire.RoutedItem
	sent    [][]int32 // partitions each buffered item went to
	hostMin time.Time // earliest At sent to its host's partition
	last    uint64    // router.seq when last seen
}

func newRouter(parts int32) *router {
	return &router{parts: parts, clients: map[string]*routeClient{}, conns: map[connRef]string{},
		recent: map[wire.Receipt]bool{}}
}

// route returns what b, read at offset off of partition p of the agents'
// topic, sends to each partition of the routed topic.
func (r *router) route(b *wire.Batch, p int32, off int64) map[int32]*wire.Routed {
	r.out = map[int32]*wire.Routed{}
	rc := wire.Receipt{Agent: b.Agent, Seq: b.Seq}
	home := r.part(agentRouteKey(b.Agent))
	r.record(home, p, off).Receipts = append(r.record(home, p, off).Receipts, rc)
	if r.recent[rc] {
		return r.out // a duplicate: its owner counts it, nobody merges it
	}
	r.remember(rc)
	for i := range b.Items {
		r.item(b, i, p, off)
	}
	return r.out
}

func (r *router) remember(rc wire.Receipt) {
	if len(r.order) >= routeRecent {
		delete(r.recent, r.order[0])
		r.order = r.order[1:]
	}
	r.recent[rc] = true
	r.order = append(r.order, rc)
}

func (r *router) part(key string) int32 { return routeHash(key, r.parts) }

// record returns the routed record being built for partition q.
func (r *router) record(q, p int32, off int64) *wire.Routed {
	o := r.out[q]
	if o == nil {
		o = &wire.Routed{SrcPartition: p, SrcOffset: off}
		r.out[q] = o
	}
	return o
}

// encode re-encodes item i of b alone.
func (r *router) encode(b *wire.Batch, i int) []byte {
	if r.enc == nil || r.encFor != b.Agent {
		r.enc, r.encFor = wire.NewEncoder(b.Agent), b.Agent
	}
	e := r.enc
	e.Reset(b.Seq)
	it := &b.Items[i]
	switch it.Kind {
	case wire.KindExchange:
		e.Exchange(it.At, it.Exchange)
	case wire.KindAnomaly:
		e.Anomaly(it.At, it.Anomaly)
	case wire.KindCounters:
		e.Counters(it.At, it.Counters)
	}
	return slices.Clone(e.Bytes())
}

// item routes item i of b.
func (r *router) item(b *wire.Batch, i int, p int32, off int64) {
	it := &b.Items[i]
	ri := wire.RoutedItem{Agent: b.Agent, Seq: b.Seq, Index: i, Home: -1}
	send := func(q int32) {
		o := r.record(q, p, off)
		o.Items = append(o.Items, ri)
	}
	all := func() {
		ri.Batch = r.encode(b, i)
		for q := range r.parts {
			send(q)
		}
	}
	switch {
	case it.Kind == wire.KindCounters:
		ri.Home = r.part(agentRouteKey(b.Agent))
		all()
	case it.Kind == wire.KindAnomaly && it.Anomaly != nil:
		var k string
		if c := it.Anomaly.Conn; c != nil {
			k = r.conns[connRef{b.Agent, c.ID}]
		}
		if k == "" {
			host := ""
			if c := it.Anomaly.Conn; c != nil {
				host = c.Client.Addr().Unmap().String()
			}
			ri.Home = r.part(clientRouteKey(clientOf(host, "")))
			all()
			return
		}
		ri.Home = r.part(clientRouteKey(k))
		ri.Batch = r.encode(b, i)
		r.toClient(r.client(k, ""), ri, nil, p, off)
	case it.Kind == wire.KindExchange && it.Exchange != nil:
		x := it.Exchange
		if x.Key == int16(kmsg.Metadata) || x.Key == int16(kmsg.ListGroups) {
			all()
			return
		}
		host := ""
		if x.Conn != nil {
			host = x.Conn.Client.Addr().Unmap().String()
		}
		k := clientOf(host, x.ClientID)
		if x.Conn != nil {
			r.conns[connRef{b.Agent, x.Conn.ID}] = k
			if len(r.conns) > routeClients*4 {
				clear(r.conns)
			}
		}
		cl := r.client(k, host)
		ri.Batch = r.encode(b, i)
		named, binds := requestGroups(x.Req)
		for _, g := range binds {
			r.bind(cl, g, p, off)
		}
		var extra []int32
		for _, g := range named {
			extra = append(extra, r.part(groupRouteKey(g)))
		}
		if cl.hostMin.IsZero() || it.At.Before(cl.hostMin) {
			cl.hostMin = it.At
			extra = append(extra, r.part(hostRouteKey(host)))
		}
		r.toClient(cl, ri, extra, p, off)
	}
}

// client returns client k's state, forgetting the least recently seen
// clients beyond routeClients.
func (r *router) client(k, host string) *routeClient {
	r.seq++
	cl := r.clients[k]
	if cl == nil {
		if len(r.clients) >= routeClients {
			r.evict()
		}
		cl = &routeClient{host: host, parts: map[int32]bool{r.part(clientRouteKey(k)): true}}
		r.clients[k] = cl
	}
	cl.last = r.seq
	return cl
}

func (r *router) evict() {
	ks := make([]string, 0, len(r.clients))
	for k := range r.clients {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b string) int { return int(r.clients[a].last) - int(r.clients[b].last) })
	for _, k := range ks[:len(ks)/10+1] {
		delete(r.clients, k)
	}
}

// bind binds cl to group g: a group new to it gets its buffered items.
func (r *router) bind(cl *routeClient, g string, p int32, off int64) {
	if i, found := slices.BinarySearch(cl.groups, g); !found {
		cl.groups = slices.Insert(cl.groups, i, g)
	}
	q := r.part(groupRouteKey(g))
	if cl.parts[q] {
		return
	}
	cl.parts[q] = true
	for j, ri := range cl.buf {
		if !slices.Contains(cl.sent[j], q) {
			o := r.record(q, p, off)
			o.Items = append(o.Items, ri)
			cl.sent[j] = append(cl.sent[j], q)
		}
	}
}

// toClient sends ri to cl's partitions and extra, and buffers it.
func (r *router) toClient(cl *routeClient, ri wire.RoutedItem, extra []int32, p int32, off int64) {
	var sent []int32
	for q := range r.parts {
		if cl.parts[q] || slices.Contains(extra, q) {
			o := r.record(q, p, off)
			o.Items = append(o.Items, ri)
			sent = append(sent, q)
		}
	}
	if len(cl.buf) >= routeBufferItems {
		cl.buf, cl.sent = cl.buf[1:], cl.sent[1:]
	}
	cl.buf = append(cl.buf, ri)
	cl.sent = append(cl.sent, sent)
}

// requestGroups returns the groups a request names and those of them the
// correlator binds its client to (correlate's bind callers).
func requestGroups(req kmsg.Request) (named, binds []string) {
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		return nil, []string{q.Group}
	case *kmsg.SyncGroupRequest:
		return nil, []string{q.Group}
	case *kmsg.HeartbeatRequest:
		return nil, []string{q.Group}
	case *kmsg.OffsetCommitRequest:
		return nil, []string{q.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return nil, []string{q.Group}
	case *kmsg.OffsetFetchRequest:
		if q.Version >= 8 {
			for _, g := range q.Groups {
				binds = append(binds, g.Group)
			}
			return nil, binds
		}
		return nil, []string{q.Group}
	case *kmsg.FindCoordinatorRequest:
		if q.CoordinatorType != 0 {
			return nil, nil
		}
		if q.Version >= 4 {
			return nil, slices.Clone(q.CoordinatorKeys)
		}
		return nil, []string{q.CoordinatorKey}
	case *kmsg.LeaveGroupRequest:
		return []string{q.Group}, nil
	case *kmsg.DescribeGroupsRequest:
		return slices.Clone(q.Groups), nil
	}
	return nil, nil
}
