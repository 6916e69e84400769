package correlate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// partHazard is what hazard detection keeps for one group partition.
type partHazard struct {
	// last is the last accepted commit, or the broker's OffsetFetch answer.
	last commitMark
	// high is the committed offset before a regression, until the
	// committed offset is back there (-1: no regression open).
	high int64
	// held is the open regression while no one has resumed from the
	// committed offset it left (nil once reported).
	held     *heldRegression
	rejected []*pendingReject // rejected commits that may still be retried
	reset    resetState
	// resetSinceCommit: an offset reset (reported at resetAt) moved the
	// consumer since the last commit: a lower commit is a regression the
	// reset explains.
	resetSinceCommit bool
	resetAt          time.Time
}

// commitMark is one accepted commit (or OffsetFetch answer).
type commitMark struct {
	known      bool
	fromCommit bool // false: from an OffsetFetch answer
	offset     int64
	member     string
	gen        int32
	client     clientKey
	ev         Evidence
}

// committer is who sent an OffsetCommit.
type committer struct {
	member string
	gen    int32
	client clientKey
	ev     Evidence
	at     time.Time
}

// pendingReject is a rejected commit waiting to be retried (superseded)
// or reported.
type pendingReject struct {
	committer
	offset int64
	code   int16
	prev   commitMark
}

func (c *Correlator) partHz(group string, p tp) *partHazard {
	h := c.hz()
	m := h.parts[group]
	if m == nil {
		m = make(map[tp]*partHazard)
		h.parts[group] = m
	}
	ph := m[p]
	if ph == nil {
		if len(m) >= c.opts.MaxPartitionsPerGroup || c.looseUntracked(group, p) {
			return nil
		}
		ph = &partHazard{high: -1}
		m[p] = ph
	}
	return ph
}

// commitHazards looks at every partition of an answered OffsetCommit.
func (c *Correlator) commitHazards(e *decode.Exchange, req *kmsg.OffsetCommitRequest) {
	g := c.groups[req.Group]
	resp, _ := e.Resp.(*kmsg.OffsetCommitResponse)
	if g == nil || resp == nil {
		return
	}
	codes := c.commitCodes(resp)
	cm := &committer{member: req.MemberID, gen: req.Generation, client: c.keyOf(e), ev: c.evidenceOf(e), at: e.ReqTime.UTC()}
	if req.Version == 0 {
		cm.gen = -1
	}
	accepted := false
	h := c.hz()
	recv := recvNote{parts: h.recvParts[:0]}
	for _, t := range req.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for _, rp := range t.Partitions {
			p := tp{topic, rp.Partition}
			code, ok := codes[p]
			ph := c.partHz(g.name, p)
			if !ok || rp.Offset < 0 || ph == nil {
				continue
			}
			switch {
			case code == 0:
				accepted = true
				c.acceptedCommit(g, p, ph, cm, rp.Offset, &recv)
			case commitLost(code):
				c.rejectedCommit(g, p, ph, cm, rp.Offset, code)
			}
		}
	}
	if accepted && req.MemberID != "" && cm.gen >= 0 {
		c.judgeReceive(g, cm, recv)
		c.liveRequest(g, req.MemberID, cm.at, cm.at, cm.ev, false) // a commit keeps a classic session alive
	}
	h.recvParts = recv.parts[:0] // grown, for the next commit
}

// acceptedCommit checks one accepted partition commit, then records it.
// A commit sent before the last one recorded (its connection's bytes were
// held back behind a lost segment, so the decoder delivers it late) was
// processed by the broker before it: it did not move the committed offset
// back, and the later one stays the committed offset.
func (c *Correlator) acceptedCommit(g *groupState, p tp, ph *partHazard, cm *committer, off int64, recv *recvNote) {
	prev := ph.last
	if prev.known && prev.fromCommit && cm.at.Before(prev.ev.TS.Time) {
		c.supersede(g, p, ph, cm, off)
		return
	}
	c.supersede(g, p, ph, cm, off)
	if cm.member == "" || cm.gen < 0 {
		var cause *HazardCause
		if c.adminCommit(g, p, cm, off, prev) {
			cause = &HazardCause{Kind: HazardNonOwnerCommit, TS: TimeOf(cm.at)}
		}
		c.checkRegression(g, p, ph, cm, off, prev, cause)
	} else {
		var cause *HazardCause
		if c.checkOwnerCommit(g, p, cm, off, prev) {
			cause = &HazardCause{Kind: HazardNonOwnerCommit, TS: TimeOf(cm.at)}
		}
		c.checkRegression(g, p, ph, cm, off, prev, cause)
		if mp := c.memberPartOf(g.name, cm.member, p); mp != nil {
			c.checkBeyondFetch(g, p, mp, cm, off, prev)
			mp.trackHoles(cm, off, prev)
			c.checkGap(g, p, mp, cm, off, prev)
			recv.parts = append(recv.parts, recvPart{p: p, off: off, prev: prev})
			mp.lastCommit, mp.haveLast = off, true
		}
	}
	ph.last = commitMark{known: true, fromCommit: true, offset: off, member: cm.member, gen: cm.gen, client: cm.client, ev: cm.ev}
	ph.resetSinceCommit = false
	if ph.high >= 0 && off >= ph.high {
		c.regressionSuperseded(g.name, p, ph, cm, off)
	}
}

