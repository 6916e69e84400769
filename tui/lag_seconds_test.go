package tui

import (
	"github.com/kwire/kwire/correlate"
	"regexp"
	"testing"
	"time"
)

// TestLagSecondsColumn: on h_lag, the Groups view's LAG(S) column shows
// each group's lag_seconds from the frame's snapshot, the figure the
// NDJSON summary and the metrics give at the same moment.
func TestLagSecondsColumn(t *testing.T) {
	fr := frameOf(t, "h_lag.pcapng", time.Time{})
	s := newScreen(t, nil, 140, 24)
	s.u.apply(fr)
	s.draw()
	lines := s.draw()
	var want []string
	for _, g := range fr.Snapshot.Groups {
		if g.LagSeconds == nil {
			t.Fatalf("group %s: no lag_seconds", g.Group)
		}
		want = append(want, `^`+regexp.QuoteMeta(g.Group)+` .* `+regexp.QuoteMeta(correlate.LagSecondsText(g.LagSeconds, g.LagSecondsEstimated))+` `)
	}
	checkScreen(t, lines, want, nil)
	if len(want) != 5 {
		t.Errorf("%d groups, want h_lag's 5", len(want))
	}
}
