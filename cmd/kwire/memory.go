package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// kwire live runs for days on a broker host, and its heap swings: after
// kernel drops or a burst of large frames the decode and reassembly
// budgets (--max-buffer, --max-reorder-mb) fill, then empty. Left alone,
// the Go runtime lets the heap grow to twice what is live before
// collecting, and keeps what it freed for a long while: resident memory
// stays at the high-water mark. So live sets a soft memory limit (the
// collector works harder near it) and hands freed memory back to the
// system once a burst is over.

// memoryHeadroom is what the default limit allows beyond the budgets:
// the correlator's state, metrics, the garbage between two collections.
const memoryHeadroom = 256 << 20

// Returning memory: every returnEvery, when more than returnAbove bytes
// of heap are free and not yet returned.
const (
	returnEvery = 15 * time.Second
	returnAbove = 64 << 20
)

// memoryLimit is --max-memory-mb in bytes: the default (0) is the
// budgets plus memoryHeadroom; negative means none.
func (f *liveFlags) memoryLimit() int64 {
	switch {
	case f.maxMemoryMB < 0:
		return 0
	case f.maxMemoryMB > 0:
		return int64(f.maxMemoryMB) << 20
	}
	return int64(f.common.maxBuf) + int64(f.maxBufferMB)<<20 + memoryHeadroom
}

// limitMemory sets the soft memory limit (unless GOMEMLIMIT is set: the
// user's word wins) and returns freed memory to the system after bursts,
// until stop is called.
func limitMemory(limit int64) (stop func()) {
	if limit <= 0 {
		return func() {}
	}
	restore := func() {}
	if os.Getenv("GOMEMLIMIT") == "" {
		old := debug.SetMemoryLimit(limit)
		restore = func() { debug.SetMemoryLimit(old) }
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(returnEvery)
		defer tick.Stop()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > returnAbove {
				debug.FreeOSMemory()
			}
		}
	}()
	return func() { close(done); restore() }
}
