package correlate

import "slices"

// window keeps the last few values of a sequence (a partition's commits,
// a member's delivered batches). Dropping the oldest one at a time would
// move the whole slice every time; they leave the slice a quarter of the
// window at a time instead, so it holds up to 25% more than it shows.
type window[T any] struct {
	s    []T
	from int // s[from:] is the window
}

// all returns the values in the window, oldest first.
func (w *window[T]) all() []T { return w.s[w.from:] }

// push appends v.
func (w *window[T]) push(v T) { w.s = append(w.s, v) }

// insert puts v at index i of all().
func (w *window[T]) insert(i int, v T) { w.s = slices.Insert(w.s, w.from+i, v) }

// trim drops the oldest values beyond max and returns how many.
func (w *window[T]) trim(max int) int {
	n := len(w.s) - w.from - max
	if n <= 0 {
		return 0
	}
	w.from += n
	if w.from > max/4 {
		w.compact()
	}
	return n
}

// compact moves the window to the start of the slice.
func (w *window[T]) compact() {
	k := copy(w.s, w.s[w.from:])
	clear(w.s[k:]) // let go of what the dropped values point to
	w.s, w.from = w.s[:k], 0
}
