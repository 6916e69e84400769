package captest

import (
	"bytes"
	"slices"
	"testing"
)

// TestReorder: a reordered copy holds the same packets, with the same
// timestamps in the same increasing sequence, and moves what it says it
// moved; the same seed gives the same copy, another seed another.
func TestReorder(t *testing.T) {
	for _, name := range captures {
		orig := readTestdata(t, name)
		for _, format := range []string{"pcapng", "pcap"} {
			src := orig
			if format == "pcap" {
				src = toPcap(t, orig)
			}
			t.Run(name+"/"+format, func(t *testing.T) {
				r, err := Reorder(src, nil, 1)
				if err != nil {
					t.Fatal(err)
				}
				again, _ := Reorder(src, nil, 1)
				other, _ := Reorder(src, nil, 2)
				if !bytes.Equal(r.Data, again.Data) || bytes.Equal(r.Data, other.Data) {
					t.Error("not deterministic per seed")
				}
				in, out := readAll(t, src), readAll(t, r.Data)
				if len(in) != len(out) || r.Packets != len(in) {
					t.Fatalf("%d packets in, %d out (%d counted)", len(in), len(out), r.Packets)
				}
				var a, b []string
				moved := 0
				for i := range in {
					a, b = append(a, string(in[i].data)), append(b, string(out[i].data))
					if !bytes.Equal(in[i].data, out[i].data) {
						moved++
					}
					if i > 0 && out[i].ci.Timestamp.Before(out[i-1].ci.Timestamp) {
						t.Fatalf("packet %d: timestamp %v before the previous %v", i+1, out[i].ci.Timestamp, out[i-1].ci.Timestamp)
					}
					if in[i].lt != out[i].lt {
						t.Fatalf("packet %d: link type %v, was %v", i+1, out[i].lt, in[i].lt)
					}
				}
				slices.Sort(a)
				slices.Sort(b)
				if !slices.Equal(a, b) {
					t.Error("the packets differ, not only their order")
				}
				if r.Closing == 0 || r.ClosesMoved == 0 || r.EarlyData == 0 || r.Swapped == 0 || moved == 0 {
					t.Errorf("%+v, %d packets in other places: want some of each", *r, moved)
				}
				if r.MaxSwapDelay > DefaultReorder.MaxDelay {
					t.Errorf("a swap delayed a segment by %v, more than %v", r.MaxSwapDelay, DefaultReorder.MaxDelay)
				}
				t.Logf("%d connections, %d closing: %d closes moved, %d handshakes, %d swaps (at most %v late); %d of %d packets moved",
					r.Connections, r.Closing, r.ClosesMoved, r.EarlyData, r.Swapped, r.MaxSwapDelay, moved, len(in))
			})
		}
	}
}
