package correlate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// shareRedelivered reports share_redelivery: records of p acquired for
// member with a delivery count of Hazards.ShareRedeliveries or more. They
// went back to the queue that many times less one, released by members
// or their acquisition lock running out: a record no member manages to
// process (a poison message). At group.share.delivery.count.limit
// deliveries (Hazards.ShareDeliveryLimit; not on the wire) the broker
// archives it instead of delivering it again: it is never processed. One
// episode per group, partition and first offset of the range.
func (c *Correlator) shareRedelivered(g *groupState, e *decode.Exchange, member string, p tp, sp *sharePart,
	a kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, cause string, inferred *absence) {
	k := c.keyOf(e)
	limit := c.opts.Hazards.ShareDeliveryLimit
	ev := partHazardEvent(HazardShareRedelivery, SeverityWarn, g.name, p, e.RespTime)
	ev.MemberID, ev.ClientID, ev.ClientHost = member, k.clientID, k.host
	ev.Offset, ev.FromOffset, ev.ToOffset = i64(a.FirstOffset), i64(a.FirstOffset), i64(a.LastOffset)
	ev.Records, ev.DeliveryCount, ev.DeliveryLimit = i64(records(a.FirstOffset, a.LastOffset)), i16p(a.DeliveryCount), int32(limit)
	ev.Reason = cause // why they went back to the queue the last time
	// A cause inferred for want of a return the capture shows: loss on
	// the holders' connections makes it info, its evidence incomplete.
	ev.absent = inferred
	ways := map[string]int{}
	for _, r := range sp.returns {
		if r.first <= a.LastOffset && r.last >= a.FirstOffset {
			ways[r.how]++
			ev.Evidence = append(ev.Evidence, r.ev)
		}
	}
	ev.Evidence = append(ev.Evidence, c.evidenceOf(e))
	var how []string
	for _, w := range sortedKeys(ways) {
		how = append(how, fmt.Sprintf("%d %s", ways[w], returnWords[w]))
	}
	seen := "the capture shows no release of them"
	if len(how) > 0 {
		seen = "the capture shows " + strings.Join(how, ", ")
	}
	rng := fmt.Sprintf("offset %d", a.FirstOffset)
	if a.LastOffset > a.FirstOffset {
		rng = fmt.Sprintf("offsets %d-%d", a.FirstOffset, a.LastOffset)
	}
	fate := fmt.Sprintf("%d deliveries before the broker archives it unprocessed (group.share.delivery.count.limit, "+
		"%d by --share-delivery-limit: not on the wire)", max(limit-int(a.DeliveryCount), 0), limit)
	if int(a.DeliveryCount) >= limit {
		fate = fmt.Sprintf("this is the last delivery (group.share.delivery.count.limit, %d by --share-delivery-limit: not on the wire): "+
			"released or timed out once more, the broker archives it unprocessed", limit)
	}
	ev.Summary = fmt.Sprintf("%s: %s[%d] %s delivered for the %d%s time, to member %s (client %s): the records keep "+
		"going back to the queue (%s), a poison message no consumer processes; %s", g.name, p.topic, p.partition, rng,
		a.DeliveryCount, ordinal(int(a.DeliveryCount)), member, k.clientID, seen, fate)
	c.report(episodeKey(HazardShareRedelivery, g.name, p.topic, strconv.Itoa(int(p.partition)),
		strconv.FormatInt(a.FirstOffset, 10)), ev)
}

// returnWords name the ways records go back to the queue, in summaries.
var returnWords = map[string]string{"release": "releases", "reject": "rejects", "lock_expired": "lock expiries",
	ShareCauseConnClosed: "connection closes", ShareCauseLeft: "leaves or share session closes",
	ShareCauseExpired: "member expiries"}

// ordinal is the English suffix of n.
func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// shareTick looks for acquisitions whose lock ran out before the member
// acknowledged them (share_ack_lost): judged once an acknowledgement sent
// before the deadline would have been seen (the member's long-poll wait
// plus a second; final: at the end of the input, every lock run out by
// then). The broker released the records to the queue, to be delivered
// again (to any member) with a higher delivery count: their processing is
// stuck, or done twice. It rests on the absence of an acknowledgement from
// the member's client, and is info when the capture lost data there.
func (c *Correlator) shareTick(final bool) {
	for _, g := range c.sortedGroups() {
		if g.share == nil {
			continue
		}
		for _, p := range sortedTPs(g.share.parts) {
			sp := g.share.parts[p]
			var lost []*shareHeld
			keep := sp.held[:0]
			for _, h := range sp.held {
				judge := h.deadline.Add(h.grace)
				if final {
					judge = h.deadline
				}
				if c.now.Before(judge) {
					keep = append(keep, h)
					continue
				}
				lost = append(lost, h)
			}
			clear(sp.held[len(keep):])
			sp.held = keep
			c.shareLost(g, p, sp, lost)
		}
	}
}

