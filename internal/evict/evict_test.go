package evict

import (
	"slices"
	"testing"
)

func TestOldest(t *testing.T) {
	m := map[string]uint64{}
	for i := range 20 {
		m[string(rune('a'+i))] = uint64(100 - i) // "a" is the most recent
	}
	if n := Oldest(m, 20, func(s uint64) uint64 { return s }); n != 3 || len(m) != 17 {
		t.Fatalf("deleted %d, %d left; want 3 and 17 (under 90%% of 20)", n, len(m))
	}
	for _, k := range []string{"r", "s", "t"} { // the three oldest
		if _, ok := m[k]; ok {
			t.Errorf("%q kept", k)
		}
	}
	if n := Oldest(m, 20, func(s uint64) uint64 { return s }); n != 0 || len(m) != 17 {
		t.Errorf("under the bound: deleted %d, %d left", n, len(m))
	}
	// A limit of 1: 90% of it is 0, so the map is emptied.
	one := map[int]uint64{7: 1}
	if n := Oldest(one, 1, func(s uint64) uint64 { return s }); n != 1 || len(one) != 0 {
		t.Errorf("limit 1: deleted %d, %d left; want 1 and 0", n, len(one))
	}
}

func TestOldestN(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want []string
		left int
	}{
		{"two", 2, []string{"e", "d"}, 3},
		{"all", 9, []string{"e", "d", "c", "b", "a"}, 0},
		{"none", 0, nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]uint64{}
			for i := range 5 {
				m[string(rune('a'+i))] = uint64(10 - i) // "e" is the oldest
			}
			got := OldestN(m, tt.n, func(s uint64) uint64 { return s })
			if !slices.Equal(got, tt.want) || len(m) != tt.left {
				t.Errorf("OldestN(%d) = %v, %d left; want %v, %d", tt.n, got, len(m), tt.want, tt.left)
			}
		})
	}
}
