package jsonout

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// TestEnvelope checks that events and the summary are written as one JSON
// object per line with "v", "type", "ts" and "ts_ms" first, then the
// event's fields, and that times have six fractional digits, zeros kept.
func TestEnvelope(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf, nil)
	w.Event(&correlate.CommitEvent{Group: "g", Topic: "t", Partition: 3, Offset: 42, Outcome: correlate.CommitAccepted})
	w.Summary(&correlate.Snapshot{Time: correlate.TimeOf(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`{"v":3,"type":"commit","ts":"0001-01-01T00:00:00.000000Z","ts_ms":-62135596800000,"group":"g"`,
		`{"v":3,"type":"summary","ts":"2026-11-29T10:00:00.000000Z","ts_ms":1795946400000,"time":"2026-11-29T10:00:00.000000Z",`} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d:\n-want prefix %s\n+got  %s", i+1, want, lines[i])
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Errorf("line %d is not JSON: %v", i+1, err)
		}
	}
}

// TestTextReport checks the human report names the group, its members and
// assignments, and lists hazards by severity with their evidence.
func TestTextReport(t *testing.T) {
	p := int32(0)
	s := &correlate.Snapshot{
		Groups: []correlate.Group{{Group: "orders", GroupType: "classic", ProtocolType: "consumer", Protocol: "range", State: "stable", Generation: 4,
			Coordinator: correlate.Coordinator{NodeID: 1, Host: "b1", Port: 9092},
			Members:     []correlate.Member{{MemberID: "m-1", ClientID: "c1", ClientHost: "10.0.0.1", Status: "live", Generation: 4, Assignment: map[string][]int32{"t": {0, 1}}}},
		}},
		Hazards: []correlate.HazardEvent{
			{Kind: correlate.HazardCommitGap, Severity: correlate.SeverityCritical, Group: "orders", Partition: &p, Summary: "record 30 never committed",
				Evidence: []correlate.Evidence{{API: "OffsetCommit", CorrelationID: 31}}},
			{Kind: correlate.HazardProducerAcksWeak, Severity: correlate.SeverityInfo, Summary: "acks=0"},
		},
		HazardCounts: map[string]int{"critical": 1, "info": 1},
	}
	out := textReport(s, nil, &Options{})
	for _, want := range []string{"== group orders (classic, consumer/range) state stable, generation 4, coordinator node 1 (b1:9092)",
		"m-1", "c1@10.0.0.1", "t[0,1]", "hazards: 1 critical, 0 warn, 1 info", "CRITICAL:", "commit_gap: record 30 never committed",
		"OffsetCommit #31", "INFO:"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "CRITICAL:") > strings.Index(out, "INFO:") {
		t.Errorf("critical hazards must come first:\n%s", out)
	}
	if strings.Contains(out, "limits:") {
		t.Errorf("no cap bit, yet the report has a limits line:\n%s", out)
	}
	s.Stats.Limits = correlate.Limits{GroupsEvicted: 2001, GroupsDropped: 3, CommitsDropped: 40}
	want := "\nlimits: 2001 groups only named (no member, generation or commit seen) forgotten to make room (--max-groups); " +
		"3 requests for groups past --max-groups ignored"
	if out := textReport(s, nil, &Options{}); !strings.HasSuffix(out, want) {
		t.Errorf("report ends %q, want %q", out[max(0, len(out)-len(want)):], want)
	}
}

// TestConnOfNil: an anomaly without a connection is written, not a crash
// (a 36-byte agent record reached ConnOf with none: issue 39).
func TestConnOfNil(t *testing.T) {
	if got := ConnOf(nil); got != (Conn{}) {
		t.Errorf("ConnOf(nil) = %+v, want the zero Conn", got)
	}
	var b bytes.Buffer
	w := New(&b, nil)
	w.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap})
	if err := w.Flush(); err != nil || !bytes.Contains(b.Bytes(), []byte(`"type":"anomaly"`)) {
		t.Errorf("anomaly without a connection: %q, %v", b.String(), err)
	}
}

// stamped is an event of a given time (correlate's events take theirs
// from the exchange that made them).
type stamped struct{ at time.Time }

func (stamped) Type() string      { return "test" }
func (e stamped) Time() time.Time { return e.at }

// TestTextLate: text written as it comes marks an event reported after
// events of later times (a hazard judged after a grace); the report puts
// events in time order instead.
func TestTextLate(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 0, 13, 484000000, time.UTC)
	evs := []correlate.Event{stamped{at}, stamped{at.Add(-12604 * time.Millisecond)}, stamped{at.Add(-time.Millisecond)}}
	var b bytes.Buffer
	w := New(&b, &Options{Text: true})
	for _, ev := range evs {
		w.Event(ev)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2026-12-02T00:00:13.484000Z TEST",
		"2026-12-02T00:00:00.880000Z TEST [late: reported after events of 2026-12-02T00:00:13.484000Z]",
		"2026-12-02T00:00:13.483000Z TEST", // a moment apart: not marked
	}
	if got := strings.Split(strings.TrimSpace(b.String()), "\n"); !slices.Equal(got, want) {
		t.Errorf("(-want +got):\n-%q\n+%q", want, got)
	}
	b.Reset()
	w = New(&b, &Options{Text: true, Report: true})
	for _, ev := range evs {
		w.Event(ev)
	}
	w.Summary(&correlate.Snapshot{Time: correlate.TimeOf(at)})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	i, j, k := strings.Index(text, want[1][:27]+" TEST\n"), strings.Index(text, want[2]+"\n"), strings.Index(text, want[0]+"\n")
	if i < 0 || j < i || k < j || strings.Contains(text, "[late:") {
		t.Errorf("the report's timeline is not in time order, or marks late:\n%s", text)
	}
}
