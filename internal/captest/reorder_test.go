package captest

import (
	"bytes"
	"fmt"
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

// TestReorderCross: with one feed late, the copy holds the same packets,
// its timestamps increase, each side's packets keep their order, and
// segments come after the other direction's acknowledgement of them and
// after payload sent after them (with the clients late, requests after
// their responses; with the brokers late, the next request before a
// response).
func TestReorderCross(t *testing.T) {
	for _, name := range captures {
		orig := readTestdata(t, name)
		for _, late := range []Feed{FeedClients, FeedBrokers} {
			t.Run(fmt.Sprintf("%s/late=%d", name, late), func(t *testing.T) {
				opts := CrossReorder
				opts.Late = late
				r, err := Reorder(orig, &opts, 1)
				if err != nil {
					t.Fatal(err)
				}
				in, out := readAll(t, orig), readAll(t, r.Data)
				if len(in) != len(out) {
					t.Fatalf("%d packets in, %d out", len(in), len(out))
				}
				var a, b []string
				for i := range in {
					a, b = append(a, string(in[i].data)), append(b, string(out[i].data))
					if i > 0 && out[i].ci.Timestamp.Before(out[i-1].ci.Timestamp) {
						t.Fatalf("packet %d: timestamp %v before the previous %v", i+1, out[i].ci.Timestamp, out[i-1].ci.Timestamp)
					}
				}
				slices.Sort(a)
				slices.Sort(b)
				if !slices.Equal(a, b) {
					t.Error("the packets differ, not only their order")
				}
				d := r.ClientsLate + r.BrokersLate
				if (late == FeedClients) != (r.ClientsLate > 0) || d < opts.Skew/4 || d > opts.Skew {
					t.Errorf("clients late %v, brokers late %v: want the %d feed late by %v to %v", r.ClientsLate, r.BrokersLate, late, opts.Skew/4, opts.Skew)
				}
				if r.Crossed == 0 || r.Answered == 0 {
					t.Errorf("%d segments after their acknowledgement, %d after their answer", r.Crossed, r.Answered)
				}
				t.Logf("late %v: %d segments after their acknowledgement, %d after payload sent after them", d, r.Crossed, r.Answered)
			})
		}
	}
}
