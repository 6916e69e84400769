package correlate

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
	m := g.members[id]
	switch {
	case resp == nil:
		c.touch(g, m, e.ReqTime, false)
		if req.MemberEpoch < 0 && m != nil {
			c.shareLeave(g, m, e.ReqTime, " (no response seen)", c.evidenceOf(e))
		}
	case resp.ErrorCode == kerr.UnknownMemberID.Code || resp.ErrorCode == kerr.FencedMemberEpoch.Code:
		c.answered(g, e, "ShareGroupHeartbeat", resp.ErrorCode)
		if m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, "ShareGroupHeartbeat answered "+errName(resp.ErrorCode))
		}
	case resp.ErrorCode != 0:
		c.answered(g, e, "ShareGroupHeartbeat", resp.ErrorCode)
		c.touch(g, m, e.ReqTime, false)
	case req.MemberEpoch < 0:
		c.answered(g, e, "ShareGroupHeartbeat", 0)
		if m = c.member(g, id, e); m != nil {
			m.consumer = true
			c.shareLeave(g, m, e.ReqTime, "", c.evidenceOf(e))
		}
	default:
		c.answered(g, e, "ShareGroupHeartbeat", 0)
		c.shareBeat(g, e, req, resp, id)
	}
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
			assigned = append(assigned, assignedTopic{t.TopicID, t.Partitions})
		}
	}
	c.heartbeatBeat(g, m, e, join, resp.HeartbeatIntervalMillis, resp.MemberEpoch, req.SubscribedTopicNames, resp.Assignment != nil, assigned)
}
