package correlate

import (
	"maps"
	"math"
	"slices"
	"sort"
)

// groupSnapshot returns the output form of g.
func (c *Correlator) groupSnapshot(g *groupState) Group {
	o := Group{
		Group: g.name, GroupType: g.typ, ProtocolType: g.protocolType, Protocol: g.protocol,
		State: g.state(), Generation: -1, Coordinator: g.coord.snapshot(),
		Members: make([]Member, 0, len(g.members)), Errors: maps.Clone(g.errors),
		ListedState: g.listed, Hazards: c.groupHazardCounts(g.name),
	}
	if g.share != nil {
		o.Share = g.share.snapshot()
	}
	o.Streams = g.streams.summary()
	if g.described != nil {
		d := *g.described
		o.Described = &d
	}
	if cur := g.cur(); cur != nil {
		o.Generation, o.Leader = cur.id, cur.leader
		if cur.protocol != "" {
			o.Protocol = cur.protocol
		}
	}
	for _, m := range g.sortedMembers() {
		o.Members = append(o.Members, m.snapshot())
	}
	o.Generations = make([]GenerationEvent, 0, len(g.gens))
	for _, gen := range g.gens {
		o.Generations = append(o.Generations, *c.generationEvent(g, gen))
	}
	owners := g.owners()
	o.Partitions = make([]Partition, 0, len(g.parts))
	for _, p := range sortedTPs(g.parts) {
		pp := c.partSnapshot(g, g.parts[p], p, owners[p])
		if pp.Lag != nil {
			sum := *pp.Lag
			if o.Lag != nil {
				sum += *o.Lag
			}
			o.Lag = &sum
		}
		o.Health = worseHealth(o.Health, pp.Health)
		if pp.LagSeconds != nil && (o.LagSeconds == nil || *pp.LagSeconds > *o.LagSeconds) {
			o.LagSeconds, o.LagSecondsEstimated = pp.LagSeconds, pp.LagSecondsEstimated
		}
		o.Partitions = append(o.Partitions, pp)
	}
	return o
}

// owners maps each partition to the live member assigned it.
func (g *groupState) owners() map[tp]string {
	out := make(map[tp]string)
	for _, m := range g.sortedMembers() {
		if m.status != statusLive || !m.assigned {
			continue
		}
		for t, ps := range m.assignment {
			for _, p := range ps {
				out[tp{t, p}] = m.id
			}
		}
	}
	return out
}

func (cs *coordState) snapshot() Coordinator {
	return Coordinator{
		NodeID: cs.nodeID, Host: cs.host, Port: cs.port, ErrorCode: cs.code, Error: errName(cs.code),
		LearnedFrom: cs.learnedFrom, LearnedAt: timePtr(cs.learnedAt),
		ServedBy: cs.servedBy, ServedAt: timePtr(cs.servedAt),
		NotCoordinator: cs.notCoordinator, NotAvailable: cs.notAvailable,
	}
}

func (m *memberState) snapshot() Member {
	o := Member{
		MemberID: m.id, InstanceID: strPtr(m.instanceID), ClientID: m.clientID, ClientHost: m.clientHost,
		PID: m.process.PID, Comm: m.process.Comm, CgroupID: m.process.CgroupID,
		Status: m.status.String(), Generation: m.generation, JoinedAt: timePtr(m.joinedAt),
		FirstSeen: TimeOf(m.firstSeen), LastSeen: timePtr(m.lastSeen), GoneAt: timePtr(m.goneAt), Reason: m.goneReason,
		SessionTimeoutMillis: m.sessionMillis, RebalanceTimeoutMillis: m.rebalanceMillis,
		Protocols: slices.Clone(m.protocols), Subscription: slices.Clone(m.subscription),
		Heartbeats: m.heartbeats, MaxHeartbeatGapMillis: millis(m.maxHeartbeatGap),
		RebalanceInProgress: m.rebalancing,
	}
	if m.assigned {
		o.Assignment = sortedAssignment(m.assignment)
		o.Tasks = m.tasks.clone()
	}
	if len(m.fetched) > 0 {
		o.Fetched = partitionFetches(m.fetched)
	}
	return o
}

