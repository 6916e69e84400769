package correlate

import (
	"fmt"
	"strconv"
	"time"
)

// Consumer health hazards: a group partition whose health (health.go)
// stays stopped or stalled is a hazard, once per episode, judged every
// quarter window of capture time (at most healthEvery) and at the end: the window it rests on is
// Options.HealthWindow (--health-window, 60 s), the threshold a stop or
// stall must last before it is one. The episode ends when the partition
// is healthy again (a later stop is a new hazard).

// healthEvery is how often, at most, in capture time, health is judged
// for hazards: a quarter of the window, at most 5 s.
const healthEvery = 5 * time.Second

// healthTick judges every group partition's health for hazards.
func (c *Correlator) healthTick(final bool) {
	if !final && c.now.Sub(c.lastHealth) < min(healthEvery, c.opts.HealthWindow/4) {
		return
	}
	c.lastHealth = c.now
	for _, g := range c.sortedGroups() {
		for _, p := range sortedTPs(g.parts) {
			ps := g.parts[p]
			stopped := episodeKey(HazardConsumerStopped, g.name, p.topic, strconv.Itoa(int(p.partition)))
			stalled := episodeKey(HazardConsumerStalled, g.name, p.topic, strconv.Itoa(int(p.partition)))
			end, ok := c.partEnd(ps, p)
			var h *Health
			if ok && ps.hasCommitted {
				h = c.health(g, p, ps, end, end-ps.committed)
			}
			switch {
			case h != nil && h.State == HealthStopped:
				c.endEpisode(stalled)
				c.report(stopped, c.healthHazard(HazardConsumerStopped, g, p, ps, end, h))
			case h != nil && h.State == HealthStalled:
				c.endEpisode(stopped)
				c.report(stalled, c.healthHazard(HazardConsumerStalled, g, p, ps, end, h))
			default:
				c.endEpisode(stopped)
				c.endEpisode(stalled)
			}
		}
	}
}

// healthHazard is the hazard of a stopped or stalled partition: its lag,
// what the wire shows, and the group's last commits of it as evidence.
func (c *Correlator) healthHazard(kind string, g *groupState, p tp, ps *partState, end int64, h *Health) *HazardEvent {
	lag := end - ps.committed
	what := "committed nothing"
	if kind == HazardConsumerStalled {
		what = "committed only offset " + strconv.FormatInt(ps.committed, 10)
	}
	win := time.Duration(h.WindowMillis) * time.Millisecond
	ev := &HazardEvent{
		Kind: kind, Severity: SeverityWarn, Group: g.name, Topic: p.topic, Partition: i32p(p.partition),
		Offset: i64(ps.committed), HighWatermark: i64(end),
		Summary: fmt.Sprintf("%s %s/%d %s for %s while the partition grew to %d: %d records wait (%s)",
			g.name, p.topic, p.partition, what, win, end, lag, h.Evidence),
		at: c.now,
	}
	if lt, ok := c.lagSeconds(p, ps, end); ok && lt.seconds > 0 {
		ev.Summary += fmt.Sprintf("; the record at the committed offset was made %.1fs before", lt.seconds)
	}
	all := ps.commits.all()
	for i := len(all) - 1; i >= 0 && len(ev.Evidence) < 2; i-- {
		r := all[i]
		ev.Evidence = append(ev.Evidence, Evidence{TS: TimeOf(r.at), Conn: r.conn, API: "OffsetCommit", CorrelationID: r.corr})
		if ev.MemberID == "" {
			ev.MemberID, ev.ClientID, ev.ClientHost = r.member, r.clientID, r.clientHost
		}
	}
	return ev
}
