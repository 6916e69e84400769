package correlate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// groupHazard is what hazard detection keeps for one group's membership.
type groupHazard struct {
	drops   []drop    // members the broker dropped, within StormWindow
	disrupt int       // drops and rejoins since the last generation emitted
	gens    []genMark // generations emitted within StormWindow
	rip     []time.Time
	joins   map[int32]*joinMark // accepted JoinGroups by generation
}

// drop is a member the broker removed without a LeaveGroup.
type drop struct {
	client   clientKey
	member   string
	at       time.Time
	rejoined bool
}

// genMark is one generation emitted.
type genMark struct {
	id         int32
	at         time.Time
	disruptive bool // a member was dropped, or a dropped client rejoined, before it
	ev         Evidence
	hasEv      bool
}

// joinMark is the first and the last accepted JoinGroup request of a
// generation: the last joiner is who the others waited for.
type joinMark struct {
	first, last     Evidence
	firstAt, lastAt time.Time
	lastMember      string
}

func (c *Correlator) groupHz(group string) *groupHazard {
	h := c.hz()
	gh := h.groups[group]
	if gh == nil {
		gh = &groupHazard{joins: make(map[int32]*joinMark)}
		h.groups[group] = gh
	}
	return gh
}

// joinHazards: an accepted JoinGroup keeps the session alive, may be a
// dropped client rejoining (a storm), and marks who joined last;
// INCONSISTENT_GROUP_PROTOCOL is reported.
func (c *Correlator) joinHazards(e *decode.Exchange, req *kmsg.JoinGroupRequest) {
	g := c.groups[req.Group]
	resp, _ := e.Resp.(*kmsg.JoinGroupResponse)
	if g == nil || resp == nil {
		return
	}
	k, ev := c.keyOf(e), c.evidenceOf(e)
	inconsistent := episodeKey(HazardInconsistentProtocol, g.name, k.host, k.clientID)
	switch resp.ErrorCode {
	case 0:
		c.endEpisode(inconsistent)
		id := resp.MemberID
		if id == "" {
			id = req.MemberID
		}
		c.liveRequest(g, id, e.ReqTime.UTC(), e.RespTime.UTC(), ev, true)
		gh := c.groupHz(g.name)
		c.rejoined(gh, k, e.ReqTime.UTC())
		jm := gh.joins[resp.Generation]
		if jm == nil {
			jm = &joinMark{first: ev, firstAt: e.ReqTime.UTC()}
			gh.joins[resp.Generation] = jm
		}
		if t := e.ReqTime.UTC(); !t.Before(jm.lastAt) {
			jm.last, jm.lastAt, jm.lastMember = ev, t, id
		}
		if t := e.ReqTime.UTC(); t.Before(jm.firstAt) {
			jm.first, jm.firstAt = ev, t
		}
	case kerr.InconsistentGroupProtocol.Code:
		hev := &HazardEvent{Kind: HazardInconsistentProtocol, Severity: SeverityWarn, Group: g.name,
			MemberID: req.MemberID, ClientID: k.clientID, ClientHost: k.host, at: e.ReqTime.UTC(),
			ErrorCode: resp.ErrorCode, Error: errName(resp.ErrorCode), GroupProtocol: g.protocol}
		for _, p := range req.Protocols {
			hev.Protocols = append(hev.Protocols, p.Name)
		}
		with := ""
		if g.protocol != "" {
			with = fmt.Sprintf(" (the group's members use %s/%s)", g.protocolType, g.protocol)
		}
		hev.Summary = fmt.Sprintf("%s: client %s on %s offers protocol type %s with %s and cannot join%s: "+
			"INCONSISTENT_GROUP_PROTOCOL, mixed assignors during a deploy; it consumes nothing until all members agree",
			g.name, k.clientID, k.host, req.ProtocolType, strings.Join(hev.Protocols, ","), with)
		hev.Evidence = []Evidence{ev}
		c.report(inconsistent, hev)
	}
}

// rejoined notes client k joining again after the broker dropped one of
// its members within StormWindow: a disruption.
func (c *Correlator) rejoined(gh *groupHazard, k clientKey, at time.Time) {
	for i := range gh.drops {
		if d := &gh.drops[i]; d.client == k && !d.rejoined && at.Sub(d.at) <= c.opts.Hazards.StormWindow {
			d.rejoined = true
			gh.disrupt++
			return
		}
	}
}

