package correlate

import (
	"maps"
	"sort"
)

// HazardCount counts a group's hazards of one kind and severity.
type HazardCount struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Count    int    `json:"count"`
}

// hazardSnapshot returns every hazard kept, most severe first, then by
// time, kind, group, topic, partition and member; the counts by severity
// of every hazard reported; and how many were not kept.
func (c *Correlator) hazardSnapshot() ([]HazardEvent, map[string]int, int64) {
	h := c.hz()
	out := make([]HazardEvent, 0, len(h.list))
	counts := maps.Clone(h.bySeverity)
	for _, ev := range h.list {
		cp := *ev
		cp.Evidence = append([]Evidence(nil), ev.Evidence...)
		if cp.RangeID != "" {
			cp.RangeID = h.ranges.resolve(cp.RangeID)
		}
		out = append(out, cp)
	}
	SortHazards(out)
	return out, counts, h.dropped
}

// SortHazards sorts hazards as Snapshot lists them: most severe first,
// then by time (stable: equal ones keep their order).
func SortHazards(hs []HazardEvent) {
	sort.SliceStable(hs, func(i, j int) bool { return lessHazard(&hs[i], &hs[j]) })
}

// Downgraded reports whether h was made info because the capture lost
// data where its evidence would have been (Stats.HazardsIncomplete
// counts them).
func (h *HazardEvent) Downgraded() bool { return h.downgraded }

func lessHazard(a, b *HazardEvent) bool {
	if ra, rb := SeverityRank(a.Severity), SeverityRank(b.Severity); ra != rb {
		return ra > rb
	}
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	pa, pb := int32(-1), int32(-1)
	if a.Partition != nil {
		pa = *a.Partition
	}
	if b.Partition != nil {
		pb = *b.Partition
	}
	if pa != pb {
		return pa < pb
	}
	return a.MemberID < b.MemberID
}

// groupHazardCounts counts group's hazards by kind and severity.
func (c *Correlator) groupHazardCounts(group string) []HazardCount {
	n := c.hz().counts[group]
	if len(n) == 0 {
		return nil
	}
	out := make([]HazardCount, 0, len(n))
	for k, v := range n {
		out = append(out, HazardCount{Kind: k[0], Severity: k[1], Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := SeverityRank(out[i].Severity), SeverityRank(out[j].Severity); ri != rj {
			return ri > rj
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}
