package correlate

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// leaver is one member named in a LeaveGroup request.
type leaver struct {
	id         string
	instanceID *string
	reason     string
}

// leaveGroup handles LeaveGroup (key 13): v0-v2 name the sender; v3+ a batch
// of members (KIP-345), each with a reason from v5 (KIP-800). A leave whose
// response was not seen is still taken as a leave: the request reached the
// broker.
func (c *Correlator) leaveGroup(e *decode.Exchange, req *kmsg.LeaveGroupRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	g.setType(GroupClassic)
	resp, _ := e.Resp.(*kmsg.LeaveGroupResponse)
	if resp != nil {
		c.answered(g, e, "LeaveGroup", resp.ErrorCode)
		if resp.ErrorCode != 0 {
			return
		}
	}
	leavers := []leaver{{id: req.MemberID}}
	if req.Version >= 3 {
		leavers = leavers[:0]
		for _, rm := range req.Members {
			leavers = append(leavers, leaver{id: rm.MemberID, instanceID: rm.InstanceID, reason: strVal(rm.Reason)})
		}
	}
	for _, l := range leavers {
		if resp != nil && leaveCode(resp, l) != 0 {
			continue
		}
		m := g.members[l.id]
		if m == nil && l.instanceID != nil {
			m = g.liveByInstance(*l.instanceID)
		}
		if m == nil {
			own := e
			if len(leavers) > 1 {
				own = nil // an admin removing members: not their client
			}
			if m = c.member(g, l.id, own); m == nil {
				continue
			}
			m.announced = true // predates the capture: never seen joining
		}
		reason := l.reason
		if resp == nil {
			reason = strings.TrimSpace(reason + " (no response seen)")
		}
		c.touch(g, m, e.ReqTime, false)
		c.memberGone(g, m, MemberLeft, reason, e.ReqTime)
	}
}

// leaveCode returns the broker's error for one leaver (v3+), 0 if absent.
func leaveCode(resp *kmsg.LeaveGroupResponse, l leaver) int16 {
	for _, rm := range resp.Members {
		if rm.MemberID == l.id && l.id != "" {
			return rm.ErrorCode
		}
		if l.id == "" && l.instanceID != nil && rm.InstanceID != nil && *rm.InstanceID == *l.instanceID {
			return rm.ErrorCode
		}
	}
	return 0
}
