package tui

import (
	"testing"
	"time"
)

// TestHistBuckets: every latency lands in a bucket whose upper bound is
// at least it and at most 25% (one sub-bucket) above, and buckets grow.
func TestHistBuckets(t *testing.T) {
	for us := int64(0); us < 1<<28; us = us*9/8 + 1 {
		d := time.Duration(us) * time.Microsecond
		i := histIndex(d)
		up := histUpper(i)
		if up <= d && i < histBuckets-1 {
			t.Fatalf("%s in bucket %d with upper bound %s", d, i, up)
		}
		if i > 0 && histUpper(i-1) > d {
			t.Fatalf("%s in bucket %d, but bucket %d ends at %s", d, i, i-1, histUpper(i-1))
		}
		if us >= 4 && float64(up) > float64(d)*1.25+float64(time.Microsecond) {
			t.Fatalf("%s: bucket %d ends at %s, more than 25%% above", d, i, up)
		}
	}
	for i := 1; i < histBuckets; i++ {
		if histUpper(i) <= histUpper(i-1) {
			t.Fatalf("bucket %d ends at %s, not above bucket %d's %s", i, histUpper(i), i-1, histUpper(i-1))
		}
	}
}

func TestHistQuantile(t *testing.T) {
	var h Hist
	if _, ok := h.Quantile(0.5); ok {
		t.Fatal("empty histogram has a quantile")
	}
	for i := 1; i <= 100; i++ {
		h[histIndex(time.Duration(i)*time.Millisecond)]++
	}
	tests := []struct {
		q        float64
		min, max time.Duration
	}{
		{0.5, 50 * time.Millisecond, 63 * time.Millisecond},
		{0.9, 90 * time.Millisecond, 113 * time.Millisecond},
		{0.99, 99 * time.Millisecond, 124 * time.Millisecond},
	}
	for _, tc := range tests {
		got, _ := h.Quantile(tc.q)
		if got < tc.min || got > tc.max {
			t.Errorf("Quantile(%v) = %s, want %s..%s", tc.q, got, tc.min, tc.max)
		}
	}
	old := h
	h[histIndex(time.Second)] += 1000
	win := h.sub(&old)
	if got, _ := win.Quantile(0.5); got < time.Second || got > 1250*time.Millisecond {
		t.Errorf("windowed median = %s, want about 1s", got)
	}
}

// TestFetchWait: on g_churn, whose producer writes every 100ms to
// consumers long-polling with MaxWaitMillis 500, a Fetch spends about
// 100ms waiting for records and well under a millisecond being answered:
// the Traffic view's Fetch latency is the second, WAIT the first. Taken
// whole, as before, the median Fetch read as a 100ms broker: most waited.
func TestFetchWait(t *testing.T) {
	fr := frameOf(t, "g_churn.pcapng", time.Time{})
	var fetch *APIStats
	for i := range fr.Traffic.APIs {
		if fr.Traffic.APIs[i].Key == 1 {
			fetch = &fr.Traffic.APIs[i]
		}
	}
	if fetch == nil {
		t.Fatal("no Fetch in g_churn")
	}
	service, _ := fetch.Latency.Quantile(0.5)
	wait, _ := fetch.Wait.Quantile(0.5)
	if service > 5*time.Millisecond || wait < 80*time.Millisecond || wait > 150*time.Millisecond || fetch.MaxWaitMillis != 500 {
		t.Errorf("Fetch answered in %s (median), waited %s of %dms: want under 5ms, about 100ms of 500ms", service, wait, fetch.MaxWaitMillis)
	}
	var long, answered uint32
	for i, n := range fetch.Wait {
		answered += n
		if histUpper(i) > 80*time.Millisecond {
			long += n
		}
	}
	if long*2 < answered {
		t.Errorf("%d of %d answered Fetches waited 80ms or more: the capture does not show long polls", long, answered)
	}
}
