package correlate

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Phases of an offset reset (field report 2): the position is lost (Fetch
// answered OFFSET_OUT_OF_RANGE, or OffsetFetch has no committed offset),
// ListOffsets looks up earliest (-2) or latest (-1), then Fetch resumes.
const (
	resetNone = iota
	resetOutOfRange
	resetNoCommit
)

// resetState is one partition's reset under way.
type resetState struct {
	origin   int // resetOutOfRange or resetNoCommit; resetNone: none
	client   clientKey
	member   string
	from     int64 // the position lost (out of range); -1 none
	at       time.Time
	evs      []Evidence
	listed   bool      // ListOffsets answered
	listAt   time.Time // the ListOffsets request
	ts       int64     // ListOffsets timestamp: -1 latest, -2 earliest
	offset   int64     // its answer
	logStart int64     // -1 unknown
	hwm      int64     // -1 unknown
}

// outOfRange starts a reset: p's fetch offset off is out of range.
func (c *Correlator) outOfRange(g *groupState, p tp, k clientKey, member string, off int64, rp *kmsg.FetchResponseTopicPartition, ev Evidence) {
	ph := c.partHz(g.name, p)
	if ph == nil {
		return
	}
	if r := &ph.reset; r.origin == resetOutOfRange && r.client == k && r.from == off && !r.listed {
		return // fetched again before resetting: the same reset
	}
	ph.reset = resetState{origin: resetOutOfRange, client: k, member: member, from: off, at: ev.TS.Time,
		evs: []Evidence{ev}, logStart: nonNeg(rp.LogStartOffset), hwm: nonNeg(rp.HighWatermark)}
}

func nonNeg(v int64) int64 { return max(v, -1) }

// offsetFetchHazards starts a reset for each partition a group member asks
// the committed offset of and the group has none (-1): the client's
// auto.offset.reset decides where it starts.
func (c *Correlator) offsetFetchHazards(e *decode.Exchange, req *kmsg.OffsetFetchRequest) {
	resp, _ := e.Resp.(*kmsg.OffsetFetchResponse)
	if resp == nil {
		return
	}
	if req.Version < 8 {
		if resp.ErrorCode == 0 {
			var answer []fetchedOffset
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					answer = append(answer, fetchedOffset{tp{t.Topic, p.Partition}, p.Offset, p.ErrorCode})
				}
			}
			c.noCommit(e, req.Group, answer)
		}
		return
	}
	for _, rg := range req.Groups {
		if answer, code := c.groupAnswer(resp, rg.Group); code == 0 {
			c.noCommit(e, rg.Group, answer)
		}
	}
}

// noCommit records an OffsetFetch answer: partitions without a committed
// offset start a reset; the others give the committed offset when no
// commit was seen (the capture began after it).
func (c *Correlator) noCommit(e *decode.Exchange, group string, answer []fetchedOffset) {
	g := c.groups[group]
	if g == nil {
		return
	}
	ev := c.evidenceOf(e)
	for _, fo := range answer {
		ph := c.partHz(group, fo.p)
		if ph == nil || fo.code != 0 {
			continue
		}
		if fo.offset >= 0 {
			if !ph.last.known {
				ph.last = commitMark{known: true, offset: fo.offset, gen: -1, client: c.keyOf(e), ev: ev}
			}
			c.regressionResumed(group, fo.p, ph, c.keyOf(e), fo.offset, "OffsetFetch")
			continue
		}
		if ph.last.known || ph.reset.origin != resetNone {
			continue
		}
		ph.reset = resetState{origin: resetNoCommit, client: c.keyOf(e), from: -1, at: ev.TS.Time, evs: []Evidence{ev}, logStart: -1, hwm: -1}
	}
}

// listOffsetsHazards records the ListOffsets answer of a reset under way.
func (c *Correlator) listOffsetsHazards(e *decode.Exchange, req *kmsg.ListOffsetsRequest) {
	resp, _ := e.Resp.(*kmsg.ListOffsetsResponse)
	if resp == nil || req.ReplicaID >= 0 {
		return
	}
	k := c.keyOf(e)
	a := c.attribute(k)
	if c.groups[a.group] == nil || a.group == "" {
		return
	}
	asked := make(map[tp]int64)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			asked[tp{t.Topic, p.Partition}] = p.Timestamp
		}
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			p := tp{t.Topic, rp.Partition}
			ph := c.partHz(a.group, p)
			ts, ok := asked[p]
			if ph == nil || !ok || rp.ErrorCode != 0 || (ts != -1 && ts != -2) {
				continue
			}
			r := &ph.reset
			if r.origin == resetNone || r.client != k || c.resetStale(r) {
				continue
			}
			off := rp.Offset
			if req.Version == 0 {
				off = -1
				if len(rp.OldStyleOffsets) > 0 {
					off = rp.OldStyleOffsets[0]
				}
			}
			if ts == -2 {
				r.logStart = off
			}
			// A fetch from the new position follows the ListOffsets
			// request; its response time may sort after the Fetch
			// (capture times of two connections).
			r.listed, r.listAt, r.ts, r.offset = true, e.ReqTime.UTC(), ts, off
			r.evs = append(r.evs, c.evidenceOf(e))
		}
	}
}