func partKey(kind, group string, p tp, more ...string) string {
	return episodeKey(kind, append([]string{group, p.topic, strconv.Itoa(int(p.partition))}, more...)...)
}

// who fills the committer's fields of ev.
func (cm *committer) who(ev *HazardEvent) {
	ev.MemberID, ev.Generation = cm.member, i32p(cm.gen)
	ev.ClientID, ev.ClientHost = cm.client.clientID, cm.client.host
}

func (cm *committer) name() string {
	if cm.member == "" {
		return fmt.Sprintf("client %s on %s (no member id)", cm.client.clientID, cm.client.host)
	}
	return fmt.Sprintf("member %s (generation %d)", cm.member, cm.gen)
}

func orNone(member string) string {
	if member == "" {
		return "a client without member id"
	}
	return member
}

// adminCommit: an accepted commit without member id or generation (an
// admin tool, a manual reset) that moves the committed offset. A
// standalone consumer (assign() with a group id) commits what it fetched
// itself: not a hazard. It reports whether it found one.
func (c *Correlator) adminCommit(g *groupState, p tp, cm *committer, off int64, prev commitMark) bool {
	if prev.known && prev.offset == off {
		return false
	}
	if mp := c.memberPartOf(g.name, clientMemberKey(cm.client), p); mp != nil && (mp.delivered >= off || mp.position >= off) {
		return false
	}
	ev := partHazardEvent(HazardNonOwnerCommit, SeverityInfo, g.name, p, cm.at)
	cm.who(ev)
	ev.Offset = i64(off)
	state := "while the group has members"
	if !g.live() {
		state = "while the group is empty"
	}
	head := fmt.Sprintf("%s %s/%d: %s committed %d (generation %d) %s", g.name, p.topic, p.partition, cm.name(), off, cm.gen, state)
	switch {
	case !prev.known:
		ev.Summary = head + "; the offset it replaced is not in the capture: the next owner starts at " + strconv.FormatInt(off, 10)
	case off < prev.offset:
		ev.Severity, ev.PreviousOffset = SeverityWarn, i64(prev.offset)
		ev.FromOffset, ev.ToOffset, ev.Replayed = i64(off), i64(prev.offset-1), i64(prev.offset-off)
		ev.Summary = fmt.Sprintf("%s, moving the committed offset back from %d: the next owner processes records %d..%d again",
			head, prev.offset, off, prev.offset-1)
	default:
		ev.Severity, ev.PreviousOffset = SeverityCritical, i64(prev.offset)
		ev.FromOffset, ev.ToOffset, ev.Skipped = i64(prev.offset), i64(off-1), i64(off-prev.offset)
		ev.Summary = fmt.Sprintf("%s, moving the committed offset forward from %d: the next owner never processes records %d..%d",
			head, prev.offset, prev.offset, off-1)
	}
	ev.Evidence = []Evidence{cm.ev}
	if prev.known {
		ev.Evidence = []Evidence{prev.ev, cm.ev}
	}
	c.report(partKey(HazardNonOwnerCommit, g.name, p, cm.client.host, cm.client.clientID, strconv.FormatInt(off, 10)), ev)
	return true
}

