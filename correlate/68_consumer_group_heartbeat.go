package correlate

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// consumerGroupHeartbeat handles ConsumerGroupHeartbeat (key 68, KIP-848):
// member epoch 0 joins, -1 leaves, -2 leaves as a static member, and any
// other epoch heartbeats. The member epoch stands for the generation: the
// generation of a KIP-848 group is the epoch its members reach, completed
// when every live member has reached it. Assignments name topics by id.
func (c *Correlator) consumerGroupHeartbeat(e *decode.Exchange, req *kmsg.ConsumerGroupHeartbeatRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	resp, _ := e.Resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	id := req.MemberID
	if resp != nil && resp.MemberID != nil && *resp.MemberID != "" {
		id = *resp.MemberID
	}
	switch {
	case resp != nil && resp.ErrorCode == 0 && req.MemberEpoch == 0:
		c.convert(g, GroupConsumer, id, byConsumerJoin)
	case resp != nil && resp.ErrorCode == 0 && req.MemberEpoch > 0:
		c.convert(g, GroupConsumer, id, byConsumerBeat)
	default:
		g.setType(GroupConsumer)
	}
	g.protocolType = consumerProtocol
	if req.ServerAssignor != nil {
		g.protocol = *req.ServerAssignor
	}
	var code int16
	if resp != nil {
		code = resp.ErrorCode
	}
	c.epochHeartbeat(g, e, "ConsumerGroupHeartbeat", id, req.MemberEpoch, resp != nil, code,
		func(m *memberState, note string) { c.consumerLeave(g, m, req.MemberEpoch, e.ReqTime, note) },
		func() { c.consumerBeat(g, e, req, resp, id) })
	c.bind(e, g.name, id, req.InstanceID)
}

// epochHeartbeat is what a KIP-848, share or streams group heartbeat of
// member id (api names it in the group's errors) tells alike: no answer
// seen (a leave is taken as sent: leave, with its note), the member unknown
// or fenced (removed), another error (counted), a leave (member epoch < 0)
// or an accepted heartbeat (beat).
func (c *Correlator) epochHeartbeat(g *groupState, e *decode.Exchange, api, id string, epoch int32, answered bool, code int16,
	leave func(m *memberState, note string), beat func()) {
	m := g.members[id]
	switch {
	case !answered:
		c.touch(g, m, e.ReqTime, false)
		if epoch < 0 && m != nil {
			leave(m, " (no response seen)")
		}
	case code == kerr.UnknownMemberID.Code || code == kerr.FencedMemberEpoch.Code:
		c.answered(g, e, api, code)
		if m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, api+" answered "+errName(code))
		}
	case code != 0:
		c.answered(g, e, api, code)
		c.touch(g, m, e.ReqTime, false)
	case epoch < 0:
		c.answered(g, e, api, 0)
		if m = c.member(g, id, e); m != nil {
			m.consumer = true
			leave(m, "")
		}
	default:
		c.answered(g, e, api, 0)
		beat()
	}
}

// consumerLeave records a KIP-848 leave (epoch -1, or -2 for a static
// member that will come back).
func (c *Correlator) consumerLeave(g *groupState, m *memberState, epoch int32, at time.Time, note string) {
	reason := fmt.Sprintf("left (member epoch %d)%s", epoch, note)
	if epoch == -2 {
		reason = fmt.Sprintf("static member left, expecting to return (member epoch -2)%s", note)
	}
	c.touch(g, m, at, false)
	c.memberGone(g, m, MemberLeft, reason, at)
}

// consumerBeat handles an accepted KIP-848 heartbeat or join.
func (c *Correlator) consumerBeat(g *groupState, e *decode.Exchange, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, id string) {
	m := c.member(g, id, e)
	if m == nil {
		return
	}
	join := req.MemberEpoch == 0
	if join && m.status != statusLive {
		m.status, m.goneAt, m.goneReason, m.announced = statusLive, time.Time{}, "", false // a fenced member rejoining
	}
	m.consumer = true
	if req.InstanceID != nil {
		m.instanceID = strPtr(req.InstanceID)
	}
	var assigned []assignedTopic
	if a := resp.Assignment; a != nil {
		assigned = make([]assignedTopic, 0, len(a.Topics))
		for _, t := range a.Topics {
			assigned = append(assigned, assignedTopic{id: t.TopicID, partitions: t.Partitions})
		}
	}
	c.heartbeatBeat(g, m, e, join, resp.HeartbeatIntervalMillis, resp.MemberEpoch, req.SubscribedTopicNames, resp.Assignment != nil, assigned)
}