// resetStale ends a reset that did not complete within ResetWindow.
func (c *Correlator) resetStale(r *resetState) bool {
	if c.now.Sub(r.at) > c.opts.Hazards.ResetWindow {
		*r = resetState{}
		return true
	}
	return false
}

// resetResumed completes a reset: client k fetches p from off after the
// ListOffsets answer. rp is the response's partition, if any.
func (c *Correlator) resetResumed(g *groupState, p tp, k clientKey, member string, off int64, rp *kmsg.FetchResponseTopicPartition, ev Evidence) {
	ph := c.hz().parts[g.name][p]
	if ph == nil {
		return
	}
	r := ph.reset
	if r.origin == resetNone || !r.listed || r.client != k || ev.TS.Before(r.listAt.Add(-c.opts.Hazards.OrderTolerance)) || c.resetStale(&ph.reset) {
		return
	}
	ph.reset, ph.resetSinceCommit, ph.resetAt = resetState{}, true, ev.TS.Time
	if rp != nil {
		if rp.LogStartOffset >= 0 {
			r.logStart = rp.LogStartOffset
		}
		if rp.HighWatermark >= 0 {
			r.hwm = rp.HighWatermark
		}
	}
	if member == "" {
		member = r.member
	}
	ev2 := partHazardEvent(HazardOffsetReset, SeverityInfo, g.name, p, ev.TS.Time)
	ev2.MemberID, ev2.ClientID, ev2.ClientHost = member, k.clientID, k.host
	if gen := g.memberGenAt(member, ev.TS.Time); gen >= 0 {
		ev2.Generation = i32p(gen)
	} else if m := g.members[member]; m != nil && m.generation >= 0 {
		ev2.Generation = i32p(m.generation)
	}
	ev2.ToOffset, ev2.Reset = i64(off), "latest"
	if r.ts == -2 {
		ev2.Reset = "earliest"
	}
	if r.logStart >= 0 {
		ev2.LogStartOffset = i64(r.logStart)
	}
	if r.hwm >= 0 {
		ev2.HighWatermark = i64(r.hwm)
	}
	ev2.Evidence = append(r.evs, ev)
	key := partKey(HazardOffsetReset, g.name, p, itoa64(r.from), itoa64(off))
	if r.origin == resetNoCommit {
		c.noCommitReset(g, p, off, &r, ev2)
		key = partKey(HazardOffsetReset, g.name, p, "start")
	} else {
		c.rangeReset(g, p, off, &r, ev2)
	}
	c.report(key, ev2)
}

// rangeReset fills in a reset after OFFSET_OUT_OF_RANGE: records between
// the lost position and the new one are skipped (forward) or replayed
// (back, up to the log end).
func (c *Correlator) rangeReset(g *groupState, p tp, to int64, r *resetState, ev *HazardEvent) {
	from := r.from
	ev.FromOffset = i64(from)
	end := from
	if r.hwm >= 0 && r.hwm < end {
		end = r.hwm
	}
	head := fmt.Sprintf("%s %s/%d: fetch offset %d was out of range; ListOffsets %s answered %d and fetching resumed at %d",
		g.name, p.topic, p.partition, from, ev.Reset, r.offset, to)
	switch {
	case to > from:
		ev.Severity, ev.Skipped = SeverityCritical, i64(to-from)
		ev.Summary = fmt.Sprintf("%s: records %d..%d were skipped, never processed", head, from, to-1)
	case end > to:
		ev.Severity, ev.Replayed = SeverityWarn, i64(end-to)
		ev.Summary = fmt.Sprintf("%s: records %d..%d are processed again", head, to, end-1)
	default:
		ev.Summary = head + ": nothing skipped or replayed"
	}
}

// noCommitReset fills in a group partition starting without a committed
// offset: from latest, the records already in the log are never read.
func (c *Correlator) noCommitReset(g *groupState, p tp, to int64, r *resetState, ev *HazardEvent) {
	ev.Summary = fmt.Sprintf("%s %s/%d: no committed offset; ListOffsets %s answered %d and fetching started at %d",
		g.name, p.topic, p.partition, ev.Reset, r.offset, to)
	if r.logStart >= 0 && to > r.logStart {
		ev.Skipped = i64(to - r.logStart)
		ev.Summary += fmt.Sprintf(": records %d..%d already in the log are never read by this group", r.logStart, to-1)
	}
}
