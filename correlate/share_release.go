package correlate

import (
	"fmt"
	"slices"
	"time"

	"github.com/kwire/kwire/capture"
)

// Why records of a share group went back to the queue, as the wire shows
// it (ShareRange.Cause, ShareGroupEvent.Cause, share_redelivery's
// reason). KIP-932: the broker releases a member's acquired records when
// the member releases them, when their acquisition lock runs out, when
// the share session they were acquired in ends (the member closed it or
// left, or its connection to that broker closed), and when the member is
// fenced.
const (
	ShareCauseReleased   = "released"          // the member acknowledged them release
	ShareCauseLock       = "lock_timeout"      // their acquisition lock ran out unacknowledged
	ShareCauseConnClosed = "connection_closed" // the connection they were acquired on closed (FIN or RST)
	ShareCauseLeft       = "member_left"       // the member left the group or closed its share session
	ShareCauseExpired    = "member_expired"    // the broker fenced the member (member_expired)
	ShareCauseUnknown    = "unknown"           // released before the lock ran out, and the capture shows no reason
)

// shareHow maps a shareReturn's how to its cause.
func shareHow(how string) string {
	switch how {
	case "release":
		return ShareCauseReleased
	case "lock_expired":
		return ShareCauseLock
	}
	return how
}

// ConnClosed is told that a connection ended on the wire (decode's
// CloseHandler): the records share group members acquired on it, and
// hold still, go back to the queue (KIP-932: the share session ends with
// its connection), now and not when their lock runs out.
func (c *Correlator) ConnClosed(conn *capture.Conn, at time.Time, reason capture.CloseReason) {
	if c.closed || conn == nil {
		return
	}
	cn := c.names.of(conn).conn
	api := "TCP FIN"
	if reason == capture.CloseRST {
		api = "TCP RST"
	}
	ev := Evidence{TS: TimeOf(at), Conn: cn, API: api, CorrelationID: -1}
	for _, g := range c.sortedGroups() {
		if g.share == nil {
			continue
		}
		c.shareRelease(g, func(h *shareHeld) bool {
			return h.ev.Conn.ID == cn.ID && h.ev.Conn.Client == cn.Client && h.ev.Conn.Broker == cn.Broker
		}, ShareCauseConnClosed, ev, at.UTC())
	}
}

// shareRelease puts back in the queue, at at, what the held acquisitions
// of g that match still hold, for cause, and stops waiting for their
// acknowledgement. Those whose lock had run out by then are kept, to be
// judged (share_ack_lost): the lock was first. It returns how many
// records were released.
func (c *Correlator) shareRelease(g *groupState, match func(*shareHeld) bool, cause string, ev Evidence, at time.Time) int64 {
	var n int64
	for _, p := range sortedTPs(g.share.parts) {
		sp := g.share.parts[p]
		keep := sp.held[:0]
		for _, h := range sp.held {
			if !match(h) || h.deadline.Before(at) {
				keep = append(keep, h)
				continue
			}
			for _, s := range h.pending {
				n = satAdd(n, records(s.first, s.last))
				sp.addReturn(shareReturn{first: s.first, last: s.last, how: cause, member: h.member, ev: ev, at: at, held: h})
			}
		}
		clear(sp.held[len(keep):])
		sp.held = keep
	}
	return n
}

// redeliveryCause says why offsets first..last, acquired again at at with
// a delivery count above 1, went back to the queue: the latest return the
// capture shows of them; else a lock that had run out by at; else
// unknown. Acquisitions of them still held are over (the broker gave the
// records to someone else): one whose lock had not run out was released
// for a reason the capture does not show, and is no longer judged.
//
// A cause inferred for want of a return (lock_timeout, unknown) rests on
// the capture showing everything the holders sent and received from
// their acquisition to at: inferred names that window (the holders'
// clients), for the loss check share_redelivery makes (judgeLoss); nil
// when the capture shows the return.
func (sp *sharePart) redeliveryCause(first, last int64, at time.Time) (cause string, inferred *absence) {
	var latest time.Time
	for _, r := range sp.returns {
		if r.first <= last && r.last >= first && !r.at.Before(latest) {
			cause, latest = shareHow(r.how), r.at
		}
	}
	keep := sp.held[:0]
	for _, h := range sp.held {
		if !overlapsSpan(h.pending, first, last) {
			keep = append(keep, h)
			continue
		}
		if cause == "" {
			if inferred == nil {
				inferred = &absence{from: h.at, to: at}
			}
			inferred.from = minTime(inferred.from, h.at)
			if !slices.Contains(inferred.clients, h.client) {
				inferred.clients = append(inferred.clients, h.client)
			}
		}
		if !h.deadline.After(at) {
			if cause == "" {
				cause = ShareCauseLock
			}
			keep = append(keep, h) // its lock ran out: share_ack_lost judges it
			continue
		}
		if h.pending = subtract(h.pending, first, last); len(h.pending) > 0 {
			keep = append(keep, h)
		}
	}
	clear(sp.held[len(keep):])
	sp.held = keep
	if cause == "" {
		cause = ShareCauseUnknown
	}
	return cause, inferred
}

// shareExpiredText releases what share member m still held when the
// broker fenced it at at (KIP-932: a fenced member's records go back to
// the queue), and says where the records it held went, as the capture
// shows it: released with its fencing, earlier when a connection of it
// closed, or not held at all.
func (c *Correlator) shareExpiredText(g *groupState, m *memberState, at time.Time) string {
	var ev Evidence
	if mh := c.hz().members[g.name][m.id]; mh != nil && mh.hasLive {
		ev = mh.liveEv
	}
	n := c.shareRelease(g, func(h *shareHeld) bool { return h.member == m.id }, ShareCauseExpired, ev, at)
	var closed int64
	var closedAt time.Time
	for _, p := range sortedTPs(g.share.parts) {
		for _, r := range g.share.parts[p].returns {
			if r.member == m.id && r.how == ShareCauseConnClosed && !r.at.After(at) {
				closed = satAdd(closed, records(r.first, r.last))
				closedAt = r.at
			}
		}
	}
	consumed := ""
	if m.assigned && len(m.assignment) > 0 {
		consumed = fmt.Sprintf(": it consumed no more of %s", assignmentText(m.assignment))
	}
	switch {
	case n > 0:
		return fmt.Sprintf("%s, and the broker put the %d records it held unacknowledged back in the queue when it fenced it",
			consumed, n)
	case closed > 0:
		return fmt.Sprintf("%s; the %d records it held unacknowledged had gone back to the queue when its connection "+
			"closed at %s, before their acquisition lock ran out", consumed, closed, stamp(closedAt))
	}
	return consumed
}
