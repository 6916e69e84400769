package correlate

import (
	"fmt"
	"slices"
	"time"
)

// checkBeyondFetch: a commit above anything Fetch delivered to the member
// (and above the committed offset it replaces): records nobody read. The
// Fetch that delivered them may be taken in after the commit (capture
// times of different connections are not exactly ordered), so the commit
// waits FetchGrace for a Fetch requested before it to deliver as far.
// Not judged once a Fetch's records were not copied (eBPF --snap): what
// was delivered is then unknown.
func (c *Correlator) checkBeyondFetch(g *groupState, p tp, mp *memberPart, cm *committer, off int64, prev commitMark) {
	seen := max(mp.delivered, mp.position)
	if mp.fetches == 0 || mp.notCopied > 0 || (prev.known && off <= prev.offset) || off <= seen {
		return
	}
	if mp.pend == nil {
		h := c.hz()
		h.beyond = append(h.beyond, beyondRef{g.name, cm.member, p})
	}
	mp.pend = &pendingBeyond{committer: *cm, offset: off, prev: prev, seen: seen}
}

// pendingBeyond is a commit above what its member was delivered so far.
type pendingBeyond struct {
	committer
	offset int64
	prev   commitMark
	seen   int64 // what Fetches requested before the commit delivered
}

// beyondRef names a member partition with a pendingBeyond.
type beyondRef struct {
	group, member string
	p             tp
}

// fetchedBefore settles mp's pending commit with a Fetch requested at
// asked that delivered up to next.
func (c *Correlator) fetchedBefore(mp *memberPart, asked time.Time, next int64) {
	if pb := mp.pend; pb != nil && !asked.After(pb.at.Add(c.opts.Hazards.OrderTolerance)) {
		pb.seen = max(pb.seen, next)
		if pb.seen >= pb.offset {
			mp.pend = nil
		}
	}
}

// settleBeyond reports the pending commits older than FetchGrace (all of
// them when final).
func (c *Correlator) settleBeyond(final bool) {
	h := c.hz()
	keep := h.beyond[:0]
	for _, r := range h.beyond {
		mp := c.memberPartOf(r.group, r.member, r.p)
		switch {
		case mp == nil || mp.pend == nil:
		case final || c.now.Sub(mp.pend.at) >= c.opts.Hazards.FetchGrace:
			c.reportBeyond(r.group, r.p, mp)
			mp.pend = nil
		default:
			keep = append(keep, r)
		}
	}
	h.beyond = keep
}

func (c *Correlator) reportBeyond(group string, p tp, mp *memberPart) {
	pb := mp.pend
	off, seen := pb.offset, pb.seen
	ev := partHazardEvent(HazardCommitBeyondFetch, SeverityCritical, group, p, pb.at)
	pb.who(ev)
	ev.Offset, ev.Skipped = i64(off), i64(off-max(seen, 0))
	if seen >= 0 {
		ev.DeliveredTo = i64(seen)
	}
	if mp.hwm >= 0 {
		ev.HighWatermark = i64(mp.hwm)
	}
	if pb.prev.known {
		ev.PreviousOffset = i64(pb.prev.offset)
	}
	ev.Summary = fmt.Sprintf("%s %s/%d: %s committed %d but had been delivered records only up to offset %d: %d records "+
		"were never read by it and will be skipped", group, p.topic, p.partition, pb.name(), off, seen, off-max(seen, 0))
	if mp.hwm >= 0 && off > mp.hwm {
		ev.Summary += fmt.Sprintf(" (the high watermark is %d: offsets %d..%d do not exist yet)", mp.hwm, mp.hwm, off-1)
	}
	ev.Evidence = []Evidence{pb.ev}
	if mp.hasFetch {
		ev.Evidence = []Evidence{mp.lastFetch, pb.ev}
	}
	// No Fetch delivering the records is in the capture: one lost since
	// the previous commit (or within ResetWindow) would explain it.
	from := pb.at.Add(-c.opts.Hazards.ResetWindow)
	if pb.prev.known && pb.prev.ev.TS.Before(pb.at) {
		from = pb.prev.ev.TS.Time
	}
	ev.absent = &absence{clients: []clientKey{pb.client}, from: from, to: pb.at.Add(c.opts.Hazards.FetchGrace)}
	if c.report(partKey(HazardCommitBeyondFetch, group, p, pb.member), ev) {
		mp.beyond = off
	}
}

