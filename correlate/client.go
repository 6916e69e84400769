package correlate

import (
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// clientKey identifies a client as the broker sees it (field report 1):
// the host it connects from and its client id, not one connection.
type clientKey struct {
	host     string
	clientID string
}

func (c *Correlator) keyOf(e *decode.Exchange) clientKey {
	return clientKey{host: c.hostOf(e), clientID: e.ClientID}
}

// clientState is one client's bindings to groups.
type clientState struct {
	key      clientKey
	bindings map[string]*binding // by group
	lastSeen time.Time
	process  capture.Process // of its last group request's connection (eBPF), when known
	// unattributed is what its Fetches got while no group could be
	// named for it (unknown or ambiguous).
	unattributed map[tp]*fetchState
	lastStatus   string
	candidates   []string
	// only is []string{the group} of a client bound to one group, kept
	// for attribute's candidates (never changed once made).
	only []string
}

// binding ties a client to a group. It is learned from any group request
// and outlives the connection that taught it; it ends when the client's
// members leave or expire.
type binding struct {
	live        map[string]bool      // live member ids
	ended       map[string]time.Time // members that left or expired
	memberless  bool                 // learned without a member id (FindCoordinator, OffsetFetch...)
	instanceID  string
	learnedFrom string // API of the request that taught it
	conn        uint64 // connection of that request
	first, last time.Time
}

// processOf sets *p to the process on e's client side, when the source
// knows it (eBPF).
func processOf(e *decode.Exchange, p *capture.Process) {
	if e.Conn != nil && e.Conn.Process != nil {
		*p = *e.Conn.Process
	}
}

// bind ties e's client to group, with member id memberID when the member
// is live (or unknown yet), else without one.
func (c *Correlator) bind(e *decode.Exchange, group, memberID string, instanceID *string) {
	cs := c.client(c.keyOf(e))
	t := e.ReqTime.UTC()
	cs.lastSeen = t
	processOf(e, &cs.process)
	b := cs.bindings[group]
	if b == nil {
		b = &binding{live: map[string]bool{}, ended: map[string]time.Time{}, learnedFrom: kmsg.NameForKey(e.Key), first: t}
		if e.Conn != nil {
			b.conn = e.Conn.ID
		}
		cs.bindings[group] = b
		if g := c.groups[group]; g != nil {
			g.boundTo(cs.key)
		}
	}
	b.last = t
	if instanceID != nil {
		b.instanceID = *instanceID
	}
	g := c.groups[group]
	var m *memberState
	if g != nil && memberID != "" {
		m = g.members[memberID]
	}
	switch {
	case memberID == "":
		if len(b.live) == 0 {
			b.memberless = true
		}
	case m == nil || m.status == statusLive:
		if m != nil && !slices.Contains(m.keys, cs.key) {
			m.keys = append(m.keys, cs.key)
		}
		b.live[memberID] = true
		b.memberless = false
		delete(b.ended, memberID)
	}
}

// client returns the state of client k, creating it (and forgetting the
// least recently seen clients beyond the cap).
func (c *Correlator) client(k clientKey) *clientState {
	cs := c.clients[k]
	if cs == nil {
		if len(c.clients) >= c.opts.MaxClients {
			c.evictClients()
		}
		cs = &clientState{key: k, bindings: map[string]*binding{}, lastSeen: c.now}
		c.clients[k] = cs
	}
	return cs
}

// unbindMember ends member m's bindings to group.
func (c *Correlator) unbindMember(group string, m *memberState, at time.Time) {
	keys := append(m.keys, clientKey{host: m.clientHost, clientID: m.clientID})
	for _, k := range keys {
		cs := c.clients[k]
		if cs == nil {
			continue
		}
		b := cs.bindings[group]
		if b == nil || !b.live[m.id] {
			continue
		}
		delete(b.live, m.id)
		b.ended[m.id] = at
	}
}

// evictClients forgets the least recently seen clients, down to 90% of
// the cap, so that eviction is rare.
func (c *Correlator) evictClients() {
	all := make([]*clientState, 0, len(c.clients))
	for _, cs := range c.clients {
		all = append(all, cs)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].lastSeen.Equal(all[j].lastSeen) {
			return all[i].lastSeen.Before(all[j].lastSeen)
		}
		return lessKey(all[i].key, all[j].key)
	})
	for _, cs := range all {
		if len(c.clients) < c.opts.MaxClients*9/10 {
			break
		}
		c.unboundFrom(cs)
		delete(c.clients, cs.key)
		c.stats.Limits.ClientsEvicted++
	}
}

func lessKey(a, b clientKey) bool {
	if a.host != b.host {
		return a.host < b.host
	}
	return a.clientID < b.clientID
}

// Attribution statuses (Client.Attribution and Consumption.Status).
const (
	AttrGroup     = "group"         // one group, from a live member or a member-less binding
	AttrFormer    = "former_member" // only a member that left or expired: a zombie's fetches
	AttrAmbiguous = "ambiguous"     // several groups: not guessed
	AttrUnknown   = "unknown"       // no group request seen from this client
)

// attribution names the group a client's Fetches serve.
type attribution struct {
	status     string
	group      string
	member     string // "" unless exactly one member of the client is in group
	candidates []string
}

// attribute decides which group client k consumes for: the group of its
// live members; else of its member-less bindings; else of the members it
// had. Two or more groups at the first level that has any is ambiguous.
func (c *Correlator) attribute(k clientKey) attribution {
	cs := c.clients[k]
	if cs == nil {
		return attribution{status: AttrUnknown}
	}
	if len(cs.bindings) == 1 {
		for g, b := range cs.bindings {
			return cs.attributeOnly(g, b) // what follows, without sorting or allocating
		}
	}
	levels := []func(*binding) bool{
		func(b *binding) bool { return len(b.live) > 0 },
		func(b *binding) bool { return b.memberless },
		func(b *binding) bool { return len(b.ended) > 0 },
	}
	for i, level := range levels {
		var groups []string
		for _, g := range sortedKeys(cs.bindings) {
			if level(cs.bindings[g]) {
				groups = append(groups, g)
			}
		}
		switch {
		case len(groups) > 1:
			return attribution{status: AttrAmbiguous, candidates: groups}
		case len(groups) == 1:
			a := attribution{status: AttrGroup, group: groups[0], candidates: groups}
			b := cs.bindings[groups[0]]
			switch {
			case i == 0 && len(b.live) == 1:
				a.member = sortedKeys(b.live)[0]
			case i == 2:
				a.status, a.member = AttrFormer, lastEnded(b.ended)
			}
			return a
		}
	}
	return attribution{status: AttrUnknown}
}

// attributeOnly is attribute for a client bound to group g alone.
func (cs *clientState) attributeOnly(g string, b *binding) attribution {
	var a attribution
	switch {
	case len(b.live) > 0:
		a.status = AttrGroup
		if len(b.live) == 1 {
			for m := range b.live {
				a.member = m
			}
		}
	case b.memberless:
		a.status = AttrGroup
	case len(b.ended) > 0:
		a.status, a.member = AttrFormer, lastEnded(b.ended)
	default:
		return attribution{status: AttrUnknown}
	}
	if len(cs.only) != 1 || cs.only[0] != g {
		cs.only = []string{g}
	}
	a.group, a.candidates = g, cs.only
	return a
}

// lastEnded returns the member whose binding ended last.
func lastEnded(ended map[string]time.Time) string {
	var id string
	var at time.Time
	for _, k := range sortedKeys(ended) {
		if id == "" || ended[k].After(at) {
			id, at = k, ended[k]
		}
	}
	return id
}
