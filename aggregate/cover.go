package aggregate

import (
	"cmp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// Coverage: a member expires when the coordinator sees nothing from it for
// its session timeout, and only the agent on the coordinator's host sees
// its heartbeats. While that host is not captured (its agent quiet,
// stopped, killed, restarting) the other agents still move the
// correlator's clock, and the correlator would conclude expiries from a
// silence that is only the aggregator's. So the aggregator remembers which
// capture times each host's agent runs covered and which host carried each
// member's coordinator traffic, and withholds an expiry whose silence was
// not all covered, with the hazards naming that member after it (a zombie
// fetch rests on the expiry). A later generation that lacks the member
// confirms the expiry: what was withheld is emitted then. A member seen
// again is live (the correlator retracts the expiry). At the end, members
// still withheld are shown live in the summary and listed as unobserved in
// the aggregate line.

// memberRef names a member of a group.
type memberRef struct{ group, member string }

// withheldExpiry is a member's expiry event and the hazards naming the
// member after it, waiting for confirmation.
type withheldExpiry struct {
	host    string
	since   time.Time // the member's last request seen
	events  []correlate.Event
	dropped int // hazards beyond maxWithheldEvents
}

const (
	maxWithheldEvents = 64
	maxCoordRefs      = 1 << 17
	maxDroppedHazards = 1 << 12
)

// coverage is the aggregator's knowledge of what was captured where. It
// runs on the aggregator's goroutine.
type coverage struct {
	hosts    map[string][]*agentState // every run of a host
	member   map[memberRef]string     // the host of a member's latest coordinator request
	group    map[string]string        // the host of a group's latest coordinator request
	withheld map[memberRef]*withheldExpiry
	// gone are the members whose withheld expiry a later generation
	// confirmed: a member_expired hazard the correlator holds longer
	// (absence-based hazards wait for loss reports) still passes.
	gone map[memberRef]bool
	// dropped are the hazards never emitted (their expiry not confirmed,
	// or resting on a silence not captured): patch takes them off the
	// summary too.
	dropped []*correlate.HazardEvent
	// expiries counts expiries withheld (confirmed ones included);
	// confirmed those a later generation confirmed; hazards the
	// absence-based hazards dropped because the silence they rest on was
	// not all captured (hazardsWithheld).
	expiries, confirmed, hazards int64
}

func newCoverage() *coverage {
	return &coverage{hosts: map[string][]*agentState{}, member: map[memberRef]string{},
		group: map[string]string{}, withheld: map[memberRef]*withheldExpiry{}, gone: map[memberRef]bool{}}
}

// covered reports whether host's agent runs together captured all of
// [from, to]: each run from its first item to the latest traffic it
// reported.
func (cv *coverage) covered(host string, from, to time.Time) bool {
	runs := slices.Clone(cv.hosts[host])
	slices.SortFunc(runs, func(a, b *agentState) int { return a.first.Compare(b.first) })
	at := from
	for _, r := range runs {
		if r.first.After(at) {
			break
		}
		if r.seen.After(at) {
			at = r.seen
		}
	}
	return !at.Before(to)
}

// exchange notes which host carried e when it is a request to a group's
// coordinator.
func (cv *coverage) exchange(host string, e *decode.Exchange) {
	group, member := coordinatorRequest(e)
	if group == "" {
		return
	}
	if r, ok := e.Req.(*kmsg.LeaveGroupRequest); ok && member == "" {
		for _, m := range r.Members { // v3+: a batch of members
			cv.heard(host, group, m.MemberID, e)
		}
	}
	if len(cv.member) >= maxCoordRefs {
		clear(cv.member)
	}
	if len(cv.group) >= maxCoordRefs {
		clear(cv.group)
	}
	cv.group[group] = host
	cv.heard(host, group, member, e)
}

// heard notes that member (if any) sent e to its coordinator on host.
func (cv *coverage) heard(host, group, member string, e *decode.Exchange) {
	if member == "" {
		return
	}
	ref := memberRef{group, member}
	cv.member[ref] = host
	if w := cv.withheld[ref]; w != nil && alive(e) {
		// The broker still had the member: its expiry was the
		// aggregator's silence (a later generation without it is its
		// leaving, not a confirmation).
		for _, x := range w.events {
			cv.drop(x)
		}
		delete(cv.withheld, ref)
	}
}

// alive reports whether exchange e shows that the broker still had the
// member that sent it: a heartbeat, a join, a sync accepted, or a
// LeaveGroup not refused (a member removed by the broker gets
// UNKNOWN_MEMBER_ID).
func alive(e *decode.Exchange) bool {
	switch r := e.Resp.(type) {
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode == 0
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode == 0
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode == 0
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode == 0
	case *kmsg.LeaveGroupResponse:
		return r.ErrorCode == 0
	case nil:
		_, leaving := e.Req.(*kmsg.LeaveGroupRequest)
		return leaving
	}
	return false
}

// coordinatorRequest returns the group (and member, when the request
// names one or the response gave one) of a request to a group
// coordinator.
func coordinatorRequest(e *decode.Exchange) (group, member string) {
	switch r := e.Req.(type) {
	case *kmsg.JoinGroupRequest:
		member = r.MemberID
		if resp, ok := e.Resp.(*kmsg.JoinGroupResponse); ok && member == "" {
			member = resp.MemberID
		}
		return r.Group, member
	case *kmsg.SyncGroupRequest:
		return r.Group, r.MemberID
	case *kmsg.HeartbeatRequest:
		return r.Group, r.MemberID
	case *kmsg.LeaveGroupRequest:
		return r.Group, r.MemberID
	case *kmsg.OffsetCommitRequest:
		return r.Group, r.MemberID
	case *kmsg.OffsetFetchRequest:
		return r.Group, ""
	case *kmsg.ConsumerGroupHeartbeatRequest:
		member = r.MemberID
		if resp, ok := e.Resp.(*kmsg.ConsumerGroupHeartbeatResponse); ok && resp.MemberID != nil {
			member = *resp.MemberID
		}
		return r.Group, member
	}
	return "", ""
}

// filter decides on an event of the correlator: true passes it on now;
// false means it is withheld. emit passes withheld events on once
// confirmed.
func (cv *coverage) filter(ev correlate.Event, emit func(correlate.Event)) bool {
	switch ev := ev.(type) {
	case *correlate.MemberEvent:
		if ev.Action != correlate.MemberExpired {
			return true
		}
		ref := memberRef{ev.Group, ev.MemberID}
		host, ok := cv.member[ref]
		if !ok {
			host = cv.group[ev.Group]
		}
		since := ev.Time()
		if ev.LastSeen != nil {
			since = ev.LastSeen.Time
		}
		if host == "" || cv.covered(host, since, ev.Time()) {
			return true
		}
		cv.expiries++
		cv.withheld[ref] = &withheldExpiry{host: host, since: since, events: []correlate.Event{ev}}
		return false
	case *correlate.HazardEvent:
		w := cv.withheld[memberRef{ev.Group, ev.MemberID}]
		if ev.MemberID == "" {
			return true
		}
		if w == nil {
			return cv.observed(ev)
		}
		if len(w.events) < maxWithheldEvents {
			w.events = append(w.events, ev)
		} else {
			w.dropped++
		}
		return false
	case *correlate.GenerationEvent:
		cv.generation(ev, emit)
	}
	return true
}

// observed reports whether a hazard that rests on a member's silence at
// its coordinator (member_expired, heartbeat_late) came from a silence
// the coordinator's host's agents captured. Such hazards may come after
// the expiry they go with was settled: the correlator holds them while
// loss may still be reported. One whose silence was not all captured
// (its agent dead, restarting, quiet) is the aggregator's silence, not
// the member's: it is dropped and counted, but the member_expired of an
// expiry a later generation confirmed.
func (cv *coverage) observed(ev *correlate.HazardEvent) bool {
	ref := memberRef{ev.Group, ev.MemberID}
	var from time.Time
	switch {
	case ev.Kind == correlate.HazardMemberExpired && cv.gone[ref]:
		return true
	case ev.Kind == correlate.HazardMemberExpired && ev.LastSeen != nil:
		from = ev.LastSeen.Time
	case ev.Kind == correlate.HazardHeartbeatLate && ev.HeartbeatGapMillis > 0:
		from = ev.Time().Add(-time.Duration(ev.HeartbeatGapMillis) * time.Millisecond)
	default:
		return true
	}
	host, ok := cv.member[ref]
	if !ok {
		host = cv.group[ev.Group]
	}
	if host == "" || cv.covered(host, from, ev.Time()) {
		return true
	}
	cv.hazards++
	cv.drop(ev)
	return false
}

// drop remembers hazard ev as never emitted (at most maxDroppedHazards).
func (cv *coverage) drop(ev correlate.Event) {
	if h, ok := ev.(*correlate.HazardEvent); ok && len(cv.dropped) < maxDroppedHazards {
		cv.dropped = append(cv.dropped, h)
	}
}

// generation: a member withheld that rejoined is live; one missing from
// a generation the coordinator's host captured was removed by the broker:
// its expiry is confirmed and emitted.
func (cv *coverage) generation(ev *correlate.GenerationEvent, emit func(correlate.Event)) {
	for ref, w := range cv.withheld {
		if ref.group != ev.Group {
			continue
		}
		in := slices.ContainsFunc(ev.Members, func(m correlate.GenerationMember) bool { return m.MemberID == ref.member })
		switch {
		case in: // it rejoined: the expiry was the aggregator's silence
			for _, x := range w.events {
				cv.drop(x)
			}
			delete(cv.withheld, ref)
		case len(ev.Members) > 0 && cv.covered(w.host, ev.Time(), ev.Time()):
			cv.confirmed++
			if len(cv.gone) >= maxCoordRefs {
				clear(cv.gone)
			}
			cv.gone[ref] = true
			for _, x := range w.events {
				emit(x)
			}
			delete(cv.withheld, ref)
		}
	}
}

// Unobserved is a member whose expiry is withheld at the end: the
// correlator judged it expired from a silence of the coordinator's host
// (Host) the agents did not capture, since its last request (Since).
type Unobserved struct {
	Group    string         `json:"group"`
	MemberID string         `json:"member_id"`
	Host     string         `json:"host"`
	Since    correlate.Time `json:"since"`
}

// patch shows the members still withheld as live in s (the correlator
// judged them expired from a silence the aggregator did not capture),
// without the withheld hazards, and returns them.
func (cv *coverage) patch(s *correlate.Snapshot) []Unobserved {
	var out []Unobserved
	drop := map[*correlate.HazardEvent]bool{}
	for _, h := range cv.dropped {
		drop[h] = true
	}
	for ref, w := range cv.withheld {
		found := false
		for gi := range s.Groups {
			g := &s.Groups[gi]
			if g.Group != ref.group {
				continue
			}
			for mi := range g.Members {
				m := &g.Members[mi]
				if m.MemberID == ref.member && m.Status == "expired" {
					m.Status, m.GoneAt, m.Reason, found = "live", nil, "", true
				}
			}
		}
		for _, ev := range w.events { // never emitted
			if h, ok := ev.(*correlate.HazardEvent); ok {
				drop[h] = true
			}
		}
		if found {
			out = append(out, Unobserved{ref.group, ref.member, w.host, correlate.TimeOf(w.since)})
		}
	}
	s.Hazards = slices.DeleteFunc(s.Hazards, func(h correlate.HazardEvent) bool {
		for d := range drop {
			if d.Kind == h.Kind && d.Group == h.Group && d.MemberID == h.MemberID && d.Time().Equal(h.Time()) {
				s.HazardCounts[h.Severity]--
				uncount(s, h)
				return true
			}
		}
		return false
	})
	slices.SortFunc(out, func(a, b Unobserved) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.MemberID, b.MemberID))
	})
	return out
}

// uncount takes hazard h off its group's counts in s.
func uncount(s *correlate.Snapshot, h correlate.HazardEvent) {
	for gi := range s.Groups {
		g := &s.Groups[gi]
		if g.Group != h.Group {
			continue
		}
		for i := range g.Hazards {
			if c := &g.Hazards[i]; c.Kind == h.Kind && c.Severity == h.Severity {
				c.Count--
			}
		}
		g.Hazards = slices.DeleteFunc(g.Hazards, func(c correlate.HazardCount) bool { return c.Count <= 0 })
	}
}
