package correlate

import (
	"slices"
	"testing"
)

// TestSpansAdd: overlapping and touching ranges merge into one, which
// keeps the id of the earliest added, and says which ids it absorbed.
func TestSpansAdd(t *testing.T) {
	type add struct {
		first, last int64
		id          string
	}
	tests := []struct {
		name     string
		in       []add
		want     []Span
		kept     []string // Add's kept, per add
		absorbed []string // every id absorbed
	}{
		{"one", []add{{107, 116, "a"}}, []Span{{First: 107, Last: 116, ID: "a"}}, []string{"a"}, nil},
		{"the same range twice counts once", []add{{107, 116, "a"}, {107, 116, "b"}},
			[]Span{{First: 107, Last: 116, ID: "a"}}, []string{"a", "a"}, []string{"b"}},
		{"overlapping", []add{{10, 20, "a"}, {15, 30, "b"}}, []Span{{First: 10, Last: 30, ID: "a"}}, []string{"a", "a"}, []string{"b"}},
		{"touching", []add{{0, 99, "a"}, {100, 499, "b"}}, []Span{{First: 0, Last: 499, ID: "a"}}, []string{"a", "a"}, []string{"b"}},
		{"apart, out of order", []add{{50, 60, "a"}, {0, 9, "b"}}, []Span{{First: 0, Last: 9, ID: "b"}, {First: 50, Last: 60, ID: "a"}},
			[]string{"a", "b"}, nil},
		{"one spanning two keeps the earliest's id", []add{{50, 60, "a"}, {0, 9, "b"}, {5, 55, "c"}},
			[]Span{{First: 0, Last: 60, ID: "a"}}, []string{"a", "b", "a"}, []string{"b", "c"}},
		{"one apart after a merge", []add{{0, 9, "a"}, {5, 15, "b"}, {17, 20, "c"}},
			[]Span{{First: 0, Last: 15, ID: "a"}, {First: 17, Last: 20, ID: "c"}}, []string{"a", "a", "c"}, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ss Spans
			var kept, absorbed []string
			for i, a := range tt.in {
				k, ab := ss.Add(Span{First: a.first, Last: a.last, ID: a.id, seq: uint64(i + 1)})
				kept, absorbed = append(kept, k), append(absorbed, ab...)
			}
			for i := range ss {
				ss[i].seq = 0
			}
			if !slices.Equal(ss, Spans(tt.want)) {
				t.Errorf("spans (-want +got):\n-%v\n+%v", tt.want, ss)
			}
			if !slices.Equal(kept, tt.kept) {
				t.Errorf("kept (-want +got):\n-%v\n+%v", tt.kept, kept)
			}
			if slices.Sort(absorbed); !slices.Equal(absorbed, tt.absorbed) {
				t.Errorf("absorbed (-want +got):\n-%v\n+%v", tt.absorbed, absorbed)
			}
		})
	}
}

// TestRangeIDs: hazards over overlapping records of one group partition
// share a range id, the first's; a hazard bridging two ranges gives the
// later range's hazards the first's id in the snapshot; other partitions,
// groups and kinds of impact are apart; past the cap a range apart from
// all is its hazard's own.
func TestRangeIDs(t *testing.T) {
	replayed := func(group string, part int32, from, to int64, id string) *HazardEvent {
		n := to - from + 1
		return &HazardEvent{ID: id, Kind: HazardCommitRejected, Group: group, Topic: "t", Partition: &part,
			FromOffset: &from, ToOffset: &to, Replayed: &n}
	}
	var r rangeTracker
	for _, tt := range []struct {
		ev        *HazardEvent
		rangeID   string
		resolved  string
		limit     int
		wantRange *RecordRange
	}{
		{replayed("g", 0, 10, 20, "a"), "a", "a", 10, &RecordRange{ImpactReplayed, 10, 20}},
		{replayed("g", 0, 30, 40, "b"), "b", "a", 10, nil},
		{replayed("g", 0, 15, 35, "c"), "a", "a", 10, nil}, // bridges a and b
		{replayed("g", 1, 15, 35, "d"), "d", "d", 10, nil},
		{replayed("h", 0, 15, 35, "e"), "e", "e", 10, nil},
		{replayed("g", 1, 100, 200, "f"), "f", "f", 3, nil}, // past the cap: not remembered
		{replayed("g", 1, 150, 160, "g"), "g", "g", 3, nil},
		{replayed("g", 1, 30, 40, "h"), "d", "d", 3, nil}, // within a range kept
		{&HazardEvent{ID: "x", Kind: HazardMemberExpired, Group: "g"}, "", "", 10, nil},
	} {
		r.add(tt.ev, tt.limit)
		if tt.ev.RangeID != tt.rangeID {
			t.Errorf("%s: range id %q, want %q", tt.ev.ID, tt.ev.RangeID, tt.rangeID)
		}
		if tt.wantRange != nil && *tt.ev.Range != *tt.wantRange {
			t.Errorf("%s: range %+v, want %+v", tt.ev.ID, *tt.ev.Range, *tt.wantRange)
		}
		defer func(ev *HazardEvent, want string) {
			if got := r.resolve(ev.RangeID); got != want {
				t.Errorf("%s: range id %q resolved at the end to %q, want %q", ev.ID, ev.RangeID, got, want)
			}
		}(tt.ev, tt.resolved)
	}
}
