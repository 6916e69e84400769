package correlate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kwire/kwire/decode"
)

// Where a generation's member list comes from (GenerationEvent.MembersFrom),
// in increasing authority.
const (
	fromObserved  = "observed"
	fromHeartbeat = "heartbeat"
	fromSync      = "sync"
	fromJoin      = "join"
)

func authority(from string) int {
	switch from {
	case fromJoin:
		return 3
	case fromSync:
		return 2
	case fromHeartbeat:
		return 1
	}
	return 0
}

// genState is one generation of a group, built up as its exchanges arrive.
type genState struct {
	id           int32
	typ          string      // the group's type when it began ("" unknown)
	converted    *Conversion // the group converted to typ since the last generation
	prevID       int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*genMember
	membersFrom  string

	firstSeen, started, completed time.Time
	starter                       string               // the member whose JoinGroup was first (at started)
	joinsSeen                     bool                 // a JoinGroup response of it was seen
	fresh                         map[string]time.Time // members that joined anew, first join time
	departures                    []departure          // left or expired before it formed
	subChange                     string               // KIP-848 subscription change
	subChangeBy                   string               // the member whose subscription changed
	joinReasons                   map[string]string    // JoinGroup v8+ reason per member
	// statuses are the statuses a streams group's heartbeats of it were
	// answered with (KIP-1071), distinct, in order.
	statuses []string
	// replaced maps the member id of a static member (KIP-345) that
	// restarted during the generation, taking over its place without a
	// rebalance, to the member id it replaced (which stays in members:
	// the generation as formed).
	replaced      map[string]string
	emptiedBefore bool
	emitted       bool
	// evidence are the exchanges it rests on (witness).
	evidence []Evidence
}

// witness records an exchange gen rests on: a JoinGroup answered with
// it, a SyncGroup of it, a KIP-848 or share heartbeat that reached it or
// changed a member's assignment of it. The first maxEvidence-1 are kept
// (how it began) and the latest (what completed it so far).
func (gen *genState) witness(ev Evidence) {
	if len(gen.evidence) < maxEvidence {
		gen.evidence = append(gen.evidence, ev)
		return
	}
	gen.evidence[maxEvidence-1] = ev
}

// genMember is one member in one generation.
type genMember struct {
	instanceID      *string
	clientID        string
	clientHost      string
	subscription    []string
	assignment      map[string][]int32
	assigned        bool          // assignment known
	tasks           *StreamsTasks // a streams group member's (KIP-1071)
	fromSelf        bool          // from the member's own SyncGroup response
	opaque          bool
	assignmentBytes int
	synced          bool
}

// complete reports whether every member of an authoritative member list
// has its SyncGroup response (KIP-848: reached the epoch).
func (gen *genState) complete() bool {
	if authority(gen.membersFrom) < authority(fromHeartbeat) || len(gen.members) == 0 {
		return false
	}
	for _, gm := range gen.members {
		if !gm.synced {
			return false
		}
	}
	return true
}

// member returns gen's entry for member m, creating it.
func (gen *genState) member(m *memberState) *genMember {
	gm := gen.members[m.id]
	if gm == nil {
		gm = &genMember{}
		gen.members[m.id] = gm
	}
	gm.instanceID = m.instanceID
	gm.clientID, gm.clientHost = m.clientID, m.clientHost
	if m.subscription != nil {
		gm.subscription = m.subscription
	}
	return gm
}