// partSnapshot returns a group's partition p (partOffsets), with its
// owner and commit history.
func (c *Correlator) partSnapshot(g *groupState, ps *partState, p tp, owner string) Partition {
	o := c.partOffsets(ps, p)
	o.Owner, o.Commits = owner, make([]Commit, 0, len(ps.commits.all()))
	if o.Lag != nil {
		o.Health = c.health(g, p, ps, *o.EndOffset, *o.Lag)
	}
	for _, r := range ps.commits.all() {
		o.Commits = append(o.Commits, Commit{
			TS: TimeOf(r.at), TSMillis: r.at.UnixMilli(), MemberID: r.member, Generation: r.generation, Offset: r.offset,
			Metadata: strPtr(r.metadata), ErrorCode: r.code, Error: errName(max(r.code, 0)), Outcome: commitOutcome(r.code),
			ClientID: r.clientID, ClientHost: r.clientHost, Conn: r.conn,
		})
	}
	if l := ps.listed; l != nil {
		o.ListOffsets = &ListOffsets{TS: TimeOf(l.at), TSMillis: l.at.UnixMilli(), Timestamp: l.timestamp, Offset: l.offset,
			ErrorCode: l.code, Error: errName(l.code)}
	}
	return o
}

// clientSnapshots returns every client's bindings, and the consumption of
// clients whose Fetches could not be attributed.
func (c *Correlator) clientSnapshots() ([]Client, []Consumption) {
	keys := make([]clientKey, 0, len(c.clients))
	for k := range c.clients {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	clients := make([]Client, 0, len(keys))
	var unattributed []Consumption
	for _, k := range keys {
		cs := c.clients[k]
		a := c.attribute(k)
		cl := Client{ClientHost: k.host, ClientID: k.clientID, Attribution: a.status, Group: a.group,
			PID: cs.process.PID, Comm: cs.process.Comm, CgroupID: cs.process.CgroupID,
			Candidates: a.candidates, Bindings: make([]Binding, 0, len(cs.bindings))}
		for _, g := range sortedKeys(cs.bindings) {
			cl.Bindings = append(cl.Bindings, cs.bindings[g].snapshot(g))
		}
		clients = append(clients, cl)
		if len(cs.unattributed) > 0 {
			unattributed = append(unattributed, Consumption{
				ClientHost: k.host, ClientID: k.clientID, Status: cs.lastStatus,
				Candidates: cs.candidates, Partitions: partitionFetches(cs.unattributed),
			})
		}
	}
	return clients, unattributed
}

func (b *binding) snapshot(group string) Binding {
	return Binding{
		Group: group, Members: sortedKeys(b.live), EndedMembers: sortedKeys(b.ended),
		WithoutMember: b.memberless, InstanceID: b.instanceID, LearnedFrom: b.learnedFrom,
		LearnedOnConn: b.conn, First: TimeOf(b.first), Last: TimeOf(b.last),
	}
}

// partOffsets returns the output form of ps without its owner, commit
// history and ListOffsets answer: its end is the newest evidence of any
// client's (endState), its own last Fetch's if newer; lag and lag in
// seconds are measured against it.
func (c *Correlator) partOffsets(ps *partState, p tp) Partition {
	o := Partition{
		Topic: p.topic, Partition: p.partition, CommittedGeneration: ps.committedGen,
		CommitsDropped: ps.commitsDropped, Fetch: ps.fetch.snapshot(),
	}
	end, endAt, from, ok := c.partEndFrom(ps, p)
	if ok {
		o.EndOffset, o.EndOffsetAt, o.EndOffsetFrom = &end, timePtr(endAt), from
		if ps.fetch.position >= 0 {
			o.PositionLag = i64(end - ps.fetch.position)
		}
	}
	if ps.hasCommitted {
		off := ps.committed
		o.Committed, o.CommittedAt = &off, timePtr(ps.committedAt)
		o.CommittedBy, o.CommittedSource = ps.committedBy, ps.committedSource
		if ok {
			o.Lag = i64(end - off)
			if lt, ok := c.lagSeconds(p, ps, end); ok {
				secs := math.Round(lt.seconds*1000) / 1000
				o.LagSeconds, o.LagSecondsEstimated = &secs, lt.estimated
				if *o.Lag > 0 {
					o.TimestampType = map[bool]string{false: "create_time", true: "log_append_time"}[lt.logAppend]
				}
			}
		}
	}
	return o
}

// PartitionOffsets calls fn with every group partition's offsets now
// (committed offset, fetch position, high watermark, lag...), groups by
// name and their partitions in order: what Snapshot says of them, without
// their owner and commit history or anything else, cheap enough to sample
// them over time (the HTML report). p is only valid during the call.
func (c *Correlator) PartitionOffsets(fn func(group string, p *Partition)) {
	for _, g := range c.sortedGroups() {
		for _, k := range sortedTPs(g.parts) {
			o := c.partOffsets(g.parts[k], k)
			fn(g.name, &o)
		}
	}
}