// heartbeatHazards: heartbeat spacing against the session timeout.
func (c *Correlator) heartbeatHazards(e *decode.Exchange, req *kmsg.HeartbeatRequest) {
	g := c.groups[req.Group]
	resp, _ := e.Resp.(*kmsg.HeartbeatResponse)
	if g == nil || resp == nil || (resp.ErrorCode != 0 && resp.ErrorCode != kerr.RebalanceInProgress.Code) {
		return
	}
	m := g.members[req.MemberID]
	if m == nil {
		return
	}
	at, ev := e.ReqTime.UTC(), c.evidenceOf(e)
	if resp.ErrorCode != 0 {
		gh := c.groupHz(g.name)
		window := c.opts.Hazards.StormWindow
		gh.rip = append(trimMarks(gh.rip, func(x time.Time) bool { return at.Sub(x) > window }), at)
	}
	mh := c.memberHz(g.name, m.id)
	hz := c.opts.Hazards
	if !mh.beatBase.IsZero() && m.sessionMillis > 0 && !m.consumer {
		spacing := at.Sub(mh.beatBase)
		session := time.Duration(m.sessionMillis) * time.Millisecond
		if spacing <= time.Duration(float64(session)*hz.HeartbeatSpacing) {
			mh.lateRun = 0
		} else if mh.lateRun++; mh.lateRun >= hz.HeartbeatSpacingRun {
			hev := c.lateEvent(g, m, at, spacing, SeverityInfo)
			hev.Count = int64(mh.lateRun)
			hev.Summary = fmt.Sprintf("%s: member %s (client %s) heartbeats every %v, above a third of its %v session "+
				"timeout (%d heartbeats in a row): one or two late heartbeats get it expired",
				g.name, m.id, m.clientID, spacing.Round(time.Millisecond), session, mh.lateRun)
			hev.Evidence = []Evidence{mh.liveEv, ev}
			hev.absent = &absence{clients: []clientKey{{m.clientHost, m.clientID}}, from: mh.beatBase, to: at}
			c.report(episodeKey(HazardHeartbeatLate, g.name, m.id, "spacing"), hev)
		}
	}
	c.liveRequest(g, m.id, at, at, ev, true)
}

// liveRequest records a request of member id that keeps its session alive
// (classic: Heartbeat, JoinGroup, SyncGroup, OffsetCommit; KIP-848:
// ConsumerGroupHeartbeat, OffsetCommit) sent at at and answered at done (a
// JoinGroup waits for the rebalance): a silence before it close to the
// session timeout is heartbeat_late. beat says it restarts heartbeat
// spacing (a heartbeat, or the end of a rebalance).
func (c *Correlator) liveRequest(g *groupState, id string, at, done time.Time, ev Evidence, beat bool) {
	mh := c.memberHz(g.name, id)
	m := g.members[id]
	if limit, _ := c.lateAfter(g, m, false); m != nil && mh.hasLive && limit > 0 {
		if gap := at.Sub(mh.lastLive); gap >= limit && !(mh.expired && mh.lastLive.Equal(mh.expiredLive)) {
			_, of := c.lateAfter(g, m, true)
			hev := c.lateEvent(g, m, at, gap, SeverityWarn)
			hev.Summary = fmt.Sprintf("%s: member %s (client %s) sent nothing to the coordinator for %v, %s: close to being "+
				"expired, which would revoke its partitions and replay its uncommitted records",
				g.name, m.id, m.clientID, gap.Round(time.Millisecond), of)
			if from, to := mh.liveEv.Conn.Broker, ev.Conn.Broker; from != "" && to != "" && from != to {
				// The coordinator moved in the silence (its broker died:
				// the client waited for the group's partition to get a new
				// leader). The new coordinator starts every member's
				// session when it loads the group: the member was never
				// close to expiry, and did nothing wrong.
				hev.Severity = SeverityInfo
				hev.Summary = fmt.Sprintf("%s: member %s (client %s) reached no coordinator for %v, %s: the group's coordinator "+
					"moved from %s to %s meanwhile, which starts the member's session anew; a broker failover, not a late member",
					g.name, m.id, m.clientID, gap.Round(time.Millisecond), of, from, to)
			}
			hev.Evidence = []Evidence{mh.liveEv, ev}
			hev.absent = &absence{clients: []clientKey{{m.clientHost, m.clientID}}, from: mh.lastLive, to: at}
			c.report(episodeKey(HazardHeartbeatLate, g.name, m.id, "gap", strconv.Itoa(int(m.generation))), hev)
		}
	}
	if done.After(mh.lastLive) {
		mh.lastLive, mh.liveEv, mh.hasLive = done, ev, true
	}
	if beat && done.After(mh.beatBase) {
		mh.beatBase = done
	}
}

