package wire

import (
	"errors"
	"slices"
	"testing"
)

// TestRoutedRoundTrip: a routed record reads back as written, one of
// the previous version (no ticks) still reads, and a batch of the
// agents' topic is not taken for one.
func TestRoutedRoundTrip(t *testing.T) {
	a := Agent{Host: "b1", Run: 7}
	in := &Routed{SrcPartition: 2, SrcOffset: 1234,
		Receipts: []Receipt{{Agent: a, Seq: 3}},
		Items:    []RoutedItem{{Agent: a, Seq: 3, Index: 1, Home: -1, Batch: []byte{Version, 0}}, {Agent: a, Seq: 2, Index: 0, Home: 2, Batch: []byte{}}},
		Ticks:    []RoutedTicks{{Agent: a, Seq: 3, Indexes: []int{0, 2, 300}, Batch: []byte{Version, 1, 2}}}}
	out, err := DecodeRouted(AppendRouted(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	checkRouted(t, out, in)
	v1 := *in
	v1.Ticks = nil
	old := AppendRouted(nil, &v1)
	old[0], old = routedV1, old[:len(old)-1] // version 0x81 ends after its items
	out, err = DecodeRouted(old)
	if err != nil {
		t.Fatalf("version 0x81: %v", err)
	}
	checkRouted(t, out, &v1)
	e := NewEncoder(a)
	e.Reset(1)
	if _, err := DecodeRouted(e.Bytes()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("an agent batch read as routed: %v", err)
	}
	if _, err := Decode(AppendRouted(nil, in), nil); !errors.Is(err, ErrVersion) {
		t.Errorf("a routed record read as an agent batch: %v", err)
	}
}

func checkRouted(t *testing.T, out, in *Routed) {
	t.Helper()
	if out.SrcPartition != in.SrcPartition || out.SrcOffset != in.SrcOffset || len(out.Receipts) != 1 || out.Receipts[0] != in.Receipts[0] ||
		len(out.Items) != len(in.Items) || len(out.Ticks) != len(in.Ticks) {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	for i, it := range out.Items {
		w := in.Items[i]
		if it.Agent != w.Agent || it.Seq != w.Seq || it.Index != w.Index || it.Home != w.Home || string(it.Batch) != string(w.Batch) {
			t.Errorf("item %d: got %+v, want %+v", i, it, w)
		}
	}
	for i, tk := range out.Ticks {
		w := in.Ticks[i]
		if tk.Agent != w.Agent || tk.Seq != w.Seq || !slices.Equal(tk.Indexes, w.Indexes) || string(tk.Batch) != string(w.Batch) {
			t.Errorf("ticks %d: got %+v, want %+v", i, tk, w)
		}
	}
}
