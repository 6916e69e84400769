package correlate

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// offsetCommit handles OffsetCommit (key 8): one commit event per
// partition, with the broker's error for it, and the committed offset of
// accepted ones. Topics are named by id from v10.
func (c *Correlator) offsetCommit(e *decode.Exchange, req *kmsg.OffsetCommitRequest) {
	g := c.group(req.Group)
	if g == nil {
		return
	}
	resp, _ := e.Resp.(*kmsg.OffsetCommitResponse)
	codes := c.commitCodes(resp)
	gen := req.Generation
	if req.Version == 0 {
		gen = -1
	}
	var accepted bool
	var first int16
	for _, t := range req.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			code := int16(-1)
			if resp != nil {
				if cd, ok := codes[tp{topic, p.Partition}]; ok {
					code = cd
				}
			}
			accepted = accepted || code == 0
			if first == 0 && code > 0 {
				first = code
			}
			c.commit(g, e, req.MemberID, gen, tp{topic, p.Partition}, p.Offset, p.Metadata, code)
		}
	}
	if resp != nil {
		c.answered(g, e, "OffsetCommit", first)
	}
	c.commitMember(g, e, req, gen, accepted, first)
}

// commitCodes maps each partition of a response to its error code, in a
// map reused by the next call. offsetCommit and commitHazards both ask for
// the current exchange's: it is made once.
func (c *Correlator) commitCodes(resp *kmsg.OffsetCommitResponse) map[tp]int16 {
	if resp == nil {
		return nil
	}
	if c.codes == nil {
		c.codes = make(map[tp]int16)
	}
	out := c.codes
	if c.codesOf == resp && c.codesAt == c.stats.Exchanges {
		return out
	}
	c.codesOf, c.codesAt = resp, c.stats.Exchanges
	clear(out)
	for _, t := range resp.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			out[tp{topic, p.Partition}] = p.ErrorCode
		}
	}
	return out
}

// commitMember records what a commit says about its member: an accepted
// commit keeps a classic session alive and shows the generation;
// UNKNOWN_MEMBER_ID says the broker removed the member.
func (c *Correlator) commitMember(g *groupState, e *decode.Exchange, req *kmsg.OffsetCommitRequest, gen int32, accepted bool, code int16) {
	m := g.members[req.MemberID]
	switch {
	case accepted && req.MemberID != "":
		m = c.member(g, req.MemberID, e)
		c.touch(g, m, e.ReqTime, true)
		c.observe(g, m, gen, e)
	case code == kerr.UnknownMemberID.Code || code == kerr.FencedInstanceID.Code:
		if m != nil && m.status == statusLive {
			c.removed(g, m, e.RespTime, "OffsetCommit answered "+errName(code))
		}
	default:
		c.touch(g, m, e.ReqTime, false)
	}
	c.bind(e, g.name, req.MemberID, req.InstanceID)
}

// commit records one committed partition and emits its event.
func (c *Correlator) commit(g *groupState, e *decode.Exchange, member string, gen int32, p tp, offset int64, meta *string, code int16) {
	c.stats.Commits++
	outcome := commitOutcome(code)
	switch outcome {
	case CommitUnknown:
		c.stats.CommitsUnanswered++
	case CommitRejected:
		c.stats.CommitsRejected++
	default:
		c.stats.CommitsAccepted++
	}
	md := meta // decoded for this exchange alone and never changed: shared, not copied
	r := commitRec{
		at: e.ReqTime.UTC(), member: member, generation: gen, offset: offset, metadata: md,
		code: code, clientID: e.ClientID, clientHost: c.hostOf(e), conn: c.connOf(e), corr: e.CorrelationID,
	}
	if code == 0 {
		c.anchor(g) // the broker took it: a real group (a rejected one only names it)
	}
	if ps := c.part(g, p); ps != nil {
		ps.addCommit(r, c.opts.MaxCommitHistory, &c.stats.Limits)
		c.wantTime(p, ps)
	}
	ev := &CommitEvent{
		Group: g.name, MemberID: member, Generation: gen, Topic: p.topic, Partition: p.partition,
		Offset: offset, Metadata: md, ErrorCode: code, Outcome: outcome,
		ClientID: r.clientID, ClientHost: r.clientHost, Conn: r.conn, at: r.at,
	}
	if code > 0 {
		ev.Error = errName(code)
	}
	c.emit(ev)
}
