package tui

import (
	"fmt"
	"sync"
	"time"

	"github.com/kwire/kwire/capture"
)

// Pace is how a Replay releases chunks.
type Pace uint8

const (
	// Fast releases chunks as fast as the pipeline takes them.
	Fast Pace = iota
	// Real releases a chunk when as much wall time has passed since the
	// replay started (or resumed) as capture time, divided by Speed.
	Real
)

// String is the pace's name: fast or real.
func (p Pace) String() string {
	if p == Real {
		return "real"
	}
	return "fast"
}

// Control is what the keyboard can do to the source: a Replay, or nothing
// (live capture, where p freezes the screen instead).
type Control interface {
	// TogglePause pauses or resumes.
	TogglePause()
	// Step, when paused, releases the next step of capture time and
	// pauses again (steps asked for in a row run one after the other);
	// when running, it pauses.
	Step()
	// TogglePace switches between capture pace and as fast as possible.
	TogglePace()
	// State says what the replay is doing.
	State() ReplayState
}

// ReplayState is a Replay's state, for the status bar.
type ReplayState struct {
	Pace   Pace
	Speed  float64
	Paused bool
	// Stepping is set while a step runs.
	Stepping bool
	// Done is set when the input ended.
	Done bool
	// At is the capture time of the latest chunk released.
	At time.Time
}

// String says the state in a few words, for the status bar.
func (s ReplayState) String() string {
	switch {
	case s.Done:
		return "replay done"
	case s.Stepping:
		return "stepping"
	case s.Paused:
		return "PAUSED"
	case s.Pace == Real && s.Speed != 1:
		return fmt.Sprintf("real x%g", s.Speed)
	}
	return s.Pace.String()
}

// ReplayOptions tune a Replay. A nil *ReplayOptions means defaults.
type ReplayOptions struct {
	Pace Pace
	// Paused starts the replay paused (Step or TogglePause go on).
	Paused bool
	// Speed multiplies capture pace (default 1).
	Speed float64
	// Step is the capture time a Step releases (default 1s).
	Step time.Duration
	// Poll, when set, is called on the pipeline goroutine after every
	// chunk (pausing false) and before the replay waits for the keyboard
	// (pausing true): the place to publish frames (Feed.Poll, or
	// Feed.Publish when pausing).
	Poll func(pausing bool)
}

// Replay is a capture.Sink that paces a capture file's chunks by their
// capture time and passes them on to the next Sink. Chunk runs on the
// source's goroutine and may block there (that is the pacing); the
// Control methods are safe from any goroutine.
type Replay struct {
	next capture.Sink
	poll func(bool)
	step time.Duration

	mu        sync.Mutex
	wake      chan struct{} // one slot: a control changed
	pace      Pace
	speed     float64
	paused    bool
	stepUntil time.Time // while stepping: chunks before it go
	steps     int       // steps asked for and not begun
	stopped   bool
	done      bool
	at        time.Time // latest chunk released
	// The pacing anchor: capture time cap0 is released at wall time wall0.
	anchored    bool
	wall0, cap0 time.Time
}

// NewReplay returns a Replay passing chunks to next; opts may be nil.
func NewReplay(next capture.Sink, opts *ReplayOptions) *Replay {
	var o ReplayOptions
	if opts != nil {
		o = *opts
	}
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Step <= 0 {
		o.Step = time.Second
	}
	return &Replay{next: next, poll: o.Poll, step: o.Step, wake: make(chan struct{}, 1),
		pace: o.Pace, speed: o.Speed, paused: o.Paused}
}

// Chunk implements capture.Sink: it waits until c is due, then passes it on.
func (r *Replay) Chunk(c *capture.Chunk) {
	r.wait(c.Time)
	r.next.Chunk(c)
	if r.poll != nil {
		r.poll(false)
	}
}

// wait returns when a chunk of capture time t may go.
func (r *Replay) wait(t time.Time) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		if r.paused {
			if !r.stepUntil.IsZero() && t.Before(r.stepUntil) {
				r.release(t)
				r.mu.Unlock()
				return
			}
			r.stepUntil = time.Time{}
			if r.steps > 0 {
				// A step covers Step of capture time from the first
				// chunk it releases.
				r.steps--
				r.stepUntil = t.Add(r.step)
				r.release(t)
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			if r.poll != nil {
				r.poll(true)
			}
			<-r.wake
			continue
		}
		if r.pace == Fast {
			r.release(t)
			r.mu.Unlock()
			return
		}
		d := r.due(t)
		if d <= 0 {
			r.release(t)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if r.poll != nil {
			r.poll(false)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-r.wake:
		}
	}
}

// due returns how long until a chunk of capture time t is due at capture
// pace; r.mu is held. The first chunk (after a start, a resume or a pace
// change) is due at once and anchors the pace.
func (r *Replay) due(t time.Time) time.Duration {
	now := time.Now()
	if !r.anchored {
		r.anchored, r.wall0, r.cap0 = true, now, t
	}
	return time.Duration(float64(t.Sub(r.cap0))/r.speed) - now.Sub(r.wall0)
}

// release records chunk time t as released; r.mu is held.
func (r *Replay) release(t time.Time) {
	if t.After(r.at) {
		r.at = t
	}
}

// signal wakes a waiting Chunk; r.mu is held.
func (r *Replay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// TogglePause implements Control. Resuming restarts capture pace from the
// next chunk.
func (r *Replay) TogglePause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = !r.paused
	r.stepUntil, r.steps = time.Time{}, 0
	r.anchored = false
	r.signal()
}

// Step implements Control.
func (r *Replay) Step() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		r.paused = true
		r.signal()
		return
	}
	r.steps++
	r.signal()
}

// TogglePace implements Control.
func (r *Replay) TogglePace() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pace == Fast {
		r.pace = Real
	} else {
		r.pace = Fast
	}
	r.anchored = false
	r.signal()
}

// State implements Control.
func (r *Replay) State() ReplayState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReplayState{Pace: r.pace, Speed: r.speed, Paused: r.paused, Stepping: r.paused && (!r.stepUntil.IsZero() || r.steps > 0),
		Done: r.done, At: r.at}
}

// Stop releases every chunk from now on without waiting (the user quit).
func (r *Replay) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.signal()
}

// Finish records that the input ended.
func (r *Replay) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
}