// shareLost reports the acquisitions of p whose lock ran out, one hazard
// per member.
func (c *Correlator) shareLost(g *groupState, p tp, sp *sharePart, lost []*shareHeld) {
	byMember := map[string][]*shareHeld{}
	for _, h := range lost {
		byMember[h.member] = append(byMember[h.member], h)
	}
	for _, member := range sortedKeys(byMember) {
		hs := byMember[member]
		first, last, n := int64(-1), int64(-1), int64(0)
		var evs []Evidence
		deadline := hs[0].deadline
		for _, h := range hs {
			for _, s := range h.pending {
				if first < 0 || s.first < first {
					first = s.first
				}
				last = max(last, s.last)
				n = satAdd(n, records(s.first, s.last))
				sp.addReturn(shareReturn{first: s.first, last: s.last, how: "lock_expired", member: member, ev: h.ev, at: h.deadline})
			}
			evs = append(evs, h.ev)
			deadline = minTime(deadline, h.deadline)
		}
		sp.lockExpired = satAdd(sp.lockExpired, n)
		if mc := c.shareMemberOf(g.share, member); mc != nil {
			mc.lockExpired = satAdd(mc.lockExpired, n)
		}
		h := hs[0]
		lock := time.Duration(defaultShareLockMillis) * time.Millisecond
		if sp.lockMillis > 0 {
			lock = time.Duration(sp.lockMillis) * time.Millisecond
		}
		ev := partHazardEvent(HazardShareAckLost, SeverityWarn, g.name, p, deadline)
		ev.MemberID, ev.ClientID, ev.ClientHost = member, h.client.clientID, h.client.host
		ev.FromOffset, ev.ToOffset, ev.Records = i64(first), i64(last), i64(n)
		ev.DeliveryCount, ev.LockTimeoutMillis = i16p(h.count), millis(lock)
		ev.Evidence = evs
		ev.absent = &absence{clients: []clientKey{h.client}, from: h.at, to: deadline}
		ev.Summary = fmt.Sprintf("%s: member %s (client %s on %s) acquired %d records of %s[%d] (offsets %d-%d) at %s and "+
			"acknowledged none of them within the %v acquisition lock: the broker put them back in the queue, to be "+
			"delivered again with a higher delivery count (processing stuck or done twice)", g.name, member,
			h.client.clientID, h.client.host, n, p.topic, p.partition, first, last, stamp(h.at), lock)
		c.report(episodeKey(HazardShareAckLost, g.name, p.topic, strconv.Itoa(int(p.partition)), member, h.at.String()), ev)
	}
}

// shareDied reports share_member_died: records of p that another member
// held unacknowledged when its connection closed with no leave before
// (the process died, or the network cut it) or the broker fenced it,
// acquired again by member with a higher delivery count (a of e). The
// broker released them with the holder's share session (KIP-932), before
// their lock ran out: what the holder did with them is lost, or done
// again by member. It rests on the absence of an acknowledgement or a
// leave from the holder's client, and is info when the capture lost data
// there. One episode per group, partition, holder and release.
func (c *Correlator) shareDied(g *groupState, e *decode.Exchange, member string, p tp, sp *sharePart,
	a kmsg.ShareFetchResponseTopicPartitionAcquiredRecord) {
	for _, r := range sp.returns {
		if r.held == nil || r.member == member || r.first > a.LastOffset || r.last < a.FirstOffset ||
			(r.how != ShareCauseConnClosed && r.how != ShareCauseExpired) {
			continue
		}
		h, k := r.held, c.keyOf(e)
		why := fmt.Sprintf("its connection to %s closed (%s) at %s with no leave before (the process died, or the "+
			"network cut it)", r.ev.Conn.Broker, r.ev.API, stamp(r.at))
		if r.how == ShareCauseExpired {
			why = fmt.Sprintf("the broker fenced it at %s (its session ran out)", stamp(r.at))
		}
		first, last := max(r.first, a.FirstOffset), min(r.last, a.LastOffset)
		ev := partHazardEvent(HazardShareMemberDied, SeverityWarn, g.name, p, e.RespTime)
		ev.MemberID, ev.ClientID, ev.ClientHost = r.member, h.client.clientID, h.client.host
		ev.FromOffset, ev.ToOffset, ev.Records = i64(r.first), i64(r.last), i64(records(r.first, r.last))
		ev.DeliveryCount, ev.Reason = i16p(a.DeliveryCount), r.how
		ev.Evidence = []Evidence{h.ev, r.ev, c.evidenceOf(e)}
		ev.absent = &absence{clients: []clientKey{h.client}, from: h.at, to: r.at}
		ev.Summary = fmt.Sprintf("%s: member %s (client %s on %s) acquired %d records of %s[%d] (offsets %d-%d) at %s and "+
			"held them unacknowledged when %s: the broker put them back in the queue, and delivered offsets %d-%d again "+
			"to member %s (client %s) at %s, delivery count %d: what %s did with them is lost, or done twice", g.name,
			r.member, h.client.clientID, h.client.host, records(r.first, r.last), p.topic, p.partition, r.first, r.last,
			stamp(h.at), why, first, last, member, k.clientID, stamp(e.RespTime), a.DeliveryCount, r.member)
		c.report(episodeKey(HazardShareMemberDied, g.name, p.topic, strconv.Itoa(int(p.partition)), r.member,
			r.at.String()), ev)
	}
}