// recvNote sums up, over the partitions of one OffsetCommit, how fresh the
// records it commits are.
type recvNote struct {
	parts      []recvPart    // its accepted partitions of the member's, to judge
	progress   bool          // some partition's committed offset moved forward
	slow       bool          // some partition's last record was delivered more than OnReceiveWindow before
	lead       time.Duration // the largest delivery-to-commit time
	deliveries int64         // the most deliveries a partition got since its previous commit
	p          tp
	off        int64
	fetch      Evidence
	hasFetch   bool
}

// recvPart is one accepted partition commit of a member: offset off,
// replacing prev.
type recvPart struct {
	p    tp
	off  int64
	prev commitMark
	mp   *memberPart // as recvWaits found it, for a commit judged at once
}

// pendingRecv is a commit whose records were not delivered yet when it was
// taken in: the Fetch that delivered them may come a moment later from
// another connection (OrderTolerance).
type pendingRecv struct {
	group string
	cm    committer
	r     recvNote
}

// maxPendingRecv bounds the commits waiting on their Fetch.
const maxPendingRecv = 4096

// judgeReceive judges a member's commit for commit_on_receive, now or,
// when a partition's committed records were not delivered yet, once they
// are or OrderTolerance has passed. A member's commits are judged in
// order: one waits while an earlier one does.
func (c *Correlator) judgeReceive(g *groupState, cm *committer, r recvNote) {
	h := c.hz()
	if !c.recvWaits(g.name, cm.member, r) && !slices.ContainsFunc(h.recvPend, func(x pendingRecv) bool {
		return x.group == g.name && x.cm.member == cm.member
	}) {
		c.noteReceives(g, cm, &r)
		return
	}
	r.parts = slices.Clone(r.parts) // the caller's are its scratch
	for i := range r.parts {
		r.parts[i].mp = nil // looked up again when judged: it may be gone by then
	}
	h.recvPend = append(h.recvPend, pendingRecv{g.name, *cm, r})
	if len(h.recvPend) > maxPendingRecv {
		c.settleRecv(true)
	}
}

// recvWaits reports whether a partition r commits has records above what
// was delivered to the member.
func (c *Correlator) recvWaits(group, member string, r recvNote) bool {
	for i := range r.parts {
		x := &r.parts[i]
		x.mp = c.memberPartOf(group, member, x.p)
		if x.mp != nil && x.mp.delivered < x.off && x.mp.spanOf(x.off-1) == nil {
			return true
		}
	}
	return false
}

// settleRecv judges the waiting commits whose records came or whose
// OrderTolerance passed (all of them when final), each member's in order.
func (c *Correlator) settleRecv(final bool) {
	h := c.hz()
	if len(h.recvPend) == 0 {
		return
	}
	tol := c.opts.Hazards.OrderTolerance
	var blocked map[[2]string]bool
	keep := h.recvPend[:0]
	for _, x := range h.recvPend {
		k := [2]string{x.group, x.cm.member}
		if blocked[k] || !(final || c.now.Sub(x.cm.at) > tol || !c.recvWaits(x.group, x.cm.member, x.r)) {
			if blocked == nil {
				blocked = map[[2]string]bool{}
			}
			blocked[k] = true
			keep = append(keep, x)
			continue
		}
		if g := c.groups[x.group]; g != nil {
			for i := range x.r.parts {
				x.r.parts[i].mp = nil // looked up now
			}
			c.noteReceives(g, &x.cm, &x.r)
		}
	}
	clear(h.recvPend[len(keep):])
	h.recvPend = keep
}

// noteReceives adds r's partitions up and judges the commit.
func (c *Correlator) noteReceives(g *groupState, cm *committer, r *recvNote) {
	for _, x := range r.parts {
		mp := x.mp
		if mp == nil {
			mp = c.memberPartOf(g.name, cm.member, x.p)
		}
		if mp != nil {
			c.noteReceive(mp, x.p, cm, x.off, x.prev, r)
		}
	}
	c.onReceive(g, cm, r)
}

