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
