package correlate

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwire/kwire/decode"
)

// Group types (GenerationEvent.GroupType).
const (
	GroupClassic  = "classic"  // JoinGroup/SyncGroup/Heartbeat
	GroupConsumer = "consumer" // KIP-848 ConsumerGroupHeartbeat
	// GroupShare ("share", share.go): KIP-932 ShareGroupHeartbeat.
	// GroupStreams ("streams", streams.go): KIP-1071 StreamsGroupHeartbeat.
)

// groupState is everything known about one group.
type groupState struct {
	name string
	typ  string // GroupClassic, GroupConsumer, GroupShare, GroupStreams or "" until known
	// converting is a conversion to typ (KIP-848 online migration) not
	// yet told: the next generation's (convert.go).
	converting   *Conversion
	protocolType string
	protocol     string

	members map[string]*memberState
	gens    []*genState // ascending generation ids

	// Until the next generation forms: the rebalance under way (classic),
	// the departures and subscription changes that will be its cause, and
	// whether the group became empty (the broker then bumps the
	// generation once without a member seeing it).
	pendJoin    *rebalance
	departures  []departure
	subChange   string
	subChangeBy string // the member whose subscription changed first
	emptied     bool

	parts     map[tp]*partState
	lastFetch time.Time // the last answered Fetch attributed to the group (health.go)
	coord     coordState
	errors    map[string]int64 // "API:ERROR_NAME" -> answers
	described *Described
	listed    string // state from the last ListGroups answer
	// share is a share group's records (KIP-932, share.go); nil for
	// other groups.
	share *shareState
	// streams is a streams group's topology and statuses (KIP-1071,
	// streams.go); nil for other groups.
	streams *streamsState

	// anchored: the group has had a member, a generation or an accepted
	// commit (OffsetCommit, or TxnOffsetCommit in a committed
	// transaction). Until then it is only a name that requests mentioned
	// (FindCoordinator, DescribeGroups, ListGroups, OffsetFetch, refused
	// commits), which any client can do for any name: such a loose group
	// may be forgotten to make room (groups.go), an anchored one never
	// is. (Not an OffsetFetch answer with offsets either: it names every
	// idle group the cluster keeps offsets of, to anyone who asks.)
	anchored bool
	// used is the correlator's groupClock at the group's last use: the
	// least recently used loose groups are forgotten first.
	used uint64
	// boundBy are the clients bound to a loose group, whose bindings go
	// with it when it is forgotten; nil once anchored.
	boundBy map[clientKey]struct{}
}

// rebalance is a classic rebalance whose generation has not formed yet.
type rebalance struct {
	first   time.Time            // earliest JoinGroup request
	firstEv Evidence             // its exchange
	starter string               // the member that sent it ("" if it had no id yet)
	fresh   map[string]time.Time // members joining anew (MEMBER_ID_REQUIRED)
}

// departure is a member that left or expired, remembered as a possible
// cause of the next generation.
type departure struct {
	member string
	kind   string // CauseMemberLeft or CauseMemberExpired
	reason string
	at     time.Time
	// emptied: no other member was in the group at that time, so the
	// broker bumped the generation for the empty group (unseen on the
	// wire): the departure caused that bump, not the next generation
	// seen, which the members joining the empty group caused.
	emptied bool
}

// group returns the group named name, creating it (loose, see
// groupState.anchored); nil when the group cap bites and no loose group
// is left to forget.
func (c *Correlator) group(name string) *groupState {
	c.groupClock++
	if g := c.groups[name]; g != nil {
		g.used = c.groupClock
		return g
	}
	if len(c.groups) >= c.opts.MaxGroups && !c.forgetLoose() {
		c.stats.Limits.GroupsDropped++
		return nil
	}
	g := &groupState{
		name:    name,
		members: make(map[string]*memberState),
		parts:   make(map[tp]*partState),
		errors:  make(map[string]int64),
		coord:   coordState{nodeID: -1},
		used:    c.groupClock,
	}
	c.groups[name] = g
	c.loose[name] = g
	return g
}

// typeOf is g's type when gen began, else (not known then) g's type.
func (g *groupState) typeOf(gen *genState) string {
	if gen.typ != "" {
		return gen.typ
	}
	return g.typ
}

// epochsAt reports whether gen is a member epoch that members may skip
// (KIP-848, share and streams groups), by the group's type when gen began: it
// changes when the broker converts the group (convert.go).
func (g *groupState) epochsAt(gen *genState) bool { return epochType(g.typeOf(gen)) }

// epochs reports whether g, by its type now, counts member epochs.
func (g *groupState) epochs() bool { return epochType(g.typ) }