// generationFor returns generation id of g, creating it when it is newer
// than every generation seen (previous ones are then emitted). It returns
// nil for an old generation no longer remembered.
func (c *Correlator) generationFor(g *groupState, id int32, t time.Time) *genState {
	cur := g.cur()
	if cur != nil && id <= cur.id {
		return g.gen(id)
	}
	c.emitPending(g)
	gen := &genState{
		id: id, prevID: -1, firstSeen: t, members: make(map[string]*genMember),
		membersFrom: fromObserved, fresh: make(map[string]time.Time), joinReasons: make(map[string]string),
		departures: g.departures, subChange: g.subChange, subChangeBy: g.subChangeBy, emptiedBefore: g.emptied,
		typ: g.typ, converted: g.converting,
	}
	g.converting = nil
	if cur != nil {
		gen.prevID = cur.id
	}
	if g.emptied {
		// The departures that emptied the group caused the generation
		// the broker formed without members, unseen on the wire.
		gen.departures = nil
	}
	if rb := g.pendJoin; rb != nil {
		gen.started, gen.starter, gen.fresh = rb.first, rb.starter, rb.fresh
		gen.witness(rb.firstEv)
		g.pendJoin = nil
	}
	g.departures, g.subChange, g.subChangeBy, g.emptied = nil, "", "", false
	g.gens = append(g.gens, gen)
	c.anchor(g)
	c.trimGenerations(g)
	return gen
}

// trimGenerations forgets the oldest emitted generations beyond the cap.
func (c *Correlator) trimGenerations(g *groupState) {
	for len(g.gens) > c.opts.MaxGenerations && g.gens[0].emitted {
		g.gens = g.gens[1:]
		c.stats.Limits.GenerationsDropped++
	}
}

// setMembership records the authoritative member list of gen: each
// member's id, instance id and subscription (metadata). Members of earlier
// generations missing from it were removed by the broker: they expired,
// unless they left.
func (c *Correlator) setMembership(g *groupState, gen *genState, from string, list []listedMember, at time.Time) {
	if authority(from) < authority(gen.membersFrom) {
		return
	}
	gen.membersFrom = from
	in := make(map[string]bool, len(list))
	for _, lm := range list {
		in[lm.id] = true
		m := c.member(g, lm.id, nil)
		if m == nil {
			continue
		}
		c.touch(g, m, time.Time{}, true) // listed: not expired, whatever kwire judged
		if lm.instanceID != nil {
			m.instanceID = lm.instanceID
		}
		if lm.subscription != nil {
			m.subscription = lm.subscription
		}
		m.setGeneration(gen.id)
		gm := gen.member(m)
		if lm.opaque {
			gm.opaque = true
		}
	}
	for id := range gen.members {
		if !in[id] {
			delete(gen.members, id)
		}
	}
	for _, m := range g.sortedMembers() {
		if m.status == statusLive && !in[m.id] && m.generation < gen.id {
			why := fmt.Sprintf("not a member of generation %d", gen.id)
			if d, ok := m.deadline(c); ok && d.After(at) {
				why += ": its session had not run out, so it did not rejoin the rebalance in time (or left unseen)"
			}
			c.removed(g, m, at, why)
		}
	}
	if gen != g.cur() {
		return
	}
	// Departures of members missing from gen are its causes, not the
	// next generation's; unless the departure left the group empty
	// before gen's members joined: the broker then bumped the generation
	// for the empty group, and gen was made by its joiners.
	keep := g.departures[:0]
	for _, d := range g.departures {
		switch {
		case in[d.member]:
			keep = append(keep, d)
		case d.emptied:
			gen.emptiedBefore, g.emptied = true, false
		default:
			gen.departures = append(gen.departures, d)
		}
	}
	g.departures = keep
}

// listedMember is a member named in a JoinGroup or SyncGroup member list.
type listedMember struct {
	id           string
	instanceID   *string
	subscription []string
	opaque       bool
}

// maybeFinish emits gen once it is complete.
func (c *Correlator) maybeFinish(g *groupState, gen *genState) {
	if !gen.emitted && gen.complete() {
		c.emitGeneration(g, gen)
	}
}

// emitPending emits every generation of g not yet emitted.
func (c *Correlator) emitPending(g *groupState) {
	for _, gen := range g.gens {
		if !gen.emitted {
			c.emitGeneration(g, gen)
		}
	}
}

