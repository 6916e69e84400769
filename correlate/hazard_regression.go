package correlate

import (
	"fmt"
	"time"
)

// heldRegression is a commit_regression not yet judged: the committed
// offset went back, and whether records are processed again depends on
// what comes first. A later accepted commit at or past the offset before
// the regression supersedes it (a worker's slower thread finishing an
// earlier record, then a faster one committing further): no one resumed
// from the lower offset, nothing is processed again. A handover while it
// holds (the group's next generation, the committer leaving, another
// client fetching the committed offset to resume from it) or the end of
// the input makes the records between the committed offset and the one
// before the regression processed again.
type heldRegression struct {
	ev    *HazardEvent // filled but for the verdict
	cause string       // the summary's closing "(the ... hazard explains it)"
	cm    committer
	off   int64 // the regressing commit's offset
}

// checkRegression: an accepted commit below the previous accepted one,
// whatever moved it back: cause names the hazard that explains it (an
// admin commit), or an offset reset since the previous commit does. It
// is held (heldRegression) until a commit supersedes it or someone
// resumes from it; a lower commit while one is open is part of it.
func (c *Correlator) checkRegression(g *groupState, p tp, ph *partHazard, cm *committer, off int64, prev commitMark, cause *HazardCause) {
	if !prev.known || !prev.fromCommit || off >= prev.offset {
		return
	}
	if ph.high >= 0 {
		return // the regression already open, held or reported
	}
	if cause == nil && ph.resetSinceCommit {
		cause = &HazardCause{Kind: HazardOffsetReset, TS: TimeOf(ph.resetAt)}
	}
	ph.high = prev.offset
	ev := partHazardEvent(HazardCommitRegression, SeverityWarn, g.name, p, cm.at)
	cm.who(ev)
	ev.Offset, ev.PreviousOffset = i64(off), i64(prev.offset)
	by := ""
	if prev.member != cm.member {
		by = " by " + orNone(prev.member)
	}
	ev.Summary = fmt.Sprintf("%s %s/%d: %s committed %d after commit %d%s was accepted: the committed offset went back",
		g.name, p.topic, p.partition, cm.name(), off, prev.offset, by)
	hr := &heldRegression{ev: ev, cm: *cm, off: off}
	if ev.Cause = cause; cause != nil {
		hr.cause = fmt.Sprintf(" (the %s hazard at %s explains it)", cause.Kind, cause.TS.Format("15:04:05.000"))
	}
	ev.Evidence = []Evidence{prev.ev, cm.ev}
	ph.held = hr
	c.hz().held[g.name]++
}

// regressionSuperseded: the accepted commit off (>= ph.high) by cm put
// the committed offset back where it was before the regression. A held
// regression is reported now: the offset did go back (a crash in that
// window would have replayed), but no one resumed from it.
func (c *Correlator) regressionSuperseded(group string, p tp, ph *partHazard, cm *committer, off int64) {
	key := partKey(HazardCommitRegression, group, p)
	if hr := ph.held; hr != nil {
		c.unhold(group, ph)
		ev := hr.ev
		d := cm.at.Sub(hr.cm.at)
		ev.DurationMillis = millis(d)
		who := cm.name()
		if cm.member == hr.cm.member && cm.client == hr.cm.client {
			who = "it"
		}
		ev.Summary += fmt.Sprintf("; %s committed %d %v later, before anyone resumed from %d: nothing was processed again "+
			"(a crash or rebalance in between would have processed records %d..%d again)%s",
			who, off, d.Round(time.Millisecond), hr.off, hr.off, ph.high-1, hr.cause)
		ev.Evidence = append(ev.Evidence, cm.ev)
		c.report(key, ev)
	}
	ph.high = -1
	c.endEpisode(key)
}

