package correlate

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// syncGroup handles SyncGroup (key 14): the leader sends every member's
// assignment, and each member gets its own in the response. The last
// SyncGroup response of a generation completes its rebalance.
func (c *Correlator) syncGroup(e *decode.Exchange, req *kmsg.SyncGroupRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	g.setType(GroupClassic)
	resp, _ := e.Resp.(*kmsg.SyncGroupResponse)
	m := g.members[req.MemberID]
	if resp == nil {
		c.touch(g, m, e.ReqTime, false)
		c.bind(e, g.name, req.MemberID, req.InstanceID)
		return
	}
	c.answered(g, e, "SyncGroup", resp.ErrorCode)
	switch resp.ErrorCode {
	case 0:
		m = c.member(g, req.MemberID, e)
		c.touch(g, m, e.RespTime, true)
		if gen := c.observe(g, m, req.Generation, e); gen != nil && g.typ == GroupConsumer {
			c.classicEpochSync(g, gen, m, resp.MemberAssignment, e)
		} else if gen != nil {
			ptype := syncProtocolType(g, gen, req, resp)
			if resp.Protocol != nil && gen.protocol == "" {
				gen.protocol = *resp.Protocol
			}
			if len(req.GroupAssignment) > 0 {
				c.leaderPlan(g, gen, req, ptype, e)
			}
			c.synced(g, gen, m, resp.MemberAssignment, ptype, e)
		}
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		if m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, "SyncGroup answered "+errName(resp.ErrorCode))
		}
	default:
		c.touch(g, m, e.ReqTime, false)
	}
	c.bind(e, g.name, req.MemberID, req.InstanceID)
}

// syncProtocolType returns the protocol type of a SyncGroup's generation.
func syncProtocolType(g *groupState, gen *genState, req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) string {
	switch {
	case resp.ProtocolType != nil:
		return *resp.ProtocolType
	case req.ProtocolType != nil:
		return *req.ProtocolType
	case gen.protocolType != "":
		return gen.protocolType
	}
	return g.protocolType
}

// leaderPlan records the leader's assignments: the member list of the
// generation (unless the leader's JoinGroup response gave it) and each
// member's assignment until its own SyncGroup response confirms it.
func (c *Correlator) leaderPlan(g *groupState, gen *genState, req *kmsg.SyncGroupRequest, ptype string, e *decode.Exchange) {
	if gen.leader == "" {
		gen.leader = req.MemberID
	}
	list := make([]listedMember, 0, len(req.GroupAssignment))
	for _, ga := range req.GroupAssignment {
		list = append(list, listedMember{id: ga.MemberID})
	}
	c.setMembership(g, gen, fromSync, list, e.RespTime.UTC())
	for _, ga := range req.GroupAssignment {
		gm := gen.members[ga.MemberID]
		if gm == nil || gm.fromSelf {
			continue
		}
		setAssignment(gm, ga.MemberAssignment, ptype)
	}
}

// synced records a member's accepted SyncGroup: its own assignment.
func (c *Correlator) synced(g *groupState, gen *genState, m *memberState, assignment []byte, ptype string, e *decode.Exchange) {
	gm := gen.members[m.id]
	if gm == nil && gen.replaced[m.id] != "" {
		// A restarted static member syncs the assignment of the member
		// it replaced: it is m's now; the generation as formed stays.
		var own genMember
		setAssignment(&own, assignment, ptype)
		if own.assigned {
			m.assignment, m.assigned = own.assignment, true
		}
		return
	}
	if gm == nil {
		gm = gen.member(m)
	}
	setAssignment(gm, assignment, ptype)
	gm.fromSelf, gm.synced = gm.assigned, true
	if gm.assigned && m.generation <= gen.id {
		m.assignment, m.assigned = gm.assignment, true
	}
	gen.witness(c.evidenceOf(e))
	if t := e.RespTime.UTC(); t.After(gen.completed) {
		gen.completed = t
	}
	c.maybeFinish(g, gen)
}

// setAssignment decodes a consumer-protocol assignment into gm, or keeps
// only its size for other protocols (or bytes that do not parse).
func setAssignment(gm *genMember, b []byte, ptype string) {
	if decodable(ptype) {
		if a, ok := decodeAssignment(b); ok {
			gm.assignment, gm.assigned, gm.opaque = a, true, false
			return
		}
		if ptype == consumerProtocol {
			return
		}
	}
	gm.opaque, gm.assignmentBytes = true, len(b)
}
