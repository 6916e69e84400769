// Package evict bounds maps that could grow without end on hostile input
// (made-up topic ids) by forgetting their least recently used entries.
package evict

import (
	"cmp"
	"slices"
)

// Oldest deletes the entries of m with the smallest stamps until fewer than
// 90% of limit remain, so that a full map is trimmed rarely, and returns
// how many it deleted. stamp returns an entry's last use, from a counter
// bumped on every use: stamps are distinct, so what is deleted does not
// depend on the map's order.
func Oldest[K comparable, V any](m map[K]V, limit int, stamp func(V) uint64) int64 {
	keep := limit * 9 / 10
	if len(m) < keep {
		return 0
	}
	type entry struct {
		k K
		s uint64
	}
	all := make([]entry, 0, len(m))
	for k, v := range m {
		all = append(all, entry{k, stamp(v)})
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.s, b.s) })
	old := all[:min(len(all), len(all)-keep+1)] // all of them when keep is 0
	for _, e := range old {
		delete(m, e.k)
	}
	return int64(len(old))
}
