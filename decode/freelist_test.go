package decode

import "testing"

// TestFreeListFollowsUse: a list whose buffers are too small for what is
// asked lets them go as larger ones come back, so it holds about as many
// buffers as are in use at once, not one more per miss up to its bound.
func TestFreeListFollowsUse(t *testing.T) {
	l := freeList{each: 1 << 20, total: 32 << 20}
	for range 4 {
		l.put(make([]byte, 0, 1<<10))
	}
	// Two buffers in use at a time, each larger than any kept: every get
	// misses, and the caller makes its own, which it puts back.
	for size := 2 << 10; size <= 512<<10; size += 2 << 10 {
		var inUse [2][]byte
		for i := range inUse {
			if inUse[i] = l.get(size); inUse[i] == nil {
				inUse[i] = make([]byte, 0, size)
			}
		}
		for _, b := range inUse {
			l.put(b)
		}
		if len(l.bufs) > 6 {
			t.Fatalf("after buffers of %d bytes: %d kept (%d bytes), want at most the 4 put first and the 2 in use", size, len(l.bufs), l.bytes)
		}
	}
	// And a hit still takes the buffer that fits.
	n := len(l.bufs)
	b := l.get(1 << 10)
	if b == nil || cap(b) < 1<<10 || len(l.bufs) != n-1 {
		t.Fatalf("get of a size kept: got cap %d, %d kept (want %d)", cap(b), len(l.bufs), n-1)
	}
	// A buffer too large to be kept never comes back: asking for one
	// lets nothing go.
	n = len(l.bufs)
	if b := l.get(l.each + 1); b != nil || len(l.bufs) != n {
		t.Fatalf("get of more than each: got cap %d, %d kept (want %d)", cap(b), len(l.bufs), n)
	}
	sum := 0
	for _, b := range l.bufs {
		sum += cap(b)
	}
	if sum != l.bytes {
		t.Fatalf("bytes %d, want the capacity kept, %d", l.bytes, sum)
	}
}
