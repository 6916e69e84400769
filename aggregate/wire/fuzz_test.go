package wire

import "testing"

// FuzzDecode feeds Decode arbitrary bytes, seeded with batches of the
// committed captures. Invariants: Decode never panics; it returns a batch
// or an error, never both or neither; every exchange and anomaly of a
// batch has a connection that was declared in it; and a batch
// it accepts is encoded again to bytes it accepts.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{Version})
	f.Add([]byte{Version, 1, 'h', 7, 1})
	for _, name := range []string{"group", "compress", "g_848", "lossy", "sasl", "midstream"} {
		r := runRoundTrip(f, "../../testdata/"+name+".pcapng", 4<<10)
		for _, v := range r.values {
			f.Add(v)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b, &Options{MaxExpand: 1 << 20})
		if (got == nil) == (err == nil) {
			t.Fatalf("Decode returned %v and %v", got, err)
		}
		if err != nil {
			return
		}
		for i, it := range got.Items {
			if (it.Exchange != nil && it.Exchange.Conn == nil) || (it.Anomaly != nil && it.Anomaly.Conn == nil) {
				t.Fatalf("item %d has no connection", i)
			}
		}
		enc := NewEncoder(got.Agent)
		enc.Reset(got.Seq)
		for _, it := range got.Items {
			switch it.Kind {
			case KindExchange:
				enc.Exchange(it.At, it.Exchange)
			case KindAnomaly:
				enc.Anomaly(it.At, it.Anomaly)
			case KindCounters:
				enc.Counters(it.At, it.Counters)
			}
		}
		again, err := Decode(enc.Bytes(), &Options{MaxExpand: 1 << 20})
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if len(again.Items) != len(got.Items) {
			t.Fatalf("re-encoded batch has %d items, want %d", len(again.Items), len(got.Items))
		}
	})
}