// regressionInForce reports ph's held regression: the committed offset
// was still below the one before it when what happened (a handover, or
// the end of the input): the records from the committed offset up to it
// are processed again.
func (c *Correlator) regressionInForce(group string, p tp, ph *partHazard, what, fate string) {
	hr := ph.held
	c.unhold(group, ph)
	ev := hr.ev
	cur, hi, past := ph.last.offset, ph.high, ""
	// An offset it went back from past the partition's end (an admin's
	// commit beyond the high watermark) names records that do not exist:
	// only those up to the end are processed again.
	if end, _, _, ok := c.end(p, false); ok && end < hi {
		hi, past = end, fmt.Sprintf(" (the partition ends at %d: %d..%d do not exist)", end, max(end, cur), ph.high-1)
	}
	if hi <= cur {
		ev.Summary += fmt.Sprintf(", and was still %d when %s: the offset it went back from, %d, is past the partition's end %d, "+
			"so no record there is processed again%s", cur, what, ph.high, hi, hr.cause)
		c.report(partKey(HazardCommitRegression, group, p), ev)
		return
	}
	ev.FromOffset, ev.ToOffset, ev.Replayed = i64(cur), i64(hi-1), i64(hi-cur)
	ev.Summary += fmt.Sprintf(", and was still %d when %s: records %d..%d %s%s%s", cur, what, cur, hi-1, fate, past, hr.cause)
	c.report(partKey(HazardCommitRegression, group, p), ev)
}

func (c *Correlator) unhold(group string, ph *partHazard) {
	ph.held = nil
	h := c.hz()
	if h.held[group]--; h.held[group] <= 0 {
		delete(h.held, group)
	}
}

// regressionHandover reports group's held regressions that resume
// matches as in force: someone resumes from the committed offset.
func (c *Correlator) regressionHandover(group, what string, resume func(hr *heldRegression) bool) {
	h := c.hz()
	if h.held[group] == 0 {
		return
	}
	parts := h.parts[group]
	for _, p := range sortedTPs(parts) {
		if ph := parts[p]; ph.held != nil && resume(ph.held) {
			c.regressionInForce(group, p, ph, what, "are processed again by the next owner")
		}
	}
}

// regressionGeneration: generation gen of g began, after the held
// regressions' commits: the partitions are assigned anew, and their
// owners resume from the committed offset. A classic generation is
// compared by id (a commit carries its generation); a KIP-848 commit
// carries the member's epoch, an admin commit none: by time.
func (c *Correlator) regressionGeneration(g *groupState, gen *genState) {
	at := gen.firstSeen
	if !gen.started.IsZero() {
		at = gen.started
	}
	c.regressionHandover(g.name, fmt.Sprintf("generation %d began", gen.id), func(hr *heldRegression) bool {
		if hr.cm.gen >= 0 && !g.epochs() {
			return gen.id > hr.cm.gen
		}
		return at.After(hr.cm.at)
	})
}

// regressionGone: member m, which made a held regression, left or
// expired: the next owner resumes from the committed offset.
func (c *Correlator) regressionGone(g *groupState, m *memberState, action string) {
	how := "left the group"
	if action == MemberExpired {
		how = "expired"
	}
	c.regressionHandover(g.name, fmt.Sprintf("member %s %s", m.id, how), func(hr *heldRegression) bool {
		return hr.cm.member == m.id
	})
}

// regressionResumed: client k asked for the committed offset of p
// (OffsetFetch answered off) or fetched records from off (Fetch), below
// the offset before a held regression: it resumes from it. The client
// that made the regression is no handover (it rejoins first when it is
// one).
func (c *Correlator) regressionResumed(group string, p tp, ph *partHazard, k clientKey, off int64, api string) {
	if hr := ph.held; hr != nil && hr.cm.client != k && off < ph.high {
		c.regressionInForce(group, p, ph, fmt.Sprintf("client %s on %s resumed from it (%s %d)", k.clientID, k.host, api, off),
			"are processed again by it")
	}
}

// flushRegressions reports the regressions still held at the end of the
// input.
func (c *Correlator) flushRegressions() {
	h := c.hz()
	for _, g := range sortedKeys(h.held) {
		parts := h.parts[g]
		for _, p := range sortedTPs(parts) {
			if ph := parts[p]; ph.held != nil {
				c.regressionInForce(g, p, ph, "the capture ended", "will be processed again after a restart or rebalance")
			}
		}
	}
}
