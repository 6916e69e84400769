package tui

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kwire/kwire/capture"
)

// recorder is a Sink that records, for each chunk, the wall time since
// the replay began at which it was released.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

func (r *recorder) Chunk(*capture.Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Since(r.start))
}

func (r *recorder) released() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...)
}

// feedChunks replays chunks at these capture offsets through r, on its own
// goroutine as a capture source would, and closes done at the end.
func feedChunks(r *Replay, offsets []time.Duration) (done chan struct{}) {
	done = make(chan struct{})
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	go func() {
		defer close(done)
		for _, o := range offsets {
			r.Chunk(&capture.Chunk{Time: t0.Add(o)})
		}
	}()
	return done
}

var offsets = []time.Duration{0, time.Second, 3 * time.Second, 3500 * time.Millisecond, 10 * time.Second}

// TestReplayPace checks when chunks are released, on a fake clock: as
// fast as possible, at capture pace, at twice capture pace.
func TestReplayPace(t *testing.T) {
	tests := []struct {
		name string
		opts ReplayOptions
		want []time.Duration
	}{
		{"fast", ReplayOptions{Pace: Fast}, []time.Duration{0, 0, 0, 0, 0}},
		{"real", ReplayOptions{Pace: Real}, offsets},
		{"real x2", ReplayOptions{Pace: Real, Speed: 2},
			[]time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 1750 * time.Millisecond, 5 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{start: time.Now()}
				r := NewReplay(rec, &tc.opts)
				<-feedChunks(r, offsets)
				checkReleased(t, rec.released(), tc.want)
			})
		})
	}
}

func checkReleased(t *testing.T, got, want []time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("released at %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("released at %v, want %v", got, want)
		}
	}
}

// TestReplayPausedStepped: a paused replay releases nothing until a step,
// a step releases one Step of capture time, and resuming goes on at
// capture pace from there.
func TestReplayPausedStepped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		var pauses int
		r := NewReplay(rec, &ReplayOptions{Pace: Real, Paused: true, Step: 2 * time.Second,
			Poll: func(pausing bool) {
				if pausing {
					pauses++
				}
			}})
		done := feedChunks(r, offsets)
		synctest.Wait()
		if n := len(rec.released()); n != 0 || pauses != 1 {
			t.Fatalf("paused: %d chunks released, %d pauses; want 0, 1", n, pauses)
		}
		if st := r.State(); !st.Paused || st.String() != "PAUSED" {
			t.Errorf("state %+v says %q, want PAUSED", st, st)
		}
		time.Sleep(time.Minute) // fake time: paused stays paused
		r.Step()                // capture 0s..2s: the chunks at 0 and 1s
		synctest.Wait()
		if n := len(rec.released()); n != 2 {
			t.Fatalf("after a step: %d chunks released, want 2", n)
		}
		r.Step() // from the waiting chunk at 3s to 5s: 3s, 3.5s
		synctest.Wait()
		if n := len(rec.released()); n != 4 || pauses != 3 {
			t.Fatalf("after two steps: %d chunks released, %d pauses; want 4, 3", n, pauses)
		}
		r.TogglePause() // capture pace again from the chunk at 10s
		<-done
		got := rec.released()
		if d := got[4] - got[3]; d != 0 {
			t.Errorf("resumed: the next chunk waited %s, want 0 (pace restarts at resume)", d)
		}
	})
}

// TestReplayStopAndPace: Stop releases a paused replay at once; switching
// to fast ends a capture-pace wait.
func TestReplayStopAndPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		r := NewReplay(rec, &ReplayOptions{Paused: true})
		done := feedChunks(r, offsets)
		synctest.Wait()
		r.Stop()
		<-done
		checkReleased(t, rec.released(), []time.Duration{0, 0, 0, 0, 0})
	})
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{start: time.Now()}
		r := NewReplay(rec, &ReplayOptions{Pace: Real})
		done := feedChunks(r, []time.Duration{0, time.Hour})
		time.Sleep(time.Second)
		synctest.Wait()
		r.TogglePace()
		<-done
		checkReleased(t, rec.released(), []time.Duration{0, time.Second})
		if st := r.State(); st.Pace != Fast {
			t.Errorf("pace = %s, want fast", st.Pace)
		}
	})
}