// checkOwnerCommit: a member's accepted commit for a partition another
// member owns in the commit's generation. A member still owning the
// partition in that generation is its owner, even when a later generation
// has begun; with a cooperative assignor a revoked partition has no owner
// in the generation that revokes it, so its final commit is no hazard.
// It reports whether it found one.
func (c *Correlator) checkOwnerCommit(g *groupState, p tp, cm *committer, off int64, prev commitMark) bool {
	if g.epochs() || (prev.known && prev.offset == off) {
		return false
	}
	gs := g.gen(cm.gen)
	if gs == nil || authority(gs.membersFrom) < authority(fromSync) {
		return false
	}
	gm := gs.entry(cm.member)
	if gm == nil || !gm.assigned || owns(gm.assignment, p) {
		return false
	}
	owner := ""
	for _, id := range sortedKeys(gs.members) {
		if o := gs.members[id]; o != gm && o.assigned && owns(o.assignment, p) {
			owner = id
			break
		}
	}
	if owner == "" {
		return false
	}
	ev := partHazardEvent(HazardNonOwnerCommit, SeverityWarn, g.name, p, cm.at)
	cm.who(ev)
	ev.Offset, ev.Owner, ev.OwnerGeneration = i64(off), owner, i32p(gs.id)
	ev.Summary = fmt.Sprintf("%s %s/%d: %s committed %d for a partition that %s owns in generation %d: it overwrites the owner's progress",
		g.name, p.topic, p.partition, cm.name(), off, owner, gs.id)
	ev.Evidence = []Evidence{cm.ev}
	if prev.known {
		ev.PreviousOffset = i64(prev.offset)
		ev.Summary += fmt.Sprintf(" (%d before)", prev.offset)
		ev.Evidence = []Evidence{prev.ev, cm.ev}
	}
	c.report(partKey(HazardNonOwnerCommit, g.name, p, cm.member, strconv.Itoa(int(cm.gen))), ev)
	return true
}

func owns(a map[string][]int32, p tp) bool {
	for _, q := range a[p.topic] {
		if q == p.partition {
			return true
		}
	}
	return false
}

// checkGap: a member that commits record by record (stride 1, at least
// once inside a delivered batch: finer than a poll) strides over records
// it was delivered and never committed (field report 4).
func (c *Correlator) checkGap(g *groupState, p tp, mp *memberPart, cm *committer, off int64, prev commitMark) {
	if !mp.haveLast || !prev.known || prev.member != cm.member || prev.offset != mp.lastCommit {
		mp.run, mp.proof = 0, 0
		return
	}
	switch stride := off - mp.lastCommit; {
	case stride == 1:
		mp.run++
		if mp.inside(off) {
			mp.proof++
		}
		return
	case stride >= 2 && mp.run >= c.opts.Hazards.GapMinRun && mp.proof > 0 && off <= mp.delivered:
		c.reportGap(g, p, mp, cm, off, prev)
	}
	mp.run, mp.proof = 0, 0
}

// maxMissing caps HazardEvent.MissingOffsets.
const maxMissing = 100

func (c *Correlator) reportGap(g *groupState, p tp, mp *memberPart, cm *committer, off int64, prev commitMark) {
	// Commit n+1 says record n is done: commits last+1..off-1 were never
	// made, so records last..off-2 were never committed.
	if !mp.allData(mp.lastCommit, off-1) {
		return // a control record, a compacted hole, or not known: not a gap
	}
	var missing []int64
	for o := mp.lastCommit; o <= off-2 && len(missing) < maxMissing; o++ {
		missing = append(missing, o)
	}
	n := off - 1 - mp.lastCommit
	ev := partHazardEvent(HazardCommitGap, SeverityCritical, g.name, p, cm.at)
	cm.who(ev)
	ev.Offset, ev.PreviousOffset, ev.MissingOffsets, ev.Skipped = i64(off), i64(mp.lastCommit), missing, i64(n)
	ev.DeliveredTo = i64(mp.delivered)
	what, it := fmt.Sprintf("record %d was", mp.lastCommit), "it"
	if n > 1 {
		what, it = fmt.Sprintf("records %d..%d were", mp.lastCommit, off-2), "them"
	}
	ev.Summary = fmt.Sprintf("%s %s/%d: %s committed one record at a time (%d commits of stride 1), then %d after %d: "+
		"%s delivered and never committed; after a crash or rebalance the next owner resumes at %d and never processes %s",
		g.name, p.topic, p.partition, cm.name(), mp.run, off, mp.lastCommit, what, off, it)
	ev.Evidence = []Evidence{prev.ev, cm.ev}
	// The commits in between are not in the capture: lost ones would
	// close the gap.
	ev.absent = &absence{clients: []clientKey{cm.client}, from: prev.ev.TS.Time, to: cm.at}
	if c.report(partKey(HazardCommitGap, g.name, p, cm.member, strconv.Itoa(int(cm.gen))), ev) {
		mp.holes.drop(mp.lastCommit+1, off-1) // told: not again when the member ends
	}
}

