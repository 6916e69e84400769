package decode

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
// the last few put), or nil.
func (l *freeList) get(n int) []byte {
	for i := len(l.bufs) - 1; i >= 0 && i >= len(l.bufs)-4; i-- {
		if b := l.bufs[i]; cap(b) >= n {
			last := len(l.bufs) - 1
			l.bufs[i], l.bufs[last] = l.bufs[last], nil
			l.bufs = l.bufs[:last]
			l.bytes -= cap(b)
			return b
		}
	}
	return nil
}

// put keeps b for reuse, within the bounds.
func (l *freeList) put(b []byte) {
	if c := cap(b); c > 0 && c <= l.each && l.bytes+c <= l.total {
		l.bufs = append(l.bufs, b[:0])
		l.bytes += c
	}
}
