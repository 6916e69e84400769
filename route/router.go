package route

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Bounds of a Router's memory.
const (
	// BufferItems is how many of a client's latest items a Router keeps
	// for a group the client binds to later.
	BufferItems = 4096
	// MaxClients is how many clients a Router remembers; beyond, the least
	// recently seen are forgotten (their bindings with them).
	MaxClients = 1 << 16
)

// Router binds clients to groups and sends each item it is given to the
// shards that need it (the package's rules). S names a source of
// connections (the connection ids of two sources may be the same: kwire
// aggregate's agents); T is what is sent, opaque to the Router, which
// keeps copies of the latest BufferItems of each client (so T should be
// small: a pointer, or a struct of a few words).
//
// A Router is not safe for concurrent use.
type Router[S comparable, T any] struct {
	n       int32
	send    func(shard int32, item T)
	clients map[string]*client[T]
	conns   map[connRef[S]]string // a connection: its latest client
	seq     uint64                // calls of client: the least recently seen goes first
}

type connRef[S comparable] struct {
	src S
	id  uint64
}

// client is one client as the Router knows it.
type client[T any] struct {
	shards  map[int32]bool // its items go to
	buf     []T
	sent    [][]int32 // the shards each buffered item went to
	hostMin time.Time // earliest item time sent to its host's shard
	last    uint64    // Router.seq when last seen
}

// New returns a Router over n shards (n > 0) that gives each item to
// send, once per shard it goes to, during the call that routes it (or a
// later Exchange's, for a buffered item of a client that binds to a new
// group). Items go to the shards in ascending order, buffered ones before
// the item of the call.
func New[S comparable, T any](n int32, send func(shard int32, item T)) *Router[S, T] {
	return &Router[S, T]{n: n, send: send, clients: map[string]*client[T]{}, conns: map[connRef[S]]string{}}
}

// Shard is the shard of key among the Router's.
func (r *Router[S, T]) Shard(key string) int32 { return Shard(key, r.n) }

// All sends item to every shard.
func (r *Router[S, T]) All(item T) {
	for q := range r.n {
		r.send(q, item)
	}
}

// Exchange routes item, which stands for exchange x of source src, given
// by its decoder at capture time at: a Metadata or ListGroups exchange to
// every shard, any other to its client's shards (binding the client to
// the groups its request names), and remembers x's connection as its
// client's.
func (r *Router[S, T]) Exchange(src S, at time.Time, x *decode.Exchange, item T) {
	if x.Key == int16(kmsg.Metadata) || x.Key == int16(kmsg.ListGroups) {
		r.All(item)
		return
	}
	host := ""
	if x.Conn != nil {
		host = x.Conn.Client.Addr().Unmap().String()
	}
	k := ClientOf(host, x.ClientID)
	if x.Conn != nil {
		r.conns[connRef[S]{src, x.Conn.ID}] = k
		if len(r.conns) > MaxClients*4 {
			clear(r.conns)
		}
	}
	cl := r.client(k)
	named, binds := requestGroups(x.Req)
	for _, g := range binds {
		r.bind(cl, g)
	}
	var extra []int32
	for _, g := range named {
		extra = append(extra, r.Shard(GroupKey(g)))
	}
	if cl.hostMin.IsZero() || at.Before(cl.hostMin) {
		cl.hostMin = at
		extra = append(extra, r.Shard(HostKey(host)))
	}
	r.toClient(cl, item, extra)
}

// AnomalyClient returns the client an anomaly of source src belongs to:
// the latest one an exchange named on its connection (known), else the
// client of no client id on the connection's host (not known; "" for no
// host). Its ClientKey's shard writes the anomaly's line.
func (r *Router[S, T]) AnomalyClient(src S, a *decode.Anomaly) (client string, known bool) {
	if c := a.Conn; c != nil {
		if k := r.conns[connRef[S]{src, c.ID}]; k != "" {
			return k, true
		}
		return ClientOf(c.Client.Addr().Unmap().String(), ""), false
	}
	return ClientOf("", ""), false
}

// Anomaly routes item, which stands for anomaly a of source src: to the
// shards of its client when known (AnomalyClient), else to every shard.
func (r *Router[S, T]) Anomaly(src S, a *decode.Anomaly, item T) {
	k, known := r.AnomalyClient(src, a)
	if !known {
		r.All(item)
		return
	}
	r.toClient(r.client(k), item, nil)
}

// client returns client k's state, forgetting the least recently seen
// clients beyond MaxClients.
func (r *Router[S, T]) client(k string) *client[T] {
	r.seq++
	cl := r.clients[k]
	if cl == nil {
		if len(r.clients) >= MaxClients {
			r.evict()
		}
		cl = &client[T]{shards: map[int32]bool{r.Shard(ClientKey(k)): true}}
		r.clients[k] = cl
	}
	cl.last = r.seq
	return cl
}

// evict forgets the least recently seen tenth of the clients.
func (r *Router[S, T]) evict() {
	ks := make([]string, 0, len(r.clients))
	for k := range r.clients {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b string) int { return int(r.clients[a].last) - int(r.clients[b].last) })
	for _, k := range ks[:len(ks)/10+1] {
		delete(r.clients, k)
	}
}

// bind binds cl to group g: a shard new to it gets its buffered items.
func (r *Router[S, T]) bind(cl *client[T], g string) {
	q := r.Shard(GroupKey(g))
	if cl.shards[q] {
		return
	}
	cl.shards[q] = true
	for j, it := range cl.buf {
		if !slices.Contains(cl.sent[j], q) {
			r.send(q, it)
			cl.sent[j] = append(cl.sent[j], q)
		}
	}
}

// toClient sends item to cl's shards and extra, and buffers it.
func (r *Router[S, T]) toClient(cl *client[T], item T, extra []int32) {
	var sent []int32
	for q := range r.n {
		if cl.shards[q] || slices.Contains(extra, q) {
			r.send(q, item)
			sent = append(sent, q)
		}
	}
	if len(cl.buf) >= BufferItems {
		cl.buf, cl.sent = cl.buf[1:], cl.sent[1:]
	}
	cl.buf = append(cl.buf, item)
	cl.sent = append(cl.sent, sent)
}
