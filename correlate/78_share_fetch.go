package correlate

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// shareFetch handles ShareFetch (key 78, KIP-932). The request carries
// the member's acknowledgements of records it was given before, which the
// broker applies first; the answer the records it acquired for the member
// now, per partition, as ranges with their delivery count, under an
// acquisition lock of AcquisitionLockTimeoutMillis (v1+). A share session
// epoch of -1 closes the member's share session on that broker: the
// records it still holds there go back to the queue.
func (c *Correlator) shareFetch(e *decode.Exchange, req *kmsg.ShareFetchRequest) {
	g := c.shareGroupOf(req.GroupID)
	if g == nil {
		return
	}
	member := strVal(req.MemberID)
	resp, _ := e.Resp.(*kmsg.ShareFetchResponse)
	var codes map[tp]int16 // the answers to its acknowledgements, if it has any
	if resp != nil && shareFetchAcks(req) {
		codes = map[tp]int16{}
		for _, rt := range resp.Topics {
			topic := c.topicKey("", rt.TopicID)
			for _, p := range rt.Partitions {
				codes[tp{topic, p.Partition}] = p.AcknowledgeErrorCode
			}
		}
	}
	for _, rt := range req.Topics {
		topic := c.topicKey("", rt.TopicID)
		for _, p := range rt.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			batches := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
			}
			key := tp{topic, p.Partition}
			var top int16
			if resp != nil {
				top = resp.ErrorCode
			}
			c.shareAcks(g, e, "ShareFetch", member, key, batches, ackCode(codes, key, resp != nil, top))
		}
	}
	if resp != nil && resp.ErrorCode == 0 {
		wait := time.Duration(min(max(req.MaxWaitMillis, 0), 60000)) * time.Millisecond
		for _, rt := range resp.Topics {
			topic := c.topicKey("", rt.TopicID)
			for _, p := range rt.Partitions {
				if len(p.AcquiredRecords) > 0 && p.ErrorCode == 0 {
					c.shareAcquired(g, e, member, tp{topic, p.Partition}, p.AcquiredRecords, resp.AcquisitionLockTimeoutMillis, wait)
				}
			}
		}
	}
	if req.ShareSessionEpoch == -1 {
		c.shareDropHeld(g, member, c.connOf(e).Broker, e.ReqTime.UTC(), c.evidenceOf(e))
	}
}

// shareFetchAcks reports whether req acknowledges records.
func shareFetchAcks(req *kmsg.ShareFetchRequest) bool {
	for _, rt := range req.Topics {
		for _, p := range rt.Partitions {
			if len(p.AcknowledgementBatches) > 0 {
				return true
			}
		}
	}
	return false
}

// ackCode is the answer to the acknowledgements of partition key: its
// error code in codes, the response's top-level error when it has one,
// or -1 when there is no answer (no response, or the partition left out).
func ackCode(codes map[tp]int16, key tp, answered bool, top int16) int16 {
	code, ok := codes[key]
	switch {
	case !answered, !ok && top == 0:
		return -1
	case top != 0:
		return top
	}
	return code
}

// shareAcquired records the ranges the broker acquired for member in
// partition p (an answer of e) and emits them.
func (c *Correlator) shareAcquired(g *groupState, e *decode.Exchange, member string, p tp,
	acquired []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, lockMillis int32, wait time.Duration) {
	s := g.share
	sp := c.sharePartOf(s, p)
	if sp == nil {
		return
	}
	mc := c.shareMemberOf(s, member)
	if lockMillis > 0 {
		sp.lockMillis = lockMillis
	}
	lock := time.Duration(defaultShareLockMillis) * time.Millisecond
	if lockMillis > 0 {
		lock = time.Duration(lockMillis) * time.Millisecond
	}
	at := e.RespTime.UTC()
	if at.IsZero() {
		at = e.ReqTime.UTC()
	}
	ev := c.shareEvent(g, e, ShareAcquired, member, p)
	ev.API, ev.LockTimeoutMillis, ev.at = "ShareFetch", lockMillis, at
	k := c.keyOf(e)
	for _, a := range acquired {
		n := records(a.FirstOffset, a.LastOffset)
		if n == 0 {
			continue
		}
		var got shareCounts
		got.acquired, got.maxDelivery = n, a.DeliveryCount
		if a.DeliveryCount > 1 {
			got.redelivered = n
		}
		sp.add(&got)
		if mc != nil {
			mc.add(&got)
		}
		ev.Records = satAdd(ev.Records, n)
		ev.Redelivered = satAdd(ev.Redelivered, got.redelivered)
		ev.MaxDeliveryCount = max(ev.MaxDeliveryCount, a.DeliveryCount)
		cause := ""
		var inferred *absence
		if a.DeliveryCount > 1 {
			cause, inferred = sp.redeliveryCause(a.FirstOffset, a.LastOffset, at)
			c.shareDied(g, e, member, p, sp, a)
			if inferred == nil && (cause == ShareCauseUnknown || cause == ShareCauseLock) {
				// No acquisition of them held any more: their last
				// delivery was within a lock's time, to a member of this
				// client as far as the capture tells.
				inferred = &absence{clients: []clientKey{k}, from: at.Add(-lock), to: at}
			}
			switch ev.Cause {
			case "", cause:
				ev.Cause = cause
			default:
				ev.Cause = "mixed"
			}
		}
		if len(ev.Acquired) < maxShareRanges {
			ev.Acquired = append(ev.Acquired, ShareRange{a.FirstOffset, a.LastOffset, a.DeliveryCount, cause})
		}
		if len(sp.held) >= maxShareHeld { // the oldest is no longer judged (share_ack_lost)
			c.stats.Limits.ShareHeldDropped++
			copy(sp.held, sp.held[1:])
			sp.held = sp.held[:maxShareHeld-1]
		}
		sp.held = append(sp.held, &shareHeld{member: member, client: k, count: a.DeliveryCount, at: at,
			deadline: at.Add(lock), ev: c.evidenceOf(e), pending: []span64{{a.FirstOffset, a.LastOffset}},
			grace: wait + time.Second})
		if int(a.DeliveryCount) >= c.opts.Hazards.ShareRedeliveries {
			c.shareRedelivered(g, e, member, p, sp, a, cause, inferred)
		}
	}
	if ev.Records > 0 {
		c.emit(ev)
	}
}

// shareDropHeld puts back in the queue what member holds in g, of broker
// (ip:port; "" every broker): the broker released it at at (the member
// left, or closed its share session there). Acquisitions whose lock had
// run out by then are kept, to be judged (share_ack_lost): the close came
// too late.
func (c *Correlator) shareDropHeld(g *groupState, member, broker string, at time.Time, ev Evidence) {
	if g.share == nil {
		return
	}
	c.shareRelease(g, func(h *shareHeld) bool {
		return h.member == member && (broker == "" || h.ev.Conn.Broker == broker)
	}, ShareCauseLeft, ev, at)
}
