package correlate

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// joinGroup handles JoinGroup (key 11): a member entering or re-entering a
// rebalance. The responses of one rebalance carry the new generation; the
// leader's also lists every member with its metadata.
func (c *Correlator) joinGroup(e *decode.Exchange, req *kmsg.JoinGroupRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	g.setType(GroupClassic)
	if g.protocolType == "" {
		g.protocolType = req.ProtocolType
	}
	resp, _ := e.Resp.(*kmsg.JoinGroupResponse)
	if resp == nil {
		// Unanswered (the capture ended, or lost it): a rebalance began.
		c.touch(g, g.members[req.MemberID], e.ReqTime, false)
		g.openRebalance(e.ReqTime.UTC(), req.MemberID, c.evidenceOf(e))
		c.bind(e, g.name, req.MemberID, req.InstanceID)
		return
	}
	c.answered(g, e, "JoinGroup", resp.ErrorCode)
	switch resp.ErrorCode {
	case 0:
		// A consumer group (KIP-848) answers its classic members without
		// a leader: the broker assigns.
		id := resp.MemberID
		if id == "" {
			id = req.MemberID
		}
		if resp.LeaderID != "" {
			c.convert(g, GroupClassic, id, byLeader)
		} else {
			c.convert(g, GroupConsumer, id, byLeaderless)
		}
		c.joined(g, e, req, resp)
	case kerr.MemberIDRequired.Code:
		// KIP-394: a new member's first join only gets it a member id;
		// it joins with its second JoinGroup. One member, not two.
		rb := g.openRebalance(e.ReqTime.UTC(), resp.MemberID, c.evidenceOf(e))
		if _, ok := rb.fresh[resp.MemberID]; !ok && resp.MemberID != "" {
			rb.fresh[resp.MemberID] = e.ReqTime.UTC()
		}
		c.bind(e, g.name, "", req.InstanceID)
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		if m := g.members[req.MemberID]; m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, "JoinGroup answered "+errName(resp.ErrorCode))
		}
	default:
		c.touch(g, g.members[req.MemberID], e.ReqTime, false)
		c.bind(e, g.name, req.MemberID, req.InstanceID)
	}
}

// joined handles an accepted JoinGroup.
func (c *Correlator) joined(g *groupState, e *decode.Exchange, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) {
	id := resp.MemberID
	if id == "" {
		id = req.MemberID
	}
	fresh, freshAt := req.MemberID == "", e.ReqTime.UTC()
	rb := g.pendJoin
	if rb != nil {
		if t, ok := rb.fresh[id]; ok {
			fresh, freshAt = true, t
		}
	}
	gen := c.generationFor(g, resp.Generation, e.ReqTime.UTC())
	if rb != nil && g.pendJoin == rb && gen != nil {
		// The rebalance under way was this generation's, which formed
		// before this member's first JoinGroup was seen (exchanges come
		// in response order): what it holds of the member is gen's.
		delete(rb.fresh, id)
		if len(rb.fresh) == 0 && rb.starter == id {
			g.pendJoin = nil
		}
	}
	if gen != nil {
		if t, ok := gen.fresh[id]; ok {
			fresh, freshAt = true, t
		}
	}
	m := c.member(g, id, e)
	if m == nil {
		return
	}
	replaced := c.replaceStatic(g, m, req.InstanceID, gen, e.ReqTime.UTC())
	c.memberJoinInfo(m, req, resp)
	c.touch(g, m, e.RespTime, true)
	m.setGeneration(resp.Generation)
	if fresh && m.joinedAt.IsZero() {
		m.joinedAt = freshAt
	}
	c.bind(e, g.name, id, req.InstanceID)
	switch {
	case gen != nil && g.typ == GroupConsumer:
		c.classicEpoch(g, gen, m, e)
	case gen != nil:
		c.joinedGeneration(g, gen, m, e, req, resp)
	}
	if gen != nil {
		if fresh && replaced == "" {
			if t, ok := gen.fresh[id]; !ok || freshAt.Before(t) {
				gen.fresh[id] = freshAt
			}
			if freshAt.Before(gen.started) {
				gen.started, gen.starter = freshAt, id // its MEMBER_ID_REQUIRED join
			}
		}
	}
	switch {
	case replaced != "":
		c.announceJoin(g, m, resp.Generation, fmt.Sprintf("static member restarted (group.instance.id %s): replaced %s "+
			"in generation %d, taking over its assignment without a rebalance", strVal(req.InstanceID), replaced, resp.Generation), freshAt)
	case fresh:
		c.announceJoin(g, m, resp.Generation, "", freshAt)
	}
}

