package correlate

import (
	"fmt"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

type memberStatus uint8

const (
	statusLive memberStatus = iota
	statusLeft
	statusExpired
)

// String is the status as output: live, left or expired.
func (s memberStatus) String() string {
	return [...]string{"live", "left", "expired"}[s]
}

// memberState is one member of a group, live or departed.
type memberState struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string
	process    capture.Process // of its last request's connection (eBPF), when known
	consumer   bool            // KIP-848 member (or share, streams: heartbeats with epochs)

	status     memberStatus
	announced  bool // its join was reported, or it predates the capture
	firstSeen  time.Time
	joinedAt   time.Time // its JoinGroup (epoch 0 heartbeat), if seen
	lastSeen   time.Time // its last request to the coordinator
	goneAt     time.Time
	goneReason string

	sessionMillis   int32 // 0: unknown
	rebalanceMillis int32
	heartbeatMillis int32 // KIP-848: the heartbeat interval the broker asked for
	generation      int32 // last generation (KIP-848: epoch) it was part of
	protocols       []string
	subscription    []string
	assignment      map[string][]int32
	assigned        bool
	tasks           *StreamsTasks // a streams group member's tasks (KIP-1071); nil otherwise

	fetched map[tp]*fetchState // what its Fetches asked for and got
	keys    []clientKey        // clients bound to it

	heartbeats      int64
	lastHeartbeat   time.Time
	maxHeartbeatGap time.Duration
	rebalancing     int64 // heartbeats answered REBALANCE_IN_PROGRESS
}

// member returns member id of g, creating it (live, not announced). When e
// is the member's own request, its client id and host are recorded. It
// returns nil for an empty id or when the member cap bites.
func (c *Correlator) member(g *groupState, id string, e *decode.Exchange) *memberState {
	if id == "" {
		return nil
	}
	m := g.members[id]
	if m == nil {
		if !c.makeRoom(g) {
			return nil
		}
		m = &memberState{id: id, firstSeen: c.now, generation: -1}
		g.members[id] = m
		c.anchor(g)
	}
	if e != nil {
		m.clientID, m.clientHost = e.ClientID, c.hostOf(e)
		processOf(e, &m.process)
		if t := e.ReqTime.UTC(); t.Before(m.firstSeen) {
			m.firstSeen = t
		}
	}
	return m
}

// makeRoom makes room for one more member of g, forgetting the departed
// member gone the longest; false when every member is live.
func (c *Correlator) makeRoom(g *groupState) bool {
	if len(g.members) < c.opts.MaxMembersPerGroup {
		return true
	}
	var old *memberState
	for _, m := range g.sortedMembers() {
		if m.status != statusLive && (old == nil || m.goneAt.Before(old.goneAt)) {
			old = m
		}
	}
	c.stats.Limits.MembersDropped++
	if old == nil {
		return false
	}
	delete(g.members, old.id)
	return true
}

func (m *memberState) setGeneration(id int32) {
	if id > m.generation {
		m.generation = id
	}
}

// touch records a request of m at t. accepted says the broker answered it
// as a member: a member judged expired is then live again (the judgement
// was wrong: the capture missed its traffic).
func (c *Correlator) touch(g *groupState, m *memberState, t time.Time, accepted bool) {
	if m == nil {
		return
	}
	if t = t.UTC(); t.After(m.lastSeen) {
		m.lastSeen = t
	}
	if accepted && m.status == statusExpired {
		m.status, m.goneAt, m.goneReason = statusLive, time.Time{}, ""
		if c.opts.CountsGroup == nil || c.opts.CountsGroup(g.name) {
			c.stats.ExpiriesRetracted++
		}
	}
}

// deadline returns when m's session runs out, if its timeout is known.
func (m *memberState) deadline(c *Correlator) (time.Time, bool) {
	switch {
	case m.consumer:
		return m.lastSeen.Add(c.opts.ConsumerSessionTimeout), true
	case m.sessionMillis > 0:
		return m.lastSeen.Add(time.Duration(m.sessionMillis) * time.Millisecond), true
	}
	return time.Time{}, false
}

