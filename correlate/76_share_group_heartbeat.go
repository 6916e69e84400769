package correlate

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// shareGroupHeartbeat handles ShareGroupHeartbeat (key 76, KIP-932):
// member epoch 0 joins, -1 leaves, and any other epoch heartbeats. As in
// KIP-848 groups, the member epoch stands for the generation, completed
// when every live member reached it, and the broker's assignment (topics
// by id) is what the member consumes from; a share group's partitions may
// be assigned to several members at once. A member the broker fences (its
// session timeout, group.share.session.timeout.ms, is not on the wire)
// expires as a KIP-848 member does: answered UNKNOWN_MEMBER_ID or
// FENCED_MEMBER_EPOCH, or silent while another member's new epoch takes
// its partitions, or silent past Options.ConsumerSessionTimeout.
func (c *Correlator) shareGroupHeartbeat(e *decode.Exchange, req *kmsg.ShareGroupHeartbeatRequest) {
	g := c.shareGroupOf(&req.GroupID)
	if g == nil {
		return
	}
	resp, _ := e.Resp.(*kmsg.ShareGroupHeartbeatResponse)
	id := req.MemberID
	if resp != nil && resp.MemberID != nil && *resp.MemberID != "" {
		id = *resp.MemberID
	}
	var code int16
	if resp != nil {
		code = resp.ErrorCode
	}
	c.epochHeartbeat(g, e, "ShareGroupHeartbeat", id, req.MemberEpoch, resp != nil, code,
		func(m *memberState, note string) { c.shareLeave(g, m, e.ReqTime, note, c.evidenceOf(e)) },
		func() { c.shareBeat(g, e, req, resp, id) })
	c.bind(e, g.name, id, nil)
}

// shareLeave records a share member's leave (member epoch -1): the broker
// releases the records it still holds, so they are no longer waiting for
// its acknowledgement.
func (c *Correlator) shareLeave(g *groupState, m *memberState, at time.Time, note string, ev Evidence) {
	c.touch(g, m, at, false)
	c.memberGone(g, m, MemberLeft, fmt.Sprintf("left (member epoch -1)%s", note), at)
	c.shareDropHeld(g, m.id, "", at, ev)
}

// shareBeat handles an accepted share group heartbeat or join, as
// consumerBeat does a KIP-848 one.
func (c *Correlator) shareBeat(g *groupState, e *decode.Exchange, req *kmsg.ShareGroupHeartbeatRequest, resp *kmsg.ShareGroupHeartbeatResponse, id string) {
	m := c.member(g, id, e)
	if m == nil {
		return
	}
	join := req.MemberEpoch == 0
	if join && m.status != statusLive {
		m.status, m.goneAt, m.goneReason, m.announced = statusLive, time.Time{}, "", false
	}
	m.consumer = true
	var assigned []assignedTopic
	if a := resp.Assignment; a != nil {
		assigned = make([]assignedTopic, 0, len(a.TopicPartitions))
		for _, t := range a.TopicPartitions {
			assigned = append(assigned, assignedTopic{id: t.TopicID, partitions: t.Partitions})
		}
	}
	c.heartbeatBeat(g, m, e, join, resp.HeartbeatIntervalMillis, resp.MemberEpoch, req.SubscribedTopicNames, resp.Assignment != nil, assigned)
}
