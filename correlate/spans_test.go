package correlate

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// addSpansSimply is memberPart.add as it was first written: a scan for the
// place of each batch and a shift of the whole slice to keep maxSpans.
func addSpansSimply(spans []span, ss []span) []span {
	for _, s := range ss {
		i := 0
		for i < len(spans) && spans[i].base < s.base {
			i++
		}
		if i < len(spans) && spans[i].base == s.base {
			continue
		}
		spans = slices.Insert(spans, i, s)
	}
	if n := len(spans) - maxSpans; n > 0 {
		spans = append(spans[:0], spans[n:]...)
	}
	return spans
}

// TestSpansWindow: memberPart.add keeps exactly the batches the simple
// version keeps, in order, after every call, for batches mostly in order
// with re-deliveries, gaps and stragglers.
func TestSpansWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var mp memberPart
	var want []span
	next := int64(0)
	for call := range 5000 {
		var ss []span
		for range r.IntN(4) {
			var base int64
			switch r.IntN(10) {
			case 0: // delivered again
				base = max(0, next-int64(r.IntN(200)))
			case 1: // an older straggler
				base = max(0, next-200-int64(r.IntN(2000)))
			default:
				base = next
				next += 1 + int64(r.IntN(20))
			}
			ss = append(ss, span{base: base, next: base + 1 + int64(r.IntN(20)), data: r.IntN(2) == 0})
		}
		mp.add(ss)
		want = addSpansSimply(want, ss)
		if got := mp.batches(); !slices.Equal(got, want) {
			t.Fatalf("call %d: %d batches, want %d:\n%v\n%v", call, len(got), len(want), got, want)
		}
		if len(mp.spans) > maxSpans+maxSpans/4+4 {
			t.Fatalf("call %d: the slice holds %d", call, len(mp.spans))
		}
	}
}
