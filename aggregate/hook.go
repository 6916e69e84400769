package aggregate

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Hook lets a test follow the --group instances of one process: what each
// stage ("route", "own") owns, what was read and produced, and when an
// owner was caught up; and makes an instance stop as a killed one would.
// A nil Hook does nothing. Its methods are safe for concurrent use.
type Hook struct {
	mu      sync.Mutex
	changed chan struct{} // a value after any change (capacity 1)
	owned   map[string][]int32
	idles   map[string]int
	// read: agents' records routed; produced: routed records produced;
	// consumed: routed records read.
	read, produced, consumed atomic.Int64
	// crash makes the owner stop as a killed instance would: no last
	// lines, no clean handover record; skipPeriodic leaves out the
	// unclean records of its polls (killed before they were committed).
	crash, skipPeriodic atomic.Bool
}

// NewHook returns a Hook to set as Options.Hook.
func NewHook() *Hook {
	return &Hook{changed: make(chan struct{}, 1), owned: map[string][]int32{}, idles: map[string]int{}}
}

// Changed receives a value after any change (it holds one at most: check
// what you wait for after each).
func (h *Hook) Changed() <-chan struct{} { return h.changed }

// Owned returns the partitions stage ("route": of the agents' topic;
// "own": of the routed topic) owns, sorted.
func (h *Hook) Owned(stage string) []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owned[stage]
}

// Idles counts the polls of stage ("own") that found nothing new.
func (h *Hook) Idles(stage string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.idles[stage]
}

// Read counts the agents' records the router routed (not replayed).
func (h *Hook) Read() int64 { return h.read.Load() }

// Produced counts the routed records the router produced.
func (h *Hook) Produced() int64 { return h.produced.Load() }

// Consumed counts the routed records the owner read.
func (h *Hook) Consumed() int64 { return h.consumed.Load() }

// Crash makes the instance stop, once its context is done, as a killed
// one would: without its last lines and clean handover records.
func (h *Hook) Crash() { h.crash.Store(true) }

// SkipPeriodic leaves out the unclean handover records the owner commits
// after its polls (as if killed before they were committed).
func (h *Hook) SkipPeriodic() { h.skipPeriodic.Store(true) }

// String says what the hook has seen, for a test's failure message.
func (h *Hook) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("owned %v idle %v read %d produced %d consumed %d", h.owned, h.idles,
		h.read.Load(), h.produced.Load(), h.consumed.Load())
}

func (h *Hook) crashes() bool { return h != nil && h.crash.Load() }

func (h *Hook) skipsPeriodic() bool { return h != nil && h.skipPeriodic.Load() }

func (h *Hook) notify() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

func (h *Hook) set(stage string, owned []int32) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.owned[stage] = owned
	h.mu.Unlock()
	h.notify()
}

func (h *Hook) idle(name string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.idles[name]++
	h.mu.Unlock()
	h.notify()
}

// count adds one to the counter of h that which picks.
func (h *Hook) count(which func(*Hook) *atomic.Int64) {
	if h == nil {
		return
	}
	which(h).Add(1)
	h.notify()
}

func hookRead(h *Hook) *atomic.Int64     { return &h.read }
func hookProduced(h *Hook) *atomic.Int64 { return &h.produced }
func hookConsumed(h *Hook) *atomic.Int64 { return &h.consumed }