func (c *Correlator) lateEvent(g *groupState, m *memberState, at time.Time, gap time.Duration, sev string) *HazardEvent {
	return &HazardEvent{Kind: HazardHeartbeatLate, Severity: sev, Group: g.name, MemberID: m.id,
		Generation: i32p(m.generation), ClientID: m.clientID, ClientHost: m.clientHost, at: at,
		HeartbeatGapMillis: millis(gap), SessionTimeoutMillis: m.sessionMillis, HeartbeatIntervalMillis: m.heartbeatMillis}
}

// lateIntervals is how many of its heartbeat intervals a KIP-848 member
// may be silent before heartbeat_late: its session timeout (the broker's
// group.consumer.session.timeout.ms) is not on the wire, and Kafka's
// defaults (5s, 45s) fence it after nine.
const lateIntervals = 5

// lateAfter returns the silence after which member m's next request is
// heartbeat_late (0: unknown), and what it is measured against: a classic
// member's session timeout; a KIP-848 member's heartbeat interval, or the
// session timeout assumed for it, whichever comes first. That text is
// made only when describe is set: the limit is asked for on every request
// that keeps a session alive.
func (c *Correlator) lateAfter(g *groupState, m *memberState, describe bool) (time.Duration, string) {
	frac := c.opts.Hazards.HeartbeatGap
	switch {
	case m == nil:
	case !m.consumer && m.sessionMillis > 0:
		session := time.Duration(m.sessionMillis) * time.Millisecond
		limit := time.Duration(float64(session) * frac)
		if !describe {
			return limit, ""
		}
		return limit, fmt.Sprintf("of its %v session timeout", session)
	case m.consumer && m.heartbeatMillis > 0:
		interval := time.Duration(m.heartbeatMillis) * time.Millisecond
		limit := min(lateIntervals*interval, time.Duration(float64(c.opts.ConsumerSessionTimeout)*frac))
		if !describe {
			return limit, ""
		}
		setting := "group.consumer.session.timeout.ms"
		switch g.typ {
		case GroupShare:
			setting = "group.share.session.timeout.ms"
		case GroupStreams:
			setting = "group.streams.session.timeout.ms"
		}
		return limit, fmt.Sprintf("%d times the %v heartbeat interval the broker asked for (the session timeout, "+
			"%s, is not on the wire)", int(limit/interval), interval, setting)
	}
	return 0, ""
}

