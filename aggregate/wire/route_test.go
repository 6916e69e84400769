package wire

import (
	"errors"
	"testing"
)

// TestRoutedRoundTrip: a routed record reads back as written, and a
// batch of the agents' topic is not taken for one.
func TestRoutedRoundTrip(t *testing.T) {
	a := Agent{Host: "b1", Run: 7}
	in := &Routed{SrcPartition: 2, SrcOffset: 1234,
		Receipts: []Receipt{{Agent: a, Seq: 3}},
		Items:    []RoutedItem{{Agent: a, Seq: 3, Index: 1, Home: -1, Batch: []byte{Version, 0}}, {Agent: a, Seq: 2, Index: 0, Home: 2, Batch: []byte{}}}}
	out, err := DecodeRouted(AppendRouted(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if out.SrcPartition != in.SrcPartition || out.SrcOffset != in.SrcOffset || len(out.Receipts) != 1 || out.Receipts[0] != in.Receipts[0] || len(out.Items) != 2 {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	for i, it := range out.Items {
		w := in.Items[i]
		if it.Agent != w.Agent || it.Seq != w.Seq || it.Index != w.Index || it.Home != w.Home || string(it.Batch) != string(w.Batch) {
			t.Errorf("item %d: got %+v, want %+v", i, it, w)
		}
	}
	e := NewEncoder(a)
	e.Reset(1)
	if _, err := DecodeRouted(e.Bytes()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("an agent batch read as routed: %v", err)
	}
	if _, err := Decode(AppendRouted(nil, in), nil); !errors.Is(err, ErrVersion) {
		t.Errorf("a routed record read as an agent batch: %v", err)
	}
}