// memberJoinInfo records what a member's JoinGroup says about it.
func (c *Correlator) memberJoinInfo(m *memberState, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) {
	if req.InstanceID != nil {
		m.instanceID = strPtr(req.InstanceID)
	}
	m.sessionMillis, m.rebalanceMillis = req.SessionTimeoutMillis, req.RebalanceTimeoutMillis
	m.protocols = m.protocols[:0]
	for _, p := range req.Protocols {
		m.protocols = append(m.protocols, p.Name)
	}
	if !decodable(req.ProtocolType) {
		return
	}
	if meta, ok := protocolMetadata(req, strVal(resp.Protocol)); ok {
		if sub, ok := decodeSubscription(meta); ok {
			m.subscription = sub
		}
	}
}

// joinedGeneration adds an accepted JoinGroup to its generation.
func (c *Correlator) joinedGeneration(g *groupState, gen *genState, m *memberState, e *decode.Exchange, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) {
	gen.joinsSeen = true
	gen.witness(c.evidenceOf(e))
	if t := e.ReqTime.UTC(); gen.started.IsZero() || t.Before(gen.started) || (t.Equal(gen.started) && m.id < gen.starter) {
		gen.started, gen.starter = t, m.id
	}
	ptype := req.ProtocolType
	if resp.ProtocolType != nil {
		ptype = *resp.ProtocolType
	}
	gen.protocolType, g.protocolType = ptype, ptype
	if resp.Protocol != nil {
		gen.protocol, g.protocol = *resp.Protocol, *resp.Protocol
	}
	if resp.LeaderID != "" {
		gen.leader = resp.LeaderID
	}
	if req.Reason != nil && *req.Reason != "" && gen.replaced[m.id] == "" {
		gen.joinReasons[m.id] = *req.Reason
	}
	if gen.members[m.id] != nil || authority(gen.membersFrom) == authority(fromObserved) {
		gm := gen.member(m)
		gm.opaque = !decodable(ptype)
	}
	if len(resp.Members) == 0 {
		return
	}
	list := make([]listedMember, 0, len(resp.Members))
	for _, rm := range resp.Members {
		lm := listedMember{id: rm.MemberID, instanceID: strPtr(rm.InstanceID), opaque: !decodable(ptype)}
		if !lm.opaque {
			lm.subscription, _ = decodeSubscription(rm.ProtocolMetadata)
		}
		list = append(list, lm)
	}
	c.setMembership(g, gen, fromJoin, list, e.RespTime.UTC())
}

// replaceStatic ends the live member that held m's group instance id
// under another member id (KIP-345: a static member restarted) and returns
// its id ("" if there was none). That alone starts no rebalance, so it is
// no cause of the next generation: m takes over the old member's
// assignment. When m joined gen, the generation the old member is in, gen
// keeps its members as formed and records m as the old member's
// replacement.
func (c *Correlator) replaceStatic(g *groupState, m *memberState, instanceID *string, gen *genState, at time.Time) string {
	if instanceID == nil {
		return ""
	}
	old := g.liveByInstance(*instanceID)
	if old == nil || old == m {
		return ""
	}
	c.memberGone(g, old, MemberLeft, fmt.Sprintf("static member restarted: replaced by %s (same group.instance.id %s)", m.id, *instanceID), at)
	g.departures = g.departures[:len(g.departures)-1]
	m.assignment, m.assigned = old.assignment, old.assigned
	if gen != nil && gen.members[old.id] != nil && gen.members[m.id] == nil {
		if gen.replaced == nil {
			gen.replaced = make(map[string]string)
		}
		gen.replaced[m.id] = old.id
	}
	return old.id
}