// assignedTopic is a topic's partitions in a heartbeat's assignment: by
// id (KIP-848, share groups) or by name (streams groups, from the tasks).
type assignedTopic struct {
	id         [16]byte
	name       string
	partitions []int32
}

// heartbeatBeat is what an accepted KIP-848 or share group heartbeat (or
// join) of member m tells alike: the heartbeat interval the broker asks
// for, the session kept alive (heartbeat_late), the subscription, and
// the assignment when sent (nil: unchanged), which the member owns from
// then on (non_owner_fetch after a revocation) and which moves the
// group's epoch.
func (c *Correlator) heartbeatBeat(g *groupState, m *memberState, e *decode.Exchange, join bool, interval, epoch int32,
	subscribed []string, sent bool, assigned []assignedTopic) {
	if interval > 0 {
		m.heartbeatMillis = interval
	}
	c.liveRequest(g, m.id, e.ReqTime.UTC(), e.ReqTime.UTC(), c.evidenceOf(e), true)
	if sent {
		c.memberHz(g.name, m.id).assignAt = e.RespTime.UTC()
	}
	c.touch(g, m, e.ReqTime, true)
	beat(m, e.ReqTime.UTC())
	c.consumerSubscription(g, m, subscribed)
	if sent {
		m.assignment, m.assigned = make(map[string][]int32, len(assigned)), true
		for _, t := range assigned {
			k := c.topicKey(t.name, t.id)
			m.assignment[k] = append(m.assignment[k], t.partitions...)
		}
		m.assignment = sortedAssignment(m.assignment)
	}
	if sent && epoch > m.generation {
		c.consumerFenced(g, m, epoch, e.RespTime.UTC())
	}
	m.generation = epoch
	at := e.ReqTime.UTC()
	if join && m.joinedAt.IsZero() {
		m.joinedAt = at
	}
	changed := false
	gen := c.generationFor(g, epoch, at)
	if gen != nil {
		changed = c.consumerReached(g, gen, m, at, join, sent)
		if changed {
			gen.witness(c.evidenceOf(e))
		}
	}
	if join {
		c.announceJoin(g, m, epoch, "", at)
	}
	c.consumerFinish(g, gen != nil && gen == g.cur() && changed, e.RespTime.UTC())
}

// fenceIntervals is how many heartbeat intervals a KIP-848 member must
// have been silent for (and at least minFenceSilence) before partitions it
// held going to another member at a new epoch say the broker fenced it;
// defaultHeartbeatInterval stands in when no answer gave the interval
// (Kafka's group.consumer.heartbeat.interval.ms).
const (
	fenceIntervals           = 3
	minFenceSilence          = time.Second
	defaultHeartbeatInterval = 5 * time.Second
)

// consumerFenced: member m reached epoch with an assignment holding
// partitions of a live member silent for fenceIntervals of its heartbeat
// interval. The broker fenced that member (its session timeout,
// group.consumer.session.timeout.ms, is not on the wire) and the group
// moved on without it; kwire learns it only now, at the epoch's answer.
func (c *Correlator) consumerFenced(g *groupState, m *memberState, epoch int32, at time.Time) {
	for _, o := range g.sortedMembers() {
		if o == m || !o.consumer || o.status != statusLive || o.generation >= epoch || !o.assigned || o.lastSeen.IsZero() {
			continue
		}
		interval := time.Duration(o.heartbeatMillis) * time.Millisecond
		if interval <= 0 {
			interval = defaultHeartbeatInterval
		}
		silent := at.Sub(o.lastSeen)
		if silent < max(fenceIntervals*interval, minFenceSilence) || !overlaps(m.assignment, o.assignment) {
			continue
		}
		c.removed(g, o, at, fmt.Sprintf("fenced: no heartbeat for %v (%d heartbeat intervals of %v), and epoch %d gave "+
			"its partitions to %s", silent.Round(time.Millisecond), int(silent/interval), interval, epoch, m.id))
	}
}

// overlaps reports whether assignments a and b share a partition.
func overlaps(a, b map[string][]int32) bool {
	for t, ps := range b {
		for _, p := range ps {
			if slices.Contains(a[t], p) {
				return true
			}
		}
	}
	return false
}

// consumerSubscription records a member's subscribed topics (sent only
// when they change); a change is a cause of the next epoch.
func (c *Correlator) consumerSubscription(g *groupState, m *memberState, topics []string) {
	if topics == nil {
		return
	}
	sub := slices.Clone(topics)
	slices.Sort(sub)
	sub = slices.Compact(sub)
	if m.subscription != nil && !slices.Equal(m.subscription, sub) && g.subChange == "" {
		g.subChange = fmt.Sprintf("subscription changed: %s %v -> %v", m.id, m.subscription, sub)
		g.subChangeBy = m.id
	}
	m.subscription = sub
}

