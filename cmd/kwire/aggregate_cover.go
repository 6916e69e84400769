package main

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
)

// coverage is the aggregator's knowledge of what was captured where. It
// runs on the aggregator's goroutine.
type coverage struct {
	hosts    map[string][]*agentState // every run of a host
	member   map[memberRef]string     // the host of a member's latest coordinator request
	group    map[string]string        // the host of a group's latest coordinator request
	withheld map[memberRef]*withheldExpiry
	// expiries counts expiries withheld (confirmed ones included);
	// confirmed those a later generation confirmed.
	expiries, confirmed int64
}

func newCoverage() *coverage {
	return &coverage{hosts: map[string][]*agentState{}, member: map[memberRef]string{},
		group: map[string]string{}, withheld: map[memberRef]*withheldExpiry{}}
}

// covered reports whether host's agent runs together captured all of
// [from, to].
func (cv *coverage) covered(host string, from, to time.Time) bool {
	runs := slices.Clone(cv.hosts[host])
	slices.SortFunc(runs, func(a, b *agentState) int { return a.first.Compare(b.first) })
	at := from
	for _, r := range runs {
		if r.first.After(at) {
			break
		}
		if r.latest.After(at) {
			at = r.latest
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
	if len(cv.member) >= maxCoordRefs {
		clear(cv.member)
	}
	if len(cv.group) >= maxCoordRefs {
		clear(cv.group)
	}
	cv.group[group] = host
	if member != "" {
		cv.member[memberRef{group, member}] = host
	}
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
			since = *ev.LastSeen
		}
		if host == "" || cv.covered(host, since, ev.Time()) {
			return true
		}
		cv.expiries++
		cv.withheld[ref] = &withheldExpiry{host: host, since: since, events: []correlate.Event{ev}}
		return false
	case *correlate.HazardEvent:
		w := cv.withheld[memberRef{ev.Group, ev.MemberID}]
		if w == nil || ev.MemberID == "" {
			return true
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
			delete(cv.withheld, ref)
		case len(ev.Members) > 0 && cv.covered(w.host, ev.Time(), ev.Time()):
			cv.confirmed++
			for _, x := range w.events {
				emit(x)
			}
			delete(cv.withheld, ref)
		}
	}
}

// unobserved is a member whose expiry is withheld at the end.
type unobserved struct {
	Group    string    `json:"group"`
	MemberID string    `json:"member_id"`
	Host     string    `json:"host"`
	Since    time.Time `json:"since"`
}

// patch shows the members still withheld as live in s (the correlator
// judged them expired from a silence the aggregator did not capture),
// without the withheld hazards, and returns them.
func (cv *coverage) patch(s *correlate.Snapshot) []unobserved {
	var out []unobserved
	drop := map[*correlate.HazardEvent]bool{}
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
		if !found {
			continue
		}
		out = append(out, unobserved{ref.group, ref.member, w.host, w.since.UTC()})
		for _, ev := range w.events {
			if h, ok := ev.(*correlate.HazardEvent); ok {
				drop[h] = true
			}
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
	slices.SortFunc(out, func(a, b unobserved) int {
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