// sweep expires members silent for longer than their session timeout plus
// (classic groups) their rebalance timeout: a member waiting in JoinGroup
// sends nothing for up to its rebalance timeout, and its JoinGroup is only
// delivered with the response. The expiry time is the session's end.
func (c *Correlator) sweep() {
	for _, g := range c.sortedGroups() {
		for _, m := range g.sortedMembers() {
			if m.status != statusLive {
				continue
			}
			d, ok := m.deadline(c)
			if !ok {
				continue
			}
			limit := d.Add(time.Duration(max(m.rebalanceMillis, 0)) * time.Millisecond)
			if c.now.After(limit) {
				c.memberGone(g, m, MemberExpired, "", d)
			}
		}
	}
}

// removed records that the broker no longer has member m (it is missing
// from a generation, or answered UNKNOWN_MEMBER_ID): m expired. The time
// is its session's end when that passed by at, else at.
func (c *Correlator) removed(g *groupState, m *memberState, at time.Time, why string) {
	if d, ok := m.deadline(c); ok && !d.After(at) {
		c.memberGone(g, m, MemberExpired, "", d)
		return
	}
	c.memberGone(g, m, MemberExpired, why, at)
}

// memberGone ends live member m: it left or expired at at. The event is
// emitted, its client bindings end, and the departure is remembered as a
// cause of the next generation.
func (c *Correlator) memberGone(g *groupState, m *memberState, action, reason string, at time.Time) {
	if m.status != statusLive {
		return
	}
	at = at.UTC()
	ev := &MemberEvent{
		Action: action, Group: g.name, MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
		InstanceID: strPtr(m.instanceID), Generation: m.generation, Reason: reason,
		SessionTimeoutMillis: m.sessionMillis, PID: m.process.PID, Comm: m.process.Comm, at: at,
	}
	kind := CauseMemberLeft
	m.status = statusLeft
	if action == MemberExpired {
		kind, m.status = CauseMemberExpired, statusExpired
		ev.LastSeen = timePtr(m.lastSeen)
		if !m.lastSeen.IsZero() {
			ev.SilentMillis = millis(at.Sub(m.lastSeen))
		}
		if ev.Reason == "" && !m.lastSeen.IsZero() {
			ev.Reason = fmt.Sprintf("no request to the coordinator for %v", at.Sub(m.lastSeen))
			if d, ok := m.deadline(c); ok {
				ev.Reason += fmt.Sprintf(" (session timeout %v)", d.Sub(m.lastSeen))
			}
		}
	}
	m.goneAt, m.goneReason = at, ev.Reason
	c.emit(ev)
	c.unbindMember(g.name, m, at)
	d := departure{member: m.id, kind: kind, reason: ev.Reason, at: at, emptied: !g.liveAt(at)}
	g.departures = append(g.departures, d)
	if d.emptied {
		g.emptied = true
	}
	c.regressionGone(g, m, action)
	c.checkGone(g, m, action, at)
	c.checkHoles(g, m, at)
}

// announceJoin reports that m joined g in generation gen.
func (c *Correlator) announceJoin(g *groupState, m *memberState, gen int32, reason string, at time.Time) {
	if m.announced {
		return
	}
	m.announced = true
	c.emit(&MemberEvent{
		Action: MemberJoined, Group: g.name, MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
		InstanceID: strPtr(m.instanceID), Generation: gen, Reason: reason,
		SessionTimeoutMillis: m.sessionMillis, PID: m.process.PID, Comm: m.process.Comm, at: at.UTC(),
	})
}

// hostOf returns the client address of e's connection, without port.
func (c *Correlator) hostOf(e *decode.Exchange) string {
	if e.Conn == nil {
		return ""
	}
	return c.names.of(e.Conn).host
}
