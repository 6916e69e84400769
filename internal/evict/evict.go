// Package evict bounds maps that could grow without end on hostile input
// (made-up topic ids, group names a request merely mentions) by
// forgetting their least recently used entries.
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
	return int64(len(OldestN(m, len(m)-keep+1, stamp))) // all of them when keep is 0
}

// OldestN deletes the n entries of m with the smallest stamps (all of
// them when n >= len(m)) and returns their keys, oldest first. It is for
// a map that holds the evictable part of a larger table: the caller says
// how many the table must lose. Stamps as for Oldest.
func OldestN[K comparable, V any](m map[K]V, n int, stamp func(V) uint64) []K {
	if n <= 0 || len(m) == 0 {
		return nil
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
	out := make([]K, 0, min(n, len(all)))
	for _, e := range all[:min(n, len(all))] {
		delete(m, e.k)
		out = append(out, e.k)
	}
	return out
}