// epochType reports whether groups of type t count member epochs that
// members may skip (KIP-848, share and streams groups), not classic
// generations.
func epochType(t string) bool { return t == GroupConsumer || t == GroupShare || t == GroupStreams }

// setType records the group type the first time it is known.
func (g *groupState) setType(typ string) {
	if g.typ == "" {
		g.typ = typ
	}
}

// cur returns the latest generation, or nil.
func (g *groupState) cur() *genState {
	if len(g.gens) == 0 {
		return nil
	}
	return g.gens[len(g.gens)-1]
}

// memberGenAt returns the generation member was in at t: the newest
// generation with it among its members first seen by then. An exchange
// is judged when its response comes, and a long-polling Fetch answers
// after the next generation may have formed; its evidence belongs to
// the generation of its request. -1 when none is remembered.
func (g *groupState) memberGenAt(member string, t time.Time) int32 {
	for i := len(g.gens) - 1; i >= 0; i-- {
		gen := g.gens[i]
		if _, in := gen.members[member]; in && !gen.firstSeen.After(t) {
			return gen.id
		}
	}
	return -1
}

// gen returns generation id, or nil.
func (g *groupState) gen(id int32) *genState {
	i := sort.Search(len(g.gens), func(i int) bool { return g.gens[i].id >= id })
	if i < len(g.gens) && g.gens[i].id == id {
		return g.gens[i]
	}
	return nil
}

// before returns the generation seen before gen, or nil.
func (g *groupState) before(gen *genState) *genState {
	i := sort.Search(len(g.gens), func(i int) bool { return g.gens[i].id >= gen.id })
	if i == 0 {
		return nil
	}
	return g.gens[i-1]
}

// openRebalance returns the rebalance under way, starting one at t with
// a JoinGroup of member (its id, "" when it has none yet), exchange ev.
func (g *groupState) openRebalance(t time.Time, member string, ev Evidence) *rebalance {
	if g.pendJoin == nil {
		g.pendJoin = &rebalance{first: t, firstEv: ev, starter: member, fresh: make(map[string]time.Time)}
	}
	if t.Before(g.pendJoin.first) {
		g.pendJoin.first, g.pendJoin.firstEv, g.pendJoin.starter = t, ev, member
	}
	return g.pendJoin
}

// live reports whether any member is live.
func (g *groupState) live() bool {
	for _, m := range g.members {
		if m.status == statusLive {
			return true
		}
	}
	return false
}

// liveAt reports whether any member live now was already in the group at
// t: a member seen joining after t (an expiry is often confirmed only
// once the next member joined) was not.
func (g *groupState) liveAt(t time.Time) bool {
	for _, m := range g.members {
		if m.status == statusLive && (m.joinedAt.IsZero() || !m.joinedAt.After(t)) {
			return true
		}
	}
	return false
}

// state is kwire's view of the group's state now.
func (g *groupState) state() string {
	switch {
	case g.pendJoin != nil:
		return "rebalancing"
	case !g.live() && len(g.gens) > 0:
		return "empty"
	case g.cur() == nil:
		return "unknown"
	case !g.cur().complete() && !g.joinUnseen():
		return "rebalancing"
	}
	return "stable"
}

// joinUnseen reports whether the current generation of a classic group
// is known only from what its members do in it (Heartbeat, OffsetCommit,
// Fetch): it formed before the capture began, no JoinGroup or SyncGroup
// of it was seen. Its members answered in it are a stable group, not one
// rebalancing. (A KIP-848, share or streams group's heartbeats say
// themselves whether its members reached the epoch.)
func (g *groupState) joinUnseen() bool {
	gen := g.cur()
	return !g.epochs() && gen.started.IsZero() && !gen.joinsSeen &&
		authority(gen.membersFrom) < authority(fromSync)
}

// answered records the broker's answer to one of the group's requests:
// error counts, and which broker serves the group (see coordServed).
func (c *Correlator) answered(g *groupState, e *decode.Exchange, api string, code int16) {
	if code != 0 {
		g.errors[api+":"+errName(code)]++
	}
	switch code {
	case kerr.NotCoordinator.Code:
		g.coord.notCoordinator++
	case kerr.CoordinatorNotAvailable.Code:
		g.coord.notAvailable++
	case kerr.CoordinatorLoadInProgress.Code:
	default:
		c.coordServed(g, e)
	}
}

// sortedMembers returns the members sorted by id.
func (g *groupState) sortedMembers() []*memberState {
	out := make([]*memberState, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// liveByInstance returns the live member with instance id id, if any.
func (g *groupState) liveByInstance(id string) *memberState {
	for _, m := range g.sortedMembers() {
		if m.status == statusLive && m.instanceID != nil && *m.instanceID == id {
			return m
		}
	}
	return nil
}