// checkGone is called when member m leaves or expires at at. Every member
// the broker removed without a LeaveGroup is member_expired (issue 15):
// for its session timeout (silent for all of it, or a KIP-848 member
// fenced) or for its rebalance timeout (a classic member that did not
// rejoin a rebalance in time). Any removal is a disruption for
// rebalance_storm. It rests on absence (no request, no rejoin): loss on
// the member's connections since it was last seen makes it info.
func (c *Correlator) checkGone(g *groupState, m *memberState, action string, at time.Time) {
	if action != MemberExpired {
		return
	}
	gh := c.groupHz(g.name)
	k := clientKey{m.clientHost, m.clientID}
	gh.drops = append(gh.drops, drop{client: k, member: m.id, at: at})
	gh.disrupt++
	ev := &HazardEvent{Kind: HazardMemberExpired, Severity: SeverityWarn, Group: g.name, MemberID: m.id,
		Generation: i32p(m.generation), ClientID: m.clientID, ClientHost: m.clientHost, at: at,
		SessionTimeoutMillis: m.sessionMillis, LastSeen: timePtr(m.lastSeen)}
	silent := time.Duration(0)
	if !m.lastSeen.IsZero() {
		silent = at.Sub(m.lastSeen)
		ev.SilentMillis = millis(silent)
	}
	parts := ""
	switch {
	case g.typ == GroupShare && g.share != nil:
		parts = c.shareExpiredText(g, m, at)
	case m.assigned && len(m.assignment) > 0:
		again, n, one := uncommittedText(g, m)
		parts = fmt.Sprintf(": its partitions %s were not consumed meanwhile%s", assignmentText(m.assignment), again)
		if n > 0 {
			ev.Replayed = i64(n)
		}
		if one != nil {
			// On one partition: its range, so that the records a
			// commit_regression in force at the expiry names too are
			// counted once.
			ev.Topic, ev.Partition = one.p.topic, i32p(one.p.partition)
			ev.FromOffset, ev.ToOffset = i64(one.from), i64(one.to)
		}
	}
	who := fmt.Sprintf("%s: member %s (client %s on %s)", g.name, m.id, m.clientID, m.clientHost)
	switch d, ok := m.deadline(c); {
	case m.consumer:
		ev.Reason = "session_timeout"
		ev.SessionTimeoutMillis = 0 // group.consumer.session.timeout.ms is not on the wire
		ev.Summary = fmt.Sprintf("%s sent no heartbeat for %v and was fenced by the broker (%s) without leaving the group%s",
			who, silent.Round(time.Millisecond), m.goneReason, parts)
	case ok && !m.lastSeen.IsZero() && !at.Before(d):
		ev.Reason = "session_timeout"
		ev.Summary = fmt.Sprintf("%s sent nothing to the coordinator for %v, its session timeout, "+
			"and was removed without leaving the group%s", who, d.Sub(m.lastSeen).Round(time.Millisecond), parts)
	default:
		ev.Reason, ev.RebalanceTimeoutMillis = "rebalance_timeout", m.rebalanceMillis
		ev.Summary = fmt.Sprintf("%s was removed by the broker %v after its last request, before its %v session timeout "+
			"ran out (%s): it did not rejoin the rebalance within its %v rebalance timeout (a poll loop blocked by slow "+
			"processing), or its LeaveGroup is not in the capture%s", who, silent.Round(time.Millisecond),
			time.Duration(m.sessionMillis)*time.Millisecond, m.goneReason,
			time.Duration(m.rebalanceMillis)*time.Millisecond, parts)
	}
	ev.Evidence = []Evidence{}
	mh := c.hz().members[g.name][m.id]
	if mh != nil && mh.hasLive {
		ev.Evidence = []Evidence{mh.liveEv}
	}
	ev.absent = &absence{clients: []clientKey{k}, from: minTime(m.lastSeen, at), to: at}
	c.report(episodeKey(HazardMemberExpired, g.name, m.id), ev)
	if mh != nil && mh.hasLive {
		// The silence ended in expiry: that is its one finding. A classic
		// member rejoins with a new member id, whose silence starts anew;
		// a KIP-848 or share member (KIP-1082: the client keeps its id)
		// rejoins with the same one, and its first request after the
		// silence must not also make it heartbeat_late ("close to being
		// expired": it was expired). Expiry is judged before that request:
		// by time, by another member's epoch, or by the answer to it
		// (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
		mh.expiredLive, mh.expired = mh.lastLive, true
	}
}

// uncommittedText says what of the records m was delivered from its
// assigned partitions it had not committed, which the next owner
// processes again: from m's Fetches (the offset after the last batch
// delivered to it) against the group's committed offset. Said only as far
// as the capture shows it: a partition m fetched with no Fetch seen is
// not claimed either way. n counts the offsets of the ranges said with
// both ends (a partition with no commit seen is said, not counted); one is
// the range when it is the only one said.
func uncommittedText(g *groupState, m *memberState) (text string, n int64, one *uncommitted) {
	var again []string
	var counted []uncommitted
	unknown := false
	for _, t := range sortedKeys(m.assignment) {
		ps := slices.Clone(m.assignment[t])
		slices.Sort(ps)
		for _, p := range ps {
			f := m.fetched[tp{t, p}]
			if f == nil || f.delivered < 0 {
				unknown = true
				continue
			}
			ps := g.parts[tp{t, p}]
			switch {
			case ps == nil || !ps.hasCommitted:
				// No committed offset seen: the next owner starts where
				// auto.offset.reset (or an earlier commit) says.
				again = append(again, fmt.Sprintf("%s/%d below %d, no commit seen", t, p, f.delivered))
			case f.delivered > ps.committed:
				again = append(again, fmt.Sprintf("%s/%d %d..%d", t, p, ps.committed, f.delivered-1))
				n += f.delivered - ps.committed
				counted = append(counted, uncommitted{tp{t, p}, ps.committed, f.delivered - 1})
			}
		}
	}
	if len(again) == 1 && len(counted) == 1 {
		one = &counted[0]
	}
	switch {
	case len(again) > 0:
		const most = 5
		more := ""
		if len(again) > most {
			more = fmt.Sprintf(" and %d more partitions", len(again)-most)
			again = again[:most]
		}
		return fmt.Sprintf(", and the records it was delivered but had not committed (%s%s) are processed again by the next owner",
			strings.Join(again, ", "), more), n, one
	case unknown:
		return ", and records it had not committed, if any (its Fetches are not all in the capture), are processed again", 0, nil
	}
	return "; it had committed everything it was delivered, so nothing is processed again", 0, nil
}