// noteReceive adds one accepted partition commit of a member to r.
func (c *Correlator) noteReceive(mp *memberPart, p tp, cm *committer, off int64, prev commitMark, r *recvNote) {
	since := mp.deliveries - mp.commitDeliveries
	mp.commitDeliveries = mp.deliveries
	if prev.known && off <= prev.offset {
		return
	}
	s := mp.spanOf(off - 1)
	if s == nil {
		return
	}
	lead := cm.at.Sub(s.at)
	if lead < -c.opts.Hazards.OrderTolerance || lead > c.opts.Hazards.OnReceiveWindow {
		r.slow = true
	}
	lead = max(lead, 0) // within OrderTolerance: the commit came after
	if !r.progress || lead > r.lead {
		r.p, r.off, r.lead, r.fetch, r.hasFetch = p, off, lead, mp.lastFetch, mp.hasFetch
	}
	r.progress = true
	r.deliveries = max(r.deliveries, since)
}

// recvRun is a member's run of commits on receive.
type recvRun struct {
	n     int
	times []time.Time // of its last OnReceivePersistent commits
	deliv []int64     // deliveries each covered
	evs   []Evidence
}

// onReceive: a member's commits covering records delivered only moments
// before (OnReceiveWindow), commit after commit (OnReceiveRun): if records
// are processed asynchronously (auto-commit racing the processing), a
// crash loses those committed and not processed (field report 2). Fast
// synchronous processing looks the same on the wire: info. Persistent
// (OnReceivePersistent commits in a row) and paced by a timer rather than
// by deliveries (steady intervals, a varying number of deliveries per
// commit, often several), it is auto-commit of what was received: warn.
func (c *Correlator) onReceive(g *groupState, cm *committer, r *recvNote) {
	if !r.progress {
		return
	}
	mh := c.memberHz(g.name, cm.member)
	if r.slow {
		mh.recv = recvRun{}
		return
	}
	hz := c.opts.Hazards
	rr := &mh.recv
	rr.n++
	rr.times = lastN(append(rr.times, cm.at), hz.OnReceivePersistent)
	rr.deliv = lastN(append(rr.deliv, r.deliveries), hz.OnReceivePersistent)
	if len(rr.evs) < maxEvidence-1 {
		if r.hasFetch {
			rr.evs = append(rr.evs, r.fetch)
		}
		rr.evs = append(rr.evs, cm.ev)
	}
	if mh.recvKey == "" {
		mh.recvKey = episodeKey(HazardCommitOnReceive, g.name, cm.member)
	}
	sev, key := SeverityInfo, mh.recvKey
	switch {
	case rr.n >= hz.OnReceivePersistent && timerPaced(rr.times, rr.deliv):
		sev, key = SeverityWarn, key+"\x00persistent"
	case rr.n < hz.OnReceiveRun || c.episodeOpen(key):
		return
	}
	ev := partHazardEvent(HazardCommitOnReceive, sev, g.name, r.p, cm.at)
	cm.who(ev)
	ev.Offset, ev.LeadMillis, ev.Count = i64(r.off), i64(millis(r.lead)), int64(rr.n)
	ev.Summary = fmt.Sprintf("%s: %s made %d commits in a row each covering records delivered at most %v before "+
		"(the last, %d on %s/%d, %v after their delivery): if records are processed asynchronously, a crash loses "+
		"those committed but not yet processed", g.name, cm.name(), rr.n, hz.OnReceiveWindow, r.off, r.p.topic,
		r.p.partition, r.lead.Round(time.Millisecond/10))
	if sev == SeverityWarn {
		ev.WindowMillis = millis(rr.times[len(rr.times)-1].Sub(rr.times[0]))
		ev.Summary += fmt.Sprintf("; the commits come every %v whatever was delivered (auto-commit of what was polled)",
			medianGap(rr.times).Round(time.Millisecond))
	}
	ev.Evidence = append([]Evidence(nil), rr.evs...)
	c.report(key, ev)
}

func lastN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// timerPaced reports whether commits at times, covering deliv deliveries
// each, come at steady intervals (each within 10% of the median) while the
// deliveries per commit vary, a third of them or more covering several.
func timerPaced(times []time.Time, deliv []int64) bool {
	m := medianGap(times)
	if m <= 0 {
		return false
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < m*9/10 || d > m*11/10 {
			return false
		}
	}
	several, varies := 0, false
	for _, d := range deliv {
		if d >= 2 {
			several++
		}
		varies = varies || d != deliv[0]
	}
	return varies && several*3 >= len(deliv)
}

func medianGap(times []time.Time) time.Duration {
	if len(times) < 2 {
		return 0
	}
	var buf [16]time.Duration // the usual number of times fits: no allocation
	gaps := buf[:0]
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	slices.Sort(gaps)
	return gaps[len(gaps)/2]
}