// consumerReached records that m reached epoch gen, with the assignment
// the response sent (sent), or its assignment unchanged.
//
// A member's assignment at an epoch is what it holds once the epoch's
// reconciliation is done, as the broker reports a Stable group: within one
// member epoch the broker only adds partitions that other members released
// (KIP-848 "unreleased partitions", sent as they free up), or, once a newer
// group epoch exists, takes partitions away, keeping the member at its epoch
// until it confirms their revocation. So an assignment that grows the
// member's entry of the epoch completes it; one that removes partitions
// belongs to the next epoch (the member's own assignment follows it at
// once, for ownership). It reports whether m's entry of gen changed: m
// reached it, or its assignment of it grew.
func (c *Correlator) consumerReached(g *groupState, gen *genState, m *memberState, at time.Time, join, sent bool) bool {
	gen.joinsSeen = true
	gen.protocolType, gen.protocol = consumerProtocol, g.protocol
	switch g.typ {
	case GroupShare:
		gen.protocolType = shareProtocol
	case GroupStreams:
		gen.protocolType = streamsProtocol
	}
	if authority(gen.membersFrom) < authority(fromHeartbeat) {
		gen.membersFrom = fromHeartbeat
	}
	if gen.started.IsZero() || at.Before(gen.started) {
		gen.started = at
	}
	if join {
		if _, ok := gen.fresh[m.id]; !ok {
			gen.fresh[m.id] = at
		}
	}
	reached := gen.members[m.id] == nil
	gm := gen.member(m)
	gm.synced = true
	switch {
	case !m.assigned:
	case !gm.assigned, sent && grew(m, gm):
		gm.assignment, gm.assigned = sortedAssignment(m.assignment), true
		gm.tasks = m.tasks.clone()
		return true
	}
	return reached
}

// grew reports whether m's assignment holds every partition of its entry
// gm of a generation and more; for a streams group member, its tasks
// (active, standby and warm-up) every task of gm's and more.
func grew(m *memberState, gm *genMember) bool {
	if m.tasks != nil || gm.tasks != nil {
		return m.tasks.covers(gm.tasks) && !gm.tasks.covers(m.tasks)
	}
	return covers(m.assignment, gm.assignment) && !covers(gm.assignment, m.assignment)
}

// covers reports whether assignment a holds every partition of b.
func covers(a, b map[string][]int32) bool {
	for t, ps := range b {
		for _, p := range ps {
			if !slices.Contains(a[t], p) {
				return false
			}
		}
	}
	return true
}

// consumerFinish emits the latest epoch of a KIP-848 group once it is
// settled: every live member has reached it, and their assignments of it
// cover every partition of the topics they subscribe to (partition counts
// from Metadata responses), so no partition waits for another member to
// release it. Until then (or when the counts are unknown) the epoch is
// emitted when a later one begins, or at the end of the input. Its
// completion time is the answer that last changed it (changed) once every
// live member had reached it.
func (c *Correlator) consumerFinish(g *groupState, changed bool, at time.Time) {
	cur := g.cur()
	if cur == nil || cur.emitted {
		return
	}
	for _, m := range g.members {
		if m.status == statusLive && m.generation < cur.id {
			return
		}
	}
	if (changed || cur.completed.IsZero()) && at.After(cur.completed) {
		cur.completed = at
	}
	if c.consumerSettled(g, cur) {
		c.maybeFinish(g, cur)
	}
}

// consumerSettled reports whether the live members' assignments of gen
// cover every partition of the topics they subscribe to.
func (c *Correlator) consumerSettled(g *groupState, gen *genState) bool {
	topics := map[string]bool{}
	held := map[tp]bool{}
	for _, m := range g.members {
		if m.status != statusLive {
			continue
		}
		gm := gen.members[m.id]
		if m.subscription == nil || gm == nil || !gm.assigned {
			return false
		}
		for _, t := range m.subscription {
			topics[t] = true
		}
		for t, ps := range gm.assignment {
			for _, p := range ps {
				held[tp{t, p}] = true
			}
		}
	}
	if len(topics) == 0 {
		return false
	}
	for t := range topics {
		n, ok := c.partitionCounts[t]
		if !ok {
			return false
		}
		for p := range n {
			if !held[tp{t, p}] {
				return false
			}
		}
	}
	return true
}
