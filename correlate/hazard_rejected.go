package correlate

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// commitLost reports whether an OffsetCommit error loses the commit: the
// member was fenced or the request cannot succeed as it is. Retriable
// coordinator errors are not: clients send the commit again.
func commitLost(code int16) bool {
	switch code {
	case kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code, kerr.RebalanceInProgress.Code,
		kerr.FencedInstanceID.Code, kerr.StaleMemberEpoch.Code, kerr.FencedMemberEpoch.Code,
		kerr.OffsetMetadataTooLarge.Code, kerr.InvalidCommitOffsetSize.Code,
		kerr.GroupAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Code:
		return true
	}
	return false
}

// rejectedCommit: a commit the broker refused is lost. When it would not
// have moved the committed offset forward, nothing is replayed: reported
// now (info). Otherwise it waits for the same member or client to commit
// as far (a retry after the rebalance: nothing lost), or for RejectedGrace.
func (c *Correlator) rejectedCommit(g *groupState, p tp, ph *partHazard, cm *committer, off int64, code int16) {
	pr := &pendingReject{committer: *cm, offset: off, code: code, prev: ph.last}
	if ph.last.known && off <= ph.last.offset {
		c.reportRejected(g.name, p, pr)
		return
	}
	for _, o := range ph.rejected {
		if o.member == cm.member && o.client == cm.client && o.gen == cm.gen && o.code == code {
			o.offset = max(o.offset, off) // the same member retrying: one episode
			return
		}
	}
	ph.rejected = append(ph.rejected, pr)
}

// supersede settles the rejected commits of p on an accepted commit: one by
// the same member or client as far or further retried it; any other
// accepted commit means the rejected progress is lost.
func (c *Correlator) supersede(g *groupState, p tp, ph *partHazard, cm *committer, off int64) {
	keep := ph.rejected[:0]
	for _, pr := range ph.rejected {
		same := (pr.member != "" && pr.member == cm.member) || pr.client == cm.client
		switch {
		case same && off >= pr.offset:
		case same:
			keep = append(keep, pr)
		default:
			c.reportRejected(g.name, p, pr)
		}
	}
	ph.rejected = keep
}

// flushRejected reports the rejected commits of p not retried within the
// grace (all of them when final).
func (c *Correlator) flushRejected(group string, p tp, ph *partHazard, final bool) {
	keep := ph.rejected[:0]
	for _, pr := range ph.rejected {
		if final || c.now.Sub(pr.at) >= c.opts.Hazards.RejectedGrace {
			c.reportRejected(group, p, pr)
		} else {
			keep = append(keep, pr)
		}
	}
	ph.rejected = keep
}

func (c *Correlator) reportRejected(group string, p tp, pr *pendingReject) {
	ev := partHazardEvent(HazardCommitRejected, SeverityWarn, group, p, pr.at)
	pr.who(ev)
	ev.Offset, ev.ErrorCode, ev.Error = i64(pr.offset), pr.code, errName(pr.code)
	head := fmt.Sprintf("%s %s/%d: commit %d by %s was answered %s and lost", group, p.topic, p.partition, pr.offset, pr.name(), ev.Error)
	switch {
	case !pr.prev.known:
		ev.Summary = head + "; the committed offset before it is not in the capture: the records up to " +
			strconv.FormatInt(pr.offset-1, 10) + " it covered may be processed again"
	case pr.offset <= pr.prev.offset:
		ev.Severity, ev.PreviousOffset = SeverityInfo, i64(pr.prev.offset)
		ev.Summary = fmt.Sprintf("%s; the committed offset stays %d, which it would not have moved forward: nothing is replayed",
			head, pr.prev.offset)
	default:
		ev.PreviousOffset = i64(pr.prev.offset)
		ev.FromOffset, ev.ToOffset, ev.Replayed = i64(pr.prev.offset), i64(pr.offset-1), i64(pr.offset-pr.prev.offset)
		ev.Summary = fmt.Sprintf("%s; the committed offset stays %d, so records %d..%d will be processed again by the next owner",
			head, pr.prev.offset, pr.prev.offset, pr.offset-1)
	}
	ev.Evidence = []Evidence{pr.ev}
	if pr.prev.known {
		ev.Evidence = []Evidence{pr.prev.ev, pr.ev}
	}
	// "Lost" rests on absence: no accepted commit of the partition, by
	// any member, since the one before it (a lost one may have committed
	// as far), and no retry since.
	from := time.Time{}
	if pr.prev.known {
		from = pr.prev.ev.TS.Time
	}
	ev.absent = &absence{from: from, to: maxTime(pr.at, c.now)}
	who := pr.member
	if who == "" {
		who = clientMemberKey(pr.client)
	}
	c.report(partKey(HazardCommitRejected, group, p, who, strconv.Itoa(int(pr.gen)), strconv.Itoa(int(pr.code))), ev)
}
