package correlate

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
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
		if got := mp.spans.all(); !slices.Equal(got, want) {
			t.Fatalf("call %d: %d batches, want %d:\n%v\n%v", call, len(got), len(want), got, want)
		}
		if len(mp.spans.s) > maxSpans+maxSpans/4+4 {
			t.Fatalf("call %d: the slice holds %d", call, len(mp.spans.s))
		}
	}
}

// many returns n partition numbers, most of them more than once.
func many(n int) []int32 {
	r := rand.New(rand.NewPCG(uint64(n), 3))
	out := make([]int32, n)
	for i := range out {
		out[i] = r.Int32N(int32(n / 4))
	}
	return out
}

// TestGotParts: a Fetch response's partitions come out in partition
// order, once each, the last of a partition named twice winning, as the
// map they replace kept them.
func TestGotParts(t *testing.T) {
	c := New(nil, nil)
	resp := kmsg.NewPtrFetchResponse()
	for _, x := range []struct {
		topic string
		parts []int32
	}{{"b", []int32{3, 1}}, {"a", []int32{2}}, {"b", []int32{1, 0}}, {"a", []int32{2, 5}}, {"c", many(200)}, {"c", many(100)}} {
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic = x.topic
		for _, p := range x.parts {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p
			tp.Partitions = append(tp.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, tp)
	}
	want := map[tp]*kmsg.FetchResponseTopicPartition{}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			want[tp{resp.Topics[i].Topic, resp.Topics[i].Partitions[j].Partition}] = &resp.Topics[i].Partitions[j]
		}
	}
	for range 2 { // the second call reuses the slice
		got := c.gotParts(resp)
		if len(got) != len(want) {
			t.Fatalf("%d partitions, want %d", len(got), len(want))
		}
		for i, x := range got {
			if i > 0 && cmpTP(got[i-1].p, x.p) >= 0 {
				t.Errorf("%v after %v: not in partition order", x.p, got[i-1].p)
			}
			if want[x.p] != x.rp {
				t.Errorf("%v: not the last one the response names", x.p)
			}
		}
	}
	if got := c.gotParts(nil); len(got) != 0 {
		t.Errorf("no response: %d partitions", len(got))
	}
}
