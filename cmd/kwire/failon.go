package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kwire/kwire/correlate"
)

// failOnUsage is --fail-on's flag line; analyzeHelp says the rest.
const failOnUsage = "exit with status 3 when a hazard matches `LIST`: severities, lost, replayed, KIND[:SEVERITY], -KIND (see CI above)"

// failOn is a parsed --fail-on: which hazards fail the run.
type failOn struct {
	text           string
	rank           int            // any hazard of this severity rank or more (0: none)
	lost, replayed bool           // the classes
	kinds          map[string]int // a kind -> the least severity rank that fails
	excluded       map[string]bool
}

// parseFailOn parses --fail-on's list; nil for "".
func parseFailOn(s string) (*failOn, error) {
	if s == "" {
		return nil, nil
	}
	f := &failOn{text: s, kinds: map[string]int{}, excluded: map[string]bool{}}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		switch {
		case term == "":
			return nil, fmt.Errorf("--fail-on %q: an empty term", s)
		case term == correlate.SeverityInfo:
			return nil, fmt.Errorf("--fail-on %q: info: every new consumer group has info hazards; name the kinds to fail on instead", s)
		case correlate.SeverityRank(term) > 0:
			if f.rank == 0 || correlate.SeverityRank(term) < f.rank {
				f.rank = correlate.SeverityRank(term)
			}
		case term == "lost":
			f.lost = true
		case term == "replayed":
			f.replayed = true
		case strings.HasPrefix(term, "-"):
			if !slices.Contains(correlate.HazardKinds, term[1:]) {
				return nil, fmt.Errorf("--fail-on %q: %s: want -KIND, a hazard kind to leave out (%s)", s, term, strings.Join(correlate.HazardKinds, ", "))
			}
			f.excluded[term[1:]] = true
		default:
			kind, sev, hasSev := strings.Cut(term, ":")
			if !slices.Contains(correlate.HazardKinds, kind) {
				return nil, fmt.Errorf("--fail-on %q: %s: want warn, critical, lost, replayed, a hazard kind (%s), KIND:SEVERITY or -KIND",
					s, term, strings.Join(correlate.HazardKinds, ", "))
			}
			rank := 1
			if hasSev {
				if rank = correlate.SeverityRank(sev); rank == 0 {
					return nil, fmt.Errorf("--fail-on %q: %s: want KIND:info, KIND:warn or KIND:critical", s, term)
				}
			}
			f.kinds[kind] = rank
		}
	}
	for k := range f.excluded {
		if _, ok := f.kinds[k]; ok {
			return nil, fmt.Errorf("--fail-on %q: %s is both named and left out", s, k)
		}
	}
	return f, nil
}

// matches reports whether hazard h fails the run.
func (f *failOn) matches(h *correlate.HazardEvent) bool {
	if f.excluded[h.Kind] {
		return false
	}
	rank := correlate.SeverityRank(h.Severity)
	if least, ok := f.kinds[h.Kind]; ok && rank >= least {
		return true
	}
	switch {
	case f.rank > 0 && rank >= f.rank:
		return true
	case rank < 2: // info: only where its kind is named
		return false
	case f.lost && (rank == 3 || positive(h.Skipped)):
		return true
	}
	return f.replayed && replays(h)
}

// replays reports whether h says that records are processed again.
func replays(h *correlate.HazardEvent) bool {
	switch h.Kind {
	case correlate.HazardTxnOffsetCommitRejected, correlate.HazardTxnOffsetsAborted,
		correlate.HazardShareRedelivery, correlate.HazardShareAckLost, correlate.HazardShareMemberDied:
		return true
	}
	return positive(h.Replayed)
}

func positive(n *int64) bool { return n != nil && *n > 0 }

// failures counts the hazards that matched --fail-on, by kind.
type failures map[string]int

// String is "3 hazard(s) (commit_rejected 2, offset_reset 1)".
func (fs failures) String() string {
	n := 0
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(fs)) {
		n += fs[k]
		kinds = append(kinds, fmt.Sprintf("%s %d", k, fs[k]))
	}
	return fmt.Sprintf("%d hazard(s) (%s)", n, strings.Join(kinds, ", "))
}
