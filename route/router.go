package route

import (
	"slices"
	"strings"
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
	stable  stableParts
	keep    int // items buffered per client (BufferItems, or SetBuffer's)
	// placed, when not nil, are the groups' shards (Place); fresh the
	// placements not yet taken (Placed); cross counts CrossBinds.
	placed map[string]int32
	fresh  []Placement
	cross  int64
}

type connRef[S comparable] struct {
	src S
	id  uint64
}

// client is one client as the Router knows it.
type client[T any] struct {
	own     int32           // its ClientKey's shard
	group   string          // the first group it was bound to, "" none
	keys    map[string]bool // it was bound to
	shards  map[int32]bool  // its items go to (own's only while group is "")
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
	return &Router[S, T]{n: n, send: send, clients: map[string]*client[T]{}, conns: map[connRef[S]]string{}, keep: BufferItems}
}

// SetBuffer sets how many of a client's latest items are kept for a group
// it binds to later (BufferItems by default). 0 keeps none: what a shard
// was not sent in its time it never gets (route.Shards, where a late item
// would reach a correlator already past it).
func (r *Router[S, T]) SetBuffer(n int) { r.keep = n }

// Shard is the shard of key among the Router's.
func (r *Router[S, T]) Shard(key string) int32 {
	if r.placed != nil {
		if q, ok := r.placed[key]; ok {
			return q
		}
	}
	return Shard(key, r.n)
}

// Placement is a group's shard as a placing Router chose it.
type Placement struct {
	Key   string // GroupKey
	Shard int32
}

// Place makes the Router choose the shard of each group it first meets
// (before, every key's shard is Shard's): a group first named by a
// client bound to a group already goes to that group's shard, so that
// the shard sees all the client's traffic to both; any other, Shard's.
// (kwire aggregate's routers, several, cannot agree on such a choice; the
// in-process Shards can.)
func (r *Router[S, T]) Place() { r.placed = map[string]int32{} }

// Placed returns the placements made since its last call, in order.
func (r *Router[S, T]) Placed() []Placement {
	out := r.fresh
	r.fresh = nil
	return out
}

// CrossBinds counts the clients bound to a group of a shard other than
// their home's (a placing Router): that shard did not see what the client
// did before, so what it says of the group may not be what one
// correlator says.
func (r *Router[S, T]) CrossBinds() int64 { return r.cross }

// place chooses the shard of group key k first met in a request of cl.
func (r *Router[S, T]) place(cl *client[T], k string) {
	if r.placed == nil || !strings.HasPrefix(k, "g\x00") {
		return
	}
	if _, ok := r.placed[k]; ok {
		return
	}
	q := Shard(k, r.n)
	if cl.group != "" {
		q = r.Shard(GroupKey(cl.group))
	}
	r.placed[k] = q
	r.fresh = append(r.fresh, Placement{k, q})
}

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
// client's. It returns the shard that counts x (correlate's counters of
// exchanges): its client's home, the shard of the first group it was
// bound to, else of its ClientKey (an OffsetCommit: its group's);
// 0 for one sent to every shard.
func (r *Router[S, T]) Exchange(src S, at time.Time, x *decode.Exchange, item T) (counts int32) {
	if x.Key == int16(kmsg.Metadata) || x.Key == int16(kmsg.ListGroups) {
		r.All(item)
		return 0
	}
	host := ""
	if x.Conn != nil {
		host = x.Conn.Client.Addr().Unmap().String()
	}
	k := ClientOf(host, x.ClientID)
	var prev string // the connection's client before
	if x.Conn != nil {
		prev = r.conns[connRef[S]{src, x.Conn.ID}]
		r.conns[connRef[S]{src, x.Conn.ID}] = k
		if len(r.conns) > MaxClients*4 {
			clear(r.conns)
		}
	}
	cl := r.client(k)
	named, binds := requestKeys(x.Req)
	for _, k := range binds {
		r.place(cl, k)
	}
	for _, k := range named {
		r.place(cl, k)
	}
	for _, k := range binds {
		r.bind(cl, k)
	}
	if r.stable.touches(x) {
		r.bind(cl, TxnKey())
	}
	var extra []int32
	for _, k := range named {
		extra = append(extra, r.Shard(k))
	}
	if cl.hostMin.IsZero() || at.Before(cl.hostMin) {
		cl.hostMin = at
		extra = append(extra, r.Shard(HostKey(host)))
	}
	// A client bound to a group has its home there; its own key's shard
	// still writes its producer_acks_weak hazards. What a client bound
	// to none consumes goes to every shard: the one of the group it may
	// bind to later must have it (its unattributed consumption, its fetch
	// sessions), and the shards do not get items late.
	switch {
	case cl.group != "" && x.Key == int16(kmsg.Produce):
		extra = append(extra, cl.own)
	case cl.group == "" && consumes(x):
		for q := range r.n {
			extra = append(extra, q)
		}
		// Its fetch session (by broker and id) is its connection's: one
		// whose client id changed (damaged bytes) is counted where the
		// connection's client before it has its home.
		if pc := r.clients[prev]; prev != k && pc != nil && pc.group != "" {
			r.toClient(cl, item, extra)
			return r.Shard(GroupKey(pc.group))
		}
	}
	r.toClient(cl, item, extra)
	if x.Key == int16(kmsg.OffsetCommit) && len(binds) == 1 {
		return r.Shard(binds[0]) // where the group's commit history is
	}
	if cl.group != "" {
		return r.Shard(GroupKey(cl.group))
	}
	return cl.own
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
	cl := r.client(k)
	r.toClient(cl, item, []int32{cl.own})
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
		own := r.Shard(ClientKey(k))
		cl = &client[T]{own: own, shards: map[int32]bool{own: true}}
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

// bind binds cl to key: a shard new to it gets its buffered items. The
// first group it is bound to moves its home there, off its own key's
// shard: that group's shard has all its items from then on.
func (r *Router[S, T]) bind(cl *client[T], key string) {
	if cl.keys[key] {
		return
	}
	if cl.keys == nil {
		cl.keys = map[string]bool{}
	}
	cl.keys[key] = true
	g, isGroup := strings.CutPrefix(key, "g\x00")
	if isGroup && cl.group != "" && r.placed != nil && r.Shard(key) != r.Shard(GroupKey(cl.group)) {
		r.cross++
	}
	if isGroup && cl.group == "" {
		delete(cl.shards, cl.own) // unless an earlier key is there
		for k := range cl.keys {
			if k != key && r.Shard(k) == cl.own {
				cl.shards[cl.own] = true
			}
		}
		cl.group = g
	}
	q := r.Shard(key)
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
	if r.keep == 0 {
		return
	}
	if len(cl.buf) >= r.keep {
		cl.buf, cl.sent = cl.buf[1:], cl.sent[1:]
	}
	cl.buf = append(cl.buf, item)
	cl.sent = append(cl.sent, sent)
}

// Home returns the key whose shard writes client's part of a snapshot
// (its binding, unattributed consumption): the first group it was bound
// to, whose shard has had its items since, else its ClientKey.
func (r *Router[S, T]) Home(client string) string {
	if cl := r.clients[client]; cl != nil && cl.group != "" {
		return GroupKey(cl.group)
	}
	return ClientKey(client)
}

// consumes reports whether x is a consumer's Fetch or ListOffsets.
func consumes(x *decode.Exchange) bool {
	switch req := x.Req.(type) {
	case *kmsg.FetchRequest:
		return !replica(req)
	case *kmsg.ListOffsetsRequest:
		return req.ReplicaID < 0
	}
	return false
}