// uncommitted is a range of records a member was delivered and had not
// committed: offsets from..to of p.
type uncommitted struct {
	p        tp
	from, to int64
}

func assignmentText(a map[string][]int32) string {
	var parts []string
	for _, t := range sortedKeys(a) {
		ps := slices.Clone(a[t])
		slices.Sort(ps)
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t+"/"+strings.Join(s, ","))
	}
	return strings.Join(parts, " ")
}

// checkGeneration is called when generation gen of g is emitted: storms
// and slow rebalances.
func (c *Correlator) checkGeneration(g *groupState, gen *genState) {
	gh := c.groupHz(g.name)
	at := gen.firstSeen
	if !gen.started.IsZero() {
		at = gen.started
	}
	gm := genMark{id: gen.id, at: at, disruptive: gh.disrupt > 0}
	gh.disrupt = 0
	if jm := gh.joins[gen.id]; jm != nil {
		gm.ev, gm.hasEv = jm.first, true
	}
	window := c.opts.Hazards.StormWindow
	gh.gens = append(gh.gens, gm)
	gh.gens = trimMarks(gh.gens, func(x genMark) bool { return at.Sub(x.at) > window })
	gh.drops = trimMarks(gh.drops, func(x drop) bool { return at.Sub(x.at) > window })
	gh.rip = trimMarks(gh.rip, func(x time.Time) bool { return at.Sub(x) > window })
	c.checkStorm(g, gh, gm)
	c.checkSlow(g, gh, gen)
	for id := range gh.joins {
		if id <= gen.id {
			delete(gh.joins, id)
		}
	}
}

func trimMarks[T any](s []T, old func(T) bool) []T {
	i := 0
	for i < len(s) && old(s[i]) {
		i++
	}
	return s[i:]
}

// checkStorm: StormGenerations disruptive generations within StormWindow.
func (c *Correlator) checkStorm(g *groupState, gh *groupHazard, last genMark) {
	key := episodeKey(HazardRebalanceStorm, g.name)
	var disruptive []genMark
	for _, x := range gh.gens {
		if x.disruptive {
			disruptive = append(disruptive, x)
		}
	}
	if c.episodeOpen(key) {
		if len(disruptive) == 0 {
			c.endEpisode(key)
		}
		return
	}
	if len(disruptive) < c.opts.Hazards.StormGenerations {
		return
	}
	first := gh.gens[0]
	ev := &HazardEvent{Kind: HazardRebalanceStorm, Severity: SeverityWarn, Group: g.name, at: last.at,
		Generations: len(gh.gens), FirstGeneration: i32p(first.id), LastGeneration: i32p(last.id),
		WindowMillis: millis(last.at.Sub(first.at)), Count: int64(len(disruptive)), RebalanceInProgress: int64(len(gh.rip))}
	clients := map[string]bool{}
	for _, d := range gh.drops {
		clients[d.client.clientID] = true
	}
	ev.ClientIDs = sortedKeys(clients)
	ev.ClientID = strings.Join(ev.ClientIDs, ",")
	for _, m := range g.sortedMembers() {
		ev.RebalanceTimeoutMillis = max(ev.RebalanceTimeoutMillis, m.rebalanceMillis)
	}
	ev.Summary = fmt.Sprintf("%s: %d generations (%d..%d) in %v, %d of them after the broker dropped a member "+
		"(no rejoin within the rebalance timeout, or an expired session) or a dropped client rejoined; %d heartbeats "+
		"answered REBALANCE_IN_PROGRESS: a rebalance loop, little is consumed", g.name, len(gh.gens), first.id, last.id,
		last.at.Sub(first.at).Round(time.Millisecond), len(disruptive), len(gh.rip))
	ev.Evidence = []Evidence{}
	for _, x := range disruptive {
		if x.hasEv {
			ev.Evidence = append(ev.Evidence, x.ev)
		}
	}
	// Members look dropped when their rejoin is not seen: lost JoinGroup
	// or SyncGroup answers make a storm of nothing.
	ab := &absence{from: first.at.Add(-time.Duration(ev.RebalanceTimeoutMillis) * time.Millisecond), to: last.at}
	for _, d := range gh.drops {
		ab.clients = append(ab.clients, d.client)
	}
	ev.absent = ab
	c.report(key, ev)
}

