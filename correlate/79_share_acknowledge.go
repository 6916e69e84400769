package correlate

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// shareAcknowledge handles ShareAcknowledge (key 79, KIP-932): a member's
// acknowledgements sent without fetching (kgo sends them so when it
// flushes, and before it leaves). A share session epoch of -1 closes the
// share session: what the member still holds there goes back to the queue.
func (c *Correlator) shareAcknowledge(e *decode.Exchange, req *kmsg.ShareAcknowledgeRequest) {
	g := c.shareGroupOf(req.GroupID)
	if g == nil {
		return
	}
	member := strVal(req.MemberID)
	resp, _ := e.Resp.(*kmsg.ShareAcknowledgeResponse)
	codes := map[tp]int16{}
	if resp != nil {
		for _, rt := range resp.Topics {
			topic := c.topicKey("", rt.TopicID)
			for _, p := range rt.Partitions {
				codes[tp{topic, p.Partition}] = p.ErrorCode
			}
		}
	}
	for _, rt := range req.Topics {
		topic := c.topicKey("", rt.TopicID)
		for _, p := range rt.Partitions {
			batches := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
			}
			key := tp{topic, p.Partition}
			var top int16
			if resp != nil {
				top = resp.ErrorCode
			}
			c.shareAcks(g, e, "ShareAcknowledge", member, key, batches, ackCode(codes, key, resp != nil, top))
		}
	}
	if req.ShareSessionEpoch == -1 {
		c.shareDropHeld(g, member, c.connOf(e).Broker, e.ReqTime.UTC(), c.evidenceOf(e))
	}
}

// ackBatch is one acknowledgement batch of ShareFetch or ShareAcknowledge:
// offsets first..last, with one type for all of them, or one per offset.
type ackBatch struct {
	first, last int64
	types       []int8
}

// runs splits b into ranges of one type. A batch whose types neither
// are one nor one per offset is refused by the broker (INVALID_REQUEST)
// and has none.
func (b ackBatch) runs() []ShareAckRange {
	n := records(b.first, b.last)
	switch {
	case n == 0 || len(b.types) == 0:
		return nil
	case len(b.types) == 1:
		return []ShareAckRange{{b.first, b.last, ackTypeName(b.types[0])}}
	case int64(len(b.types)) != n:
		return nil
	}
	var out []ShareAckRange
	start := 0
	for i := 1; i <= len(b.types); i++ {
		if i < len(b.types) && b.types[i] == b.types[start] {
			continue
		}
		out = append(out, ShareAckRange{b.first + int64(start), b.first + int64(i-1), ackTypeName(b.types[start])})
		start = i
	}
	return out
}

// shareAcks records member's acknowledgements of partition p (in e, an
// api request) and emits them. code is the broker's answer for the
// partition, -1 when none was seen: acknowledgements the broker refused
// change nothing; unanswered ones are taken as made.
func (c *Correlator) shareAcks(g *groupState, e *decode.Exchange, api, member string, p tp, batches []ackBatch, code int16) {
	s := g.share
	sp := c.sharePartOf(s, p)
	if sp == nil {
		return
	}
	ev := c.shareEvent(g, e, ShareAcknowledged, member, p)
	ev.API, ev.at, ev.ErrorCode = api, e.ReqTime.UTC(), code
	if code > 0 {
		ev.Error = errName(code)
	}
	applied := code <= 0
	var got shareCounts
	for _, b := range batches {
		for _, r := range b.runs() {
			if len(ev.Acks) < maxShareRanges {
				ev.Acks = append(ev.Acks, r)
			}
			n := records(r.FirstOffset, r.LastOffset)
			switch r.Type {
			case "accept":
				got.accepted = satAdd(got.accepted, n)
			case "release":
				got.released = satAdd(got.released, n)
			case "reject":
				got.rejected = satAdd(got.rejected, n)
			case "renew":
				got.renewed = satAdd(got.renewed, n)
			}
			if applied {
				c.shareApply(sp, e, member, r)
			}
		}
	}
	ev.Accepted, ev.Released, ev.Rejected, ev.Renewed = got.accepted, got.released, got.rejected, got.renewed
	if applied {
		sp.add(&got)
		if mc := c.shareMemberOf(s, member); mc != nil {
			mc.add(&got)
		}
	}
	if len(ev.Acks) > 0 {
		c.emit(ev)
	}
}

// shareApply applies one acknowledged range of member to what it holds:
// a renew restarts the lock of the records; any other type ends their
// acquisition, and a release or reject sends them back to the queue
// (reject: archived).
func (c *Correlator) shareApply(sp *sharePart, e *decode.Exchange, member string, r ShareAckRange) {
	lock := time.Duration(defaultShareLockMillis) * time.Millisecond
	if sp.lockMillis > 0 {
		lock = time.Duration(sp.lockMillis) * time.Millisecond
	}
	at := e.ReqTime.UTC()
	keep := sp.held[:0]
	for _, h := range sp.held {
		// An acknowledgement sent after an acquisition's lock ran out is
		// not for it (the broker took the records back): it is for their
		// redelivery, which may be to the same member.
		if h.member != member || !overlapsSpan(h.pending, r.FirstOffset, r.LastOffset) || h.deadline.Before(at) {
			keep = append(keep, h)
			continue
		}
		if r.Type == "renew" {
			if d := at.Add(lock); d.After(h.deadline) {
				h.deadline = d
			}
			keep = append(keep, h)
			continue
		}
		if h.pending = subtract(h.pending, r.FirstOffset, r.LastOffset); len(h.pending) > 0 {
			keep = append(keep, h)
		}
	}
	clear(sp.held[len(keep):])
	sp.held = keep
	if r.Type == "release" || r.Type == "reject" {
		sp.addReturn(shareReturn{first: r.FirstOffset, last: r.LastOffset, how: r.Type, member: member, ev: c.evidenceOf(e)})
	}
}
