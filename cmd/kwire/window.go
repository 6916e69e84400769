package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/route"
)

// window is --group, --since and --until: what kwire analyze writes and
// judges. It is used on the goroutine that writes.
type window struct {
	group        string
	since, until instant
	resolved     bool
}

// instant is a --since or --until: an absolute time, or a time of day
// (UTC) on the day the capture begins, resolved by the first item seen.
type instant struct {
	t     time.Time
	clock time.Duration // since midnight UTC, when tod
	tod   bool
	set   bool
}

// parseInstant reads RFC 3339 ("2026-12-02T00:19:50Z", offsets and
// fractions allowed, a space for the T), or a time of day "00:19:50[.5]"
// in UTC.
func parseInstant(flag, s string) (instant, error) {
	if s == "" {
		return instant{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return instant{t: t.UTC(), set: true}, nil
		}
	}
	if t, err := time.Parse("15:04:05.999999999", s); err == nil {
		return instant{clock: t.Sub(t.Truncate(24 * time.Hour)), tod: true, set: true}, nil
	}
	return instant{}, fmt.Errorf("--%s %q: want a time as 2026-12-02T00:19:50Z (RFC 3339; without a zone, UTC) or a time of day as 00:19:50 (UTC, on the day the capture begins)", flag, s)
}

// newWindow returns the window of the flags; nil when they keep everything.
func newWindow(group, since, until string) (*window, error) {
	w := &window{group: group}
	var err error
	if w.since, err = parseInstant("since", since); err != nil {
		return nil, err
	}
	if w.until, err = parseInstant("until", until); err != nil {
		return nil, err
	}
	if w.since.set && w.until.set && !w.since.tod && !w.until.tod && !w.until.t.After(w.since.t) {
		return nil, fmt.Errorf("--until %s is not after --since %s", until, since)
	}
	if group == "" && !w.since.set && !w.until.set {
		return nil, nil
	}
	return w, nil
}

// at reports whether time t is in the window; the first call resolves
// times of day against t's day.
func (w *window) at(t time.Time) bool {
	if !w.resolved {
		w.resolved = true
		day := t.UTC().Truncate(24 * time.Hour)
		for _, i := range []*instant{&w.since, &w.until} {
			if i.tod {
				i.t, i.tod = day.Add(i.clock), false
			}
		}
	}
	return (!w.since.set || !t.Before(w.since.t)) && (!w.until.set || t.Before(w.until.t))
}

// event reports whether ev is written and judged.
func (w *window) event(ev correlate.Event) bool {
	if w.group != "" && groupOf(ev) != w.group {
		return false
	}
	return w.at(ev.Time())
}

// groupOf is the consumer group event ev is about ("" for none).
func groupOf(ev correlate.Event) string {
	if t, ok := ev.(*correlate.TransactionEvent); ok {
		return t.Group // offsets a transaction commits for a group
	}
	if k, ok := route.EventKey(ev); ok && strings.HasPrefix(k, route.GroupKey("")) {
		return strings.TrimPrefix(k, route.GroupKey(""))
	}
	return ""
}

// snapshot keeps of s what the window keeps: the group, its clients
// and the fetches that may be its, the hazards of the group and time
// (recounted), the generations completed in the time. With --group the
// transactions, which belong to producers, are left out.
func (w *window) snapshot(s *correlate.Snapshot) {
	if w.group != "" {
		s.Groups = slices.DeleteFunc(s.Groups, func(g correlate.Group) bool { return g.Group != w.group })
		s.Clients = slices.DeleteFunc(s.Clients, func(c correlate.Client) bool {
			return c.Group != w.group && !slices.ContainsFunc(c.Bindings, func(b correlate.Binding) bool { return b.Group == w.group })
		})
		s.Unattributed = slices.DeleteFunc(s.Unattributed, func(u correlate.Consumption) bool { return !slices.Contains(u.Candidates, w.group) })
		if len(s.Unattributed) == 0 {
			s.Unattributed = nil // as the correlator's Snapshot has none: null
		}
		s.Transactions, s.StablePartitions = nil, nil
	}
	for i := range s.Groups {
		g := &s.Groups[i]
		g.Generations = slices.DeleteFunc(g.Generations, func(e correlate.GenerationEvent) bool { return !w.at(e.Time()) })
	}
	s.Hazards = slices.DeleteFunc(s.Hazards, func(h correlate.HazardEvent) bool { return !w.event(&h) })
	s.HazardCounts = map[string]int{correlate.SeverityCritical: 0, correlate.SeverityWarn: 0, correlate.SeverityInfo: 0}
	for _, h := range s.Hazards {
		s.HazardCounts[h.Severity]++
	}
}
