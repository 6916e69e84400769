package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// fetchedOffset is one partition of an OffsetFetch answer.
type fetchedOffset struct {
	p      tp
	offset int64
	code   int16
}

// offsetFetch handles OffsetFetch (key 9): a group's committed offsets as
// the broker has them (v8+ batch several groups). They bind the client to
// each group and set the committed offset when newer than the last commit
// seen (the capture may have begun after it).
func (c *Correlator) offsetFetch(e *decode.Exchange, req *kmsg.OffsetFetchRequest) {
	resp, _ := e.Resp.(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var answer []fetchedOffset
		var code int16
		if resp != nil {
			code = resp.ErrorCode
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					answer = append(answer, fetchedOffset{tp{t.Topic, p.Partition}, p.Offset, p.ErrorCode})
				}
			}
		}
		c.offsetFetchGroup(e, req.Group, "", resp != nil, code, answer)
		return
	}
	for _, rg := range req.Groups {
		var answer []fetchedOffset
		var code int16
		if resp != nil {
			answer, code = c.groupAnswer(resp, rg.Group)
		}
		c.offsetFetchGroup(e, rg.Group, strVal(rg.MemberID), resp != nil, code, answer)
	}
}

// groupAnswer returns the v8+ answer for one group.
func (c *Correlator) groupAnswer(resp *kmsg.OffsetFetchResponse, group string) ([]fetchedOffset, int16) {
	for _, rg := range resp.Groups {
		if rg.Group != group {
			continue
		}
		var out []fetchedOffset
		for _, t := range rg.Topics {
			topic := c.topicKey(t.Topic, t.TopicID)
			for _, p := range t.Partitions {
				out = append(out, fetchedOffset{tp{topic, p.Partition}, p.Offset, p.ErrorCode})
			}
		}
		return out, rg.ErrorCode
	}
	return nil, 0
}

// offsetFetchGroup records one group's OffsetFetch.
func (c *Correlator) offsetFetchGroup(e *decode.Exchange, group, member string, answered bool, code int16, answer []fetchedOffset) {
	g := c.group(group)
	if g == nil {
		return
	}
	c.bind(e, group, member, nil)
	if !answered {
		return
	}
	c.answered(g, e, "OffsetFetch", code)
	if code != 0 {
		return
	}
	at := e.RespTime.UTC()
	for _, fo := range answer {
		if fo.code != 0 {
			continue
		}
		ps := c.part(g, fo.p)
		switch {
		case ps == nil, ps.hasCommitted && ps.committed == fo.offset:
		case fo.offset >= 0:
			ps.setCommitted(fo.offset, at, "", -1, "offset_fetch")
			c.wantTime(fo.p, ps)
		case ps.hasCommitted && !at.Before(ps.committedAt):
			ps.hasCommitted = false // the broker has none (any more)
			ps.committedAt, ps.committedSource = at, "offset_fetch"
		}
	}
}
