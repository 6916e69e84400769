package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
)

// bigSnapshot is the state a long storm leaves (what a Correlator with
// its caps raised keeps): one classic group through gens generations, a
// new member in each (members in all, each gone five generations later),
// parts partitions reassigned at every generation, hazards hazards with
// their evidence. The report's input, not the protocol: the tests of
// cmd/kwire render reports of real captures.
func bigSnapshot(gens, members, parts, hazards int) (*correlate.Snapshot, *Recorder) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 50 * time.Millisecond) }
	id := func(i int) string { return fmt.Sprintf("consumer-%d-0123456789abcdef0123456789abcdef", i%members) }
	conn := correlate.Conn{ID: 7, Client: "10.1.2.3:51234", Broker: "10.1.2.9:9092"}
	g := correlate.Group{Group: "storm", GroupType: correlate.GroupClassic, ProtocolType: "consumer", Protocol: "range", State: "stable"}
	for i := range gens {
		started, completed := at(i), at(i).Add(20*time.Millisecond)
		d := int64(20)
		e := correlate.GenerationEvent{Group: g.Group, GroupType: g.GroupType, Generation: int32(i + 1), PreviousGeneration: int32(i),
			Protocol: "range", Cause: correlate.Cause{Kind: correlate.CauseMemberJoined, Member: id(i)},
			Started: new(correlate.TimeOf(started)), Completed: new(correlate.TimeOf(completed)), DurationMillis: &d, Complete: true,
			Evidence: []correlate.Evidence{{TS: correlate.TimeOf(started), Conn: conn, API: "JoinGroup", CorrelationID: int32(i)}}}
		for k := range 3 {
			m := correlate.GenerationMember{MemberID: id(i + k), Assignment: map[string][]int32{}}
			for p := k; p < parts; p += 3 {
				m.Assignment["orders"] = append(m.Assignment["orders"], int32(p))
			}
			e.Members = append(e.Members, m)
		}
		g.Generations = append(g.Generations, e)
	}
	for i := range members {
		joined, gone := at(i), at(i+5)
		g.Members = append(g.Members, correlate.Member{MemberID: id(i), ClientID: "c" + strconv.Itoa(i), ClientHost: "10.1.2.3",
			Status: "expired", JoinedAt: new(correlate.TimeOf(joined)), FirstSeen: correlate.TimeOf(joined), LastSeen: new(correlate.TimeOf(joined)), GoneAt: new(correlate.TimeOf(gone)), Reason: "session timeout"})
	}
	rec := NewRecorder()
	for step := range 20000 {
		now := at(gens).Add(-time.Duration(20000-step) * 10 * time.Millisecond)
		rec.Sample(now, func(fn func(string, *correlate.Partition)) {
			for p := range parts {
				c, hwm := int64(step*10), int64(step*12+p)
				fn(g.Group, &correlate.Partition{Topic: "orders", Partition: int32(p), Committed: &c,
					Fetch: correlate.Fetch{Position: &c, HighWatermark: &hwm}})
			}
		})
	}
	for p := range parts {
		c := int64(p)
		part := correlate.Partition{Topic: "orders", Partition: int32(p), Committed: &c}
		for k := range 32 {
			part.Commits = append(part.Commits, correlate.Commit{TS: correlate.TimeOf(at(gens - 32 + k)), MemberID: id(k), Offset: int64(k)})
		}
		g.Partitions = append(g.Partitions, part)
	}
	s := &correlate.Snapshot{Time: correlate.TimeOf(at(gens + 10)), Groups: []correlate.Group{g}, HazardCounts: map[string]int{"warn": hazards}}
	for i := range hazards {
		h := correlate.HazardEvent{Kind: correlate.HazardMemberExpired, Severity: "warn", Group: g.Group, MemberID: id(i),
			Summary: fmt.Sprintf("member %s expired", id(i))}
		for k := range 8 {
			h.Evidence = append(h.Evidence, correlate.Evidence{TS: correlate.TimeOf(at(i)), Conn: conn, API: "Heartbeat", CorrelationID: int32(k)})
		}
		s.Hazards = append(s.Hazards, h)
	}
	return s, rec
}

// TestLargeReport: a storm of thousands of generations, members and
// hazards makes a page of a few MB at most, written in well under a
// second, the same every time: the storm drawn as bands with counts, the
// members past the lanes' limit as one lane, the hazards past the
// list's limit counted.
func TestLargeReport(t *testing.T) {
	snap, rec := bigSnapshot(5000, 3000, 300, 3000)
	in := &Input{Sources: []string{"storm.pcapng"}, Version: "test", Snapshot: snap, Recorder: rec}
	var page, again bytes.Buffer
	start := time.Now()
	if err := Write(&page, in); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if err := Write(&again, in); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d generations, %d members, %d partitions, %d hazards: %d bytes in %v", 5000, 3000, 300, 3000, page.Len(), took)
	if !bytes.Equal(page.Bytes(), again.Bytes()) {
		t.Error("two reports of one state differ")
	}
	if page.Len() > 4<<20 {
		t.Errorf("the page is %d bytes: over 4 MiB", page.Len())
	}
	for _, want := range []struct{ what, re string }{
		{"the storm as bands with counts", `class="storm" data-generations="\d{2,}"`},
		{"members past the lanes' limit as one lane", `data-hidden="2960"`},
		{"members past the table's limit counted", `2700 more members not listed`},
		{"hazards past the list's limit counted", `2800 hazards are counted but not listed`},
		{"partitions past the ownership rows' limit", `\+236 more partitions`},
	} {
		if !regexp.MustCompile(want.re).Match(page.Bytes()) {
			t.Errorf("%s: no %q on the page", want.what, want.re)
		}
	}
	if n := bytes.Count(page.Bytes(), []byte(`<article id="hz-`)); n != maxHazardItems {
		t.Errorf("%d hazards listed, want %d", n, maxHazardItems)
	}
	for _, s := range rec.series {
		if len(s.points) > maxPoints {
			t.Fatalf("a series kept %d points, over %d", len(s.points), maxPoints)
		}
	}
}
