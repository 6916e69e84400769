package tui

import (
	"sync/atomic"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// Frame is what the UI draws: the pipeline's state at one moment. A Frame
// is immutable once published; it shares nothing with the pipeline.
type Frame struct {
	// Wall is the wall-clock time the frame was made.
	Wall time.Time
	// Snapshot is the Correlator's state (nil before the first one); its
	// Time is the capture clock.
	Snapshot *correlate.Snapshot
	Capture  capture.Stats
	Decode   decode.Stats
	// Traffic are the per API, client and broker counters so far.
	Traffic Traffic
	// Hazards are the latest hazard events, newest first (at most
	// Options.MaxHazards; the Snapshot counts them all).
	Hazards []*correlate.HazardEvent
	// Events counts the correlator events so far.
	Events int64
	// Done says the input ended: this is the last frame.
	Done bool
	// Seq numbers the frames published, from 1.
	Seq uint64
}

// FeedOptions tune a Feed. A nil *FeedOptions, or a zero field, means the
// default.
type FeedOptions struct {
	// Every is the least wall time between two frames (default 250ms).
	Every time.Duration
	// MaxHazards caps the hazard events kept for the Hazards view (default
	// 1000); older ones are still counted in the Snapshot.
	MaxHazards int
}

const (
	defaultEvery      = 250 * time.Millisecond
	defaultMaxHazards = 1000
)

// Feed carries frames from the pipeline to the UI. Exchange, Event, Poll
// and Publish are called from the pipeline goroutine only (the one that
// calls the decoder and the Correlator); Take and Ready from the UI. The
// pipeline side never blocks.
type Feed struct {
	opts    FeedOptions
	next    time.Time // wall time the next frame is due
	traffic traffic
	hazards []*correlate.HazardEvent // ring, oldest at hzHead once full
	hzHead  int
	events  int64
	seq     uint64

	latest  atomic.Pointer[Frame]
	ready   chan struct{}
	dropped atomic.Int64
}

// NewFeed returns a Feed; opts may be nil.
func NewFeed(opts *FeedOptions) *Feed {
	f := &Feed{ready: make(chan struct{}, 1)}
	if opts != nil {
		f.opts = *opts
	}
	if f.opts.Every <= 0 {
		f.opts.Every = defaultEvery
	}
	if f.opts.MaxHazards <= 0 {
		f.opts.MaxHazards = defaultMaxHazards
	}
	return f
}

// Exchange counts one exchange for the Traffic view: its API, error,
// latency, client and broker. It keeps nothing of e, which is only read
// during the call.
func (f *Feed) Exchange(e *decode.Exchange) { f.traffic.exchange(e) }

// Event counts a correlator event and keeps hazards (events are never
// modified once passed, so the Feed keeps the pointer).
func (f *Feed) Event(ev correlate.Event) {
	f.events++
	h, ok := ev.(*correlate.HazardEvent)
	if !ok {
		return
	}
	if len(f.hazards) < f.opts.MaxHazards {
		f.hazards = append(f.hazards, h)
		return
	}
	f.hazards[f.hzHead] = h
	f.hzHead = (f.hzHead + 1) % len(f.hazards)
}

// Poll publishes a frame if one is due at wall time now (Every after the
// last), filled by build (which adds the Snapshot and the stats: it runs on
// the calling goroutine). It reports whether it published.
func (f *Feed) Poll(now time.Time, build func(*Frame)) bool {
	if now.Before(f.next) {
		return false
	}
	f.Publish(now, build)
	return true
}

// Publish publishes a frame now, due or not (when the replay pauses, and
// at the end of the input with Frame.Done set by build). A frame the UI has
// not taken yet is replaced: it is dropped, and counted.
func (f *Feed) Publish(now time.Time, build func(*Frame)) {
	f.next = now.Add(f.opts.Every)
	f.seq++
	fr := &Frame{Wall: now, Events: f.events, Seq: f.seq, Traffic: f.traffic.copy()}
	fr.Hazards = make([]*correlate.HazardEvent, 0, len(f.hazards))
	for i := range f.hazards {
		// Newest first: the ring's newest is just before hzHead.
		j := (f.hzHead - 1 - i + 2*len(f.hazards)) % len(f.hazards)
		fr.Hazards = append(fr.Hazards, f.hazards[j])
	}
	if build != nil {
		build(fr)
	}
	if old := f.latest.Swap(fr); old != nil {
		f.dropped.Add(1)
	}
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled (one slot) when a frame is published.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the latest frame not taken yet, or nil.
func (f *Feed) Take() *Frame { return f.latest.Swap(nil) }

// Dropped counts frames replaced before the UI took them.
func (f *Feed) Dropped() int64 { return f.dropped.Load() }

// Published counts the frames published; call it from the pipeline
// goroutine, or once the pipeline is done.
func (f *Feed) Published() int64 { return int64(f.seq) }
