package decode

import "slices"

// freeList keeps emptied buffers for reuse, bounded whatever the number of
// connections: at most total bytes of capacity, in buffers of at most
// each. The decoder keeps one for request bodies and one for stream
// buffers.
type freeList struct {
	bufs        [][]byte
	bytes       int // their capacity
	each, total int
}

// get returns an empty buffer of capacity n or more from the list (among
// the last few put), or nil. When none of them is large enough for a
// buffer the list would keep, the oldest is let go: the caller makes a
// larger one, which comes back to the list in its place. The list holds
// about as many buffers as were ever in use at once, of the sizes in use
// lately; keeping every buffer that missed made it grow with the length
// of the capture, up to total.
func (l *freeList) get(n int) []byte {
	for i := len(l.bufs) - 1; i >= 0 && i >= len(l.bufs)-4; i-- {
		if cap(l.bufs[i]) >= n {
			return l.take(i)
		}
	}
	if n <= l.each && len(l.bufs) > 0 {
		l.take(0)
	}
	return nil
}

// take removes the i-th buffer from the list, the others kept in order,
// and returns it.
func (l *freeList) take(i int) []byte {
	b := l.bufs[i]
	l.bufs = slices.Delete(l.bufs, i, i+1)
	l.bytes -= cap(b)
	return b
}

// put keeps b for reuse, within the bounds.
func (l *freeList) put(b []byte) {
	if c := cap(b); c > 0 && c <= l.each && l.bytes+c <= l.total {
		l.bufs = append(l.bufs, b[:0])
		l.bytes += c
	}
}