// checkSlow: a classic rebalance lasting SlowRebalance of the members'
// rebalance timeout. Partitions are not consumed meanwhile (all of them
// with an eager assignor). Folded into an open storm.
func (c *Correlator) checkSlow(g *groupState, gh *groupHazard, gen *genState) {
	if g.typ != GroupClassic || gen.started.IsZero() || gen.completed.IsZero() ||
		c.episodeOpen(episodeKey(HazardRebalanceStorm, g.name)) {
		return
	}
	var rt int32
	for id := range gen.members {
		if m := g.members[id]; m != nil {
			rt = max(rt, m.rebalanceMillis)
		}
	}
	dur := gen.completed.Sub(gen.started)
	timeout := time.Duration(rt) * time.Millisecond
	hz := c.opts.Hazards
	if rt <= 0 || dur < hz.SlowRebalanceMin || dur < time.Duration(float64(timeout)*hz.SlowRebalance) {
		return
	}
	ev := &HazardEvent{Kind: HazardRebalanceSlow, Severity: SeverityWarn, Group: g.name, Generation: i32p(gen.id),
		at: gen.completed, DurationMillis: millis(dur), RebalanceTimeoutMillis: rt}
	// A rebalance of an empty group (a new one: generation 1; or one its
	// last members had left) is held by the broker itself for
	// group.initial.rebalance.delay.ms (3 s by default, not on the wire),
	// longer for each member joining meanwhile, up to the rebalance
	// timeout (issue 37: seen on Kafka 4.4). Only what lasts beyond that
	// is the members'.
	brokerTimer := (gen.id == 1 || gen.emptiedBefore) && dur-timeout < time.Duration(float64(timeout)*hz.SlowRebalance)
	last := ""
	ev.Evidence = []Evidence{}
	if jm := gh.joins[gen.id]; jm != nil {
		ev.Evidence = []Evidence{jm.first, jm.last}
		if jm.first == jm.last {
			ev.Evidence = ev.Evidence[:1]
		}
		switch wait := jm.lastAt.Sub(gen.started); {
		case brokerTimer:
		case wait >= dur/2:
			ev.MemberID = jm.lastMember
			last = fmt.Sprintf("; %s joined last, %v after the rebalance began", jm.lastMember, wait.Round(time.Millisecond))
			if m := g.members[jm.lastMember]; m != nil {
				ev.ClientID, ev.ClientHost = m.clientID, m.clientHost
			}
		default:
			last = fmt.Sprintf("; the members seen joining had joined within %v: it waited for a member that did not "+
				"rejoin in time, or for the leader's assignment", wait.Round(time.Millisecond))
		}
	}
	head := fmt.Sprintf("%s generation %d: the rebalance took %v, %d%% of the %v rebalance timeout",
		g.name, gen.id, dur.Round(time.Millisecond), int(100*dur/timeout), timeout)
	if brokerTimer {
		ev.Severity = SeverityInfo
		ev.Summary = head + ", but the group was empty when it began: the broker holds such a rebalance for " +
			"group.initial.rebalance.delay.ms (3s by default), longer as members keep joining, up to the rebalance " +
			"timeout; its own timer, not a slow member"
	} else {
		ev.Summary = head + last + "; the group's partitions being moved (all of them with an eager assignor) were not " +
			"consumed meanwhile"
	}
	// It rests on the JoinGroups not seen earlier, of the members that
	// joined and of those it waited for in vain: any connection.
	ev.absent = &absence{from: gen.started, to: gen.completed}
	c.report(episodeKey(HazardRebalanceSlow, g.name, strconv.Itoa(int(gen.id))), ev)
}
