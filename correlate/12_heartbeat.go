package correlate

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// heartbeat handles Heartbeat (key 12): it keeps a classic member's session
// alive. REBALANCE_IN_PROGRESS answers still mean "member"; UNKNOWN_MEMBER_ID
// means the broker removed it.
func (c *Correlator) heartbeat(e *decode.Exchange, req *kmsg.HeartbeatRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	g.setType(GroupClassic)
	resp, _ := e.Resp.(*kmsg.HeartbeatResponse)
	m := g.members[req.MemberID]
	if resp == nil {
		c.touch(g, m, e.ReqTime, false)
		c.bind(e, g.name, req.MemberID, req.InstanceID)
		return
	}
	c.answered(g, e, "Heartbeat", resp.ErrorCode)
	switch resp.ErrorCode {
	case 0, kerr.RebalanceInProgress.Code:
		m = c.member(g, req.MemberID, e)
		c.touch(g, m, e.ReqTime, true)
		beat(m, e.ReqTime.UTC())
		if resp.ErrorCode == 0 {
			c.observe(g, m, req.Generation, e)
		} else if m != nil {
			m.rebalancing++
		}
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		if m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, "Heartbeat answered "+errName(resp.ErrorCode))
		}
	default:
		c.touch(g, m, e.ReqTime, false)
	}
	c.bind(e, g.name, req.MemberID, req.InstanceID)
}

// beat records a heartbeat of m at t and the largest spacing so far.
func beat(m *memberState, t time.Time) {
	if m == nil {
		return
	}
	if !m.lastHeartbeat.IsZero() {
		if gap := t.Sub(m.lastHeartbeat); gap > m.maxHeartbeatGap {
			m.maxHeartbeatGap = gap
		}
	}
	m.lastHeartbeat = t
	m.heartbeats++
}
