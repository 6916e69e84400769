package metrics

import (
	"fmt"
	"testing"
)

// TestLagSeconds: on h_lag (groups driven behind by known times), every
// group partition's kafka_consumergroup_lag_seconds is the snapshot's
// lag_seconds, and kafka_consumergroup_lag_seconds_max the group's: the
// figure the NDJSON summary gives, at the same moment.
func TestLagSeconds(t *testing.T) {
	p := runCaptureOf(t, "../testdata/h_lag.pcapng", nil)
	m := scrape(t, p.x)
	behind := 0
	for _, g := range p.snap.Groups {
		if g.LagSeconds == nil {
			t.Errorf("group %s: no lag_seconds in the snapshot", g.Group)
			continue
		}
		name := fmt.Sprintf(`kafka_consumergroup_lag_seconds_max{consumergroup=%q}`, g.Group)
		if v, ok := m[name]; !ok || v != *g.LagSeconds {
			t.Errorf("%s = %v (present %v), snapshot %v", name, v, ok, *g.LagSeconds)
		}
		for _, pp := range g.Partitions {
			if pp.LagSeconds == nil {
				t.Errorf("%s %s/%d: no lag_seconds", g.Group, pp.Topic, pp.Partition)
				continue
			}
			if *pp.LagSeconds > 1 {
				behind++
			}
			name := fmt.Sprintf(`kafka_consumergroup_lag_seconds{consumergroup=%q,partition="%d",topic=%q}`, g.Group, pp.Partition, pp.Topic)
			if v, ok := m[name]; !ok || v != *pp.LagSeconds {
				t.Errorf("%s = %v (present %v), snapshot %v", name, v, ok, *pp.LagSeconds)
			}
		}
	}
	if behind < 9 {
		t.Errorf("%d partitions more than a second behind; h_lag drives 4 groups of 3 behind", behind)
	}
}