// trackHoles follows the commit offsets a member strides over and fills
// (holes) with its accepted commit off; prev is the partition's accepted
// commit before it. Only offsets after a record delivered to it count (a
// reset that skipped records is not a hole), and a stride over more than
// maxMissing is no per-record commit.
func (mp *memberPart) trackHoles(cm *committer, off int64, prev commitMark) {
	h := &mp.holes
	if mp.inside(off) {
		h.inside++
	}
	base := h.top
	if base < 0 && prev.known {
		base = prev.offset
	}
	switch {
	case base < 0:
	case off > base:
		if off-base-1 <= maxMissing {
			for o := base + 1; o < off && len(h.open) < maxMissing; o++ {
				if mp.allData(o-1, o) {
					h.open = append(h.open, hole{off: o, by: off, prev: prev.offset, at: cm.at, ev: cm.ev})
				}
			}
		}
	default:
		if i, ok := slices.BinarySearchFunc(h.open, off, func(x hole, o int64) int { return cmp.Compare(x.off, o) }); ok {
			h.open = slices.Delete(h.open, i, i+1)
			h.filled++
		}
	}
	h.top = max(h.top, off)
}

// drop forgets the holes from..to.
func (h *holes) drop(from, to int64) {
	h.open = slices.DeleteFunc(h.open, func(x hole) bool { return from <= x.off && x.off <= to })
}

// checkHoles: member m ended (left or expired, at at) with holes in its
// per-record commits (a commit strode over a record still being
// processed, out of order, and the member never committed it): records
// delivered and never committed (field report 4). Only a member that
// filled holes before (at least GapMinRun times, once inside a delivered
// batch) commits record by record; only the holes below the committed
// offset it left are lost: the next owner resumes there. Each run of
// consecutive lost records is one hazard.
func (c *Correlator) checkHoles(g *groupState, m *memberState, at time.Time) {
	mh := c.hz().members[g.name][m.id]
	if mh == nil {
		return
	}
	for _, p := range sortedTPs(mh.parts) {
		mp := mh.parts[p]
		h := &mp.holes
		ph := c.hz().parts[g.name][p]
		if len(h.open) == 0 || h.filled < c.opts.Hazards.GapMinRun || h.inside == 0 || ph == nil || !ph.last.known {
			continue
		}
		var run []hole
		for i, x := range h.open {
			if x.off <= ph.last.offset {
				run = append(run, x)
			}
			if len(run) > 0 && (i == len(h.open)-1 || h.open[i+1].off != x.off+1 || h.open[i+1].off > ph.last.offset) {
				c.reportHoles(g, m, p, mp, ph, run, at)
				run = nil
			}
		}
		h.open = nil
	}
}

// reportHoles reports run, consecutive holes member m ended with.
func (c *Correlator) reportHoles(g *groupState, m *memberState, p tp, mp *memberPart, ph *partHazard, run []hole, at time.Time) {
	first := run[0]
	missing := make([]int64, len(run))
	for i, x := range run {
		missing[i] = x.off - 1
	}
	n := int64(len(run))
	ev := partHazardEvent(HazardCommitGap, SeverityCritical, g.name, p, at)
	ev.MemberID, ev.Generation, ev.ClientID, ev.ClientHost = m.id, i32p(m.generation), m.clientID, m.clientHost
	ev.Offset, ev.PreviousOffset, ev.MissingOffsets, ev.Skipped = i64(first.by), i64(first.prev), missing, i64(n)
	ev.DeliveredTo = i64(mp.delivered)
	commits, what, it := "commit "+strconv.FormatInt(first.off, 10), fmt.Sprintf("record %d was", missing[0]), "it"
	if n > 1 {
		commits = fmt.Sprintf("commits %d..%d", first.off, run[n-1].off)
		what, it = fmt.Sprintf("records %d..%d were", missing[0], missing[n-1]), "them"
	}
	how := "left the group"
	if m.status == statusExpired {
		how = "expired"
	}
	ev.Summary = fmt.Sprintf("%s %s/%d: member %s (generation %d) committed one record at a time, out of order "+
		"(%d commits below a higher one it had made, each a record a slower thread finished), and %s without "+
		"the %s it strode over with commit %d: %s delivered and never committed; the next owner resumes at %d, "+
		"the committed offset it left, and never processes %s",
		g.name, p.topic, p.partition, m.id, m.generation, mp.holes.filled, how, commits, first.by, what, ph.last.offset, it)
	ev.Evidence = []Evidence{first.ev}
	if ph.last.fromCommit {
		ev.Evidence = append(ev.Evidence, ph.last.ev)
	}
	// The commits filling the holes are not in the capture: lost ones
	// would close them.
	ev.absent = &absence{clients: []clientKey{{m.clientHost, m.clientID}}, from: first.at, to: at}
	c.report(partKey(HazardCommitGap, g.name, p, m.id, "ended", strconv.FormatInt(first.off, 10)), ev)
}