// emitGeneration emits gen, announcing first the members that joined in it
// and were not yet announced.
func (c *Correlator) emitGeneration(g *groupState, gen *genState) {
	gen.emitted = true
	if prev := g.before(gen); prev != nil && authority(prev.membersFrom) >= authority(fromHeartbeat) {
		for _, id := range sortedKeys(gen.members) {
			if m := g.members[id]; m != nil && prev.members[id] == nil && !m.announced {
				c.announceJoin(g, m, gen.id, fmt.Sprintf("first seen in generation %d", gen.id), gen.firstSeen)
			}
		}
	}
	c.emit(c.generationEvent(g, gen))
	c.checkGeneration(g, gen)
	c.regressionGeneration(g, gen)
}

// generationEvent builds the event (also the snapshot's history entry).
func (c *Correlator) generationEvent(g *groupState, gen *genState) *GenerationEvent {
	ev := &GenerationEvent{
		Group: g.name, GroupType: g.typeOf(gen), Generation: gen.id, PreviousGeneration: gen.prevID,
		ProtocolType: gen.protocolType, Protocol: gen.protocol, Leader: gen.leader,
		Members: make([]GenerationMember, 0, len(gen.members)), MembersFrom: gen.membersFrom,
		Cause: c.cause(g, gen), Started: timePtr(gen.started), Completed: timePtr(gen.completed),
		Complete: gen.complete(), Converted: gen.converted, at: gen.firstSeen, StreamsStatuses: slices.Clone(gen.statuses),
		Evidence: slices.Clone(gen.evidence),
	}
	slices.SortStableFunc(ev.Evidence, func(a, b Evidence) int { return a.TS.Compare(b.TS.Time) })
	if gen.prevID >= 0 && !g.epochsAt(gen) {
		ev.Missed = gen.missed()
	}
	if !gen.started.IsZero() && !gen.completed.IsZero() {
		d := millis(gen.completed.Sub(gen.started))
		ev.DurationMillis = &d
	}
	switch {
	case !gen.completed.IsZero():
		ev.at = gen.completed
	case !gen.started.IsZero():
		ev.at = gen.started
	}
	for _, id := range sortedKeys(gen.members) {
		gm := gen.members[id]
		m := GenerationMember{
			MemberID: id, ClientID: gm.clientID, ClientHost: gm.clientHost,
			InstanceID: strPtr(gm.instanceID), Subscription: gm.subscription,
		}
		if gm.opaque {
			ev.OpaqueProtocol = true
			m.AssignmentBytes = gm.assignmentBytes
		} else if gm.assigned {
			m.Assignment = c.displayAssignment(gm.assignment)
			m.Tasks = gm.tasks.clone()
		}
		ev.Members = append(ev.Members, m)
	}
	return ev
}

// missed counts generations between the previous one seen and gen that the
// capture does not show, not counting the bump of an emptied group.
func (gen *genState) missed() int32 {
	n := gen.id - gen.prevID - 1
	if gen.emptiedBefore && n > 0 {
		n--
	}
	return n
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// observe records that member m sent a request of generation id that the
// broker accepted: a generation the capture did not show forming is
// created (cause unknown), and m is added to a member list not yet known.
func (c *Correlator) observe(g *groupState, m *memberState, id int32, e *decode.Exchange) *genState {
	if id < 0 || m == nil {
		return nil
	}
	gen := c.generationFor(g, id, e.ReqTime.UTC())
	if gen == nil {
		return nil
	}
	m.setGeneration(id)
	if gen.members[m.id] != nil || authority(gen.membersFrom) == authority(fromObserved) {
		gen.member(m)
	}
	return gen
}

// entry returns gen's entry for member id, or for the member id replaced
// (a restarted static member standing in for the one gen was formed with).
func (gen *genState) entry(id string) *genMember {
	if gm := gen.members[id]; gm != nil {
		return gm
	}
	if old := gen.replaced[id]; old != "" {
		return gen.members[old]
	}
	return nil
}
