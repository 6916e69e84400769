package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
	"github.com/kwire/kwire/tui"
)

// tuiFlags are kwire analyze's terminal UI flags.
type tuiFlags struct {
	on     bool
	replay string
	speed  float64
	step   time.Duration
}

func (f *tuiFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "tui", false, "show the terminal UI (groups, group detail, hazards, traffic; ? lists the keys) instead of writing output, replaying the files as --replay says")
	fs.StringVar(&f.replay, "replay", "fast", "with --tui, replay the files at this `PACE`: fast (as fast as possible), real (capture pace, times --speed) or paused (start paused: n steps, p runs at capture pace)")
	fs.Float64Var(&f.speed, "speed", 1, "with --tui, how many times capture pace a real-pace replay runs")
	fs.DurationVar(&f.step, "step", time.Second, "with --tui, the capture time one step (n) of a paused replay covers")
}

// replayOptions checks the flags and returns the replay's options.
func (f *tuiFlags) replayOptions() (*tui.ReplayOptions, error) {
	o := &tui.ReplayOptions{Speed: f.speed, Step: f.step}
	switch f.replay {
	case "fast":
	case "real":
		o.Pace = tui.Real
	case "paused":
		o.Pace, o.Paused = tui.Real, true
	default:
		return nil, fmt.Errorf("--replay %q: want fast, real or paused", f.replay)
	}
	if f.speed <= 0 || f.step <= 0 {
		return nil, errors.New("--speed and --step must be positive")
	}
	return o, nil
}

// runTUI replays capture files through the pipeline under the terminal UI,
// until the user quits (the UI stays up when the files end).
func (p *pipeline) runTUI(files []string, cf *commonFlags, tf *tuiFlags) error {
	return p.replayTUI(files, cf, tf, nil, nil)
}

// replayTUI is runTUI drawing on screen (nil: the terminal); ended, when
// set, is called once the files are done and the last frame published
// (benchmarks stop the UI there).
func (p *pipeline) replayTUI(files []string, cf *commonFlags, tf *tuiFlags, screen tcell.Screen, ended func(*tui.UI)) error {
	ro, err := tf.replayOptions()
	if err != nil {
		return err
	}
	src, err := capture.OpenFiles(files, &capture.Options{Ports: cf.ports})
	if err != nil {
		return err
	}
	defer src.Close()
	entry, err := p.entry(cf, false, io.Discard)
	if err != nil {
		return err
	}
	clock := &lastTime{next: entry}
	var s *tuiSession
	ro.Poll = func(pausing bool) { s.poll(pausing) }
	replay := tui.NewReplay(clock, ro)
	s = newTUISession(p, src.Stats, replay, &tui.Options{Source: sourceName(files), Screen: screen, FullIDs: cf.fullIDs})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return s.run(func() error {
		err := src.Run(ctx, replay)
		p.corr.Close(clock.t)
		p.written()
		replay.Finish()
		s.finish()
		if ended != nil {
			ended(s.ui)
		}
		return err
	}, func() {
		replay.Stop()
		cancel()
	})
}

// tuiSession is the terminal UI over a running pipeline: kwire analyze
// --tui (a file replay) and, through the same three calls, kwire live
// --tui (liveTUI). The capture goroutine owns the decoder and the
// correlator; it calls poll often (after chunks, on ticks) and finish at
// the end, and the session publishes frames from there at a steady rate.
// The UI only reads published frames: it never holds the capture up.
type tuiSession struct {
	p     *pipeline
	stats func() capture.Stats
	feed  *tui.Feed
	ui    *tui.UI
}

// newTUISession taps a Feed into p (after the tap it has, if any) and
// sends its output nowhere: the screen is the output. stats is the
// source's Stats; ctl the replay's control (nil: live).
func newTUISession(p *pipeline, stats func() capture.Stats, ctl tui.Control, opts *tui.Options) *tuiSession {
	s := &tuiSession{p: p, stats: stats, feed: tui.NewFeed(nil)}
	p.out = jsonout.New(io.Discard, nil)
	if p.tap != nil {
		p.tap = taps{p.tap, s.feed}
	} else {
		p.tap = s.feed
	}
	s.ui = tui.New(s.feed, ctl, opts)
	return s
}

// build fills a frame on the capture goroutine.
func (s *tuiSession) build(fr *tui.Frame) {
	fr.Snapshot, fr.Capture, fr.Decode = s.p.corr.Snapshot(), s.stats(), s.p.dec.Stats()
}

// poll publishes a frame when one is due, or now (force: the replay is
// about to wait for the keyboard). Capture goroutine only.
func (s *tuiSession) poll(force bool) {
	if force {
		s.feed.Publish(time.Now(), s.build)
		return
	}
	s.feed.Poll(time.Now(), s.build)
}

// finish publishes the last frame, once the input ended and the
// correlator is closed. Capture goroutine only.
func (s *tuiSession) finish() {
	s.feed.Publish(time.Now(), func(fr *tui.Frame) {
		s.build(fr)
		fr.Done = true
	})
}

// run runs capture on its own goroutine and the UI on this one until the
// user quits (q, ctrl-c, SIGINT, SIGTERM); then it calls stop, which must
// make capture return, and waits for capture.
func (s *tuiSession) run(capture func() error, stop func()) error {
	done := make(chan error, 1)
	uiDone := make(chan struct{})
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.ui.Stop()
				<-uiDone // the terminal is back: the crash report can be read
				panic(r)
			}
		}()
		done <- capture()
	}()
	sig, stopSig := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSig()
	go func() {
		<-sig.Done()
		s.ui.Stop()
	}()
	uiErr := s.ui.Run()
	close(uiDone)
	stop()
	runErr := <-done
	if errors.Is(runErr, context.Canceled) {
		runErr = nil // the user quit before the end
	}
	return errors.Join(uiErr, runErr)
}

// taps passes exchanges and events to two taps (kwire live's metrics and
// its UI).
type taps [2]tap

func (t taps) Exchange(e *decode.Exchange) {
	t[0].Exchange(e)
	t[1].Exchange(e)
}

func (t taps) Event(ev correlate.Event) {
	t[0].Event(ev)
	t[1].Event(ev)
}

// sourceName names the capture files in the status bar.
func sourceName(files []string) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	return strings.Join(names, ",")
}

// liveTickEvery is how often a live capture ticks under the UI: each
// tick publishes a frame, the feed's steady rate (tui.FeedOptions.Every).
const liveTickEvery = 250 * time.Millisecond

// tickEvery is the capture's LiveOptions or EBPFOptions.TickEvery (0: the
// default).
func (f *liveFlags) tickEvery() time.Duration {
	if f.tui {
		return liveTickEvery
	}
	return 0
}

// checkTUI reports flags that --tui excludes.
func (f *liveFlags) checkTUI() string {
	switch {
	case !f.tui:
		return ""
	case f.common.json:
		return "--tui and --json are two outputs (the terminal UI, NDJSON lines): give one"
	case f.exchanges:
		return "--exchanges writes lines, and --tui draws the terminal UI instead: give one"
	}
	return ""
}

// checkTerminal tells a user without a terminal that --tui needs one,
// before the capture starts.
func checkTerminal() error {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("--tui needs a terminal (%v): leave it out to get output lines", err)
	}
	return tty.Close()
}

// liveTUI is kwire live --tui: a tuiSession over the live pipeline. While
// the UI owns the terminal the output goes nowhere and kwire's messages
// wait (when stderr is the terminal); once the terminal is back they are
// written, and the output is restored for the final summary.
type liveTUI struct {
	s      *tuiSession
	out    *jsonout.Writer // the output the UI stands in for
	stderr io.Writer       // the real stderr
	held   *bytes.Buffer   // messages held while the UI runs; nil: stderr is not the terminal
}

// openTUI puts the UI on r's pipeline, after the metrics tap if there is
// one. The status bar names the interface, or ebpf.
func (r *liveRun) openTUI(f *liveFlags) {
	source := r.src.Interface()
	if f.probe.ebpf {
		source = "ebpf"
	}
	t := &liveTUI{out: r.p.out, stderr: r.stderr}
	t.s = newTUISession(r.p, r.src.Stats, nil, &tui.Options{Source: source, FullIDs: f.common.fullIDs})
	if isTerminal(r.stderr) {
		t.held = new(bytes.Buffer)
		r.stderr = t.held
	}
	r.tui = t
}

// runTUI runs the capture on its own goroutine under the UI (its ticks
// publish the frames: liveRun.Tick) until the user quits (q, ctrl-c,
// SIGINT, SIGTERM), which cancels the capture, or the capture ends
// (--duration, an error), which closes the UI. Then the terminal is back.
func (r *liveRun) runTUI(ctx context.Context, cancel context.CancelFunc, run func(context.Context, capture.Sink) error) error {
	t := r.tui
	err := t.s.run(func() error {
		defer t.s.ui.Stop()
		return run(ctx, r)
	}, cancel)
	// The events closing the correlator emits are the UI's last frame:
	// the output gets what SIGINT gives without the UI, the summary and
	// the final stats, not a tail of the events.
	r.p.corr.Close(r.clock.t)
	r.p.written()
	t.s.finish()
	r.p.out, r.stderr = t.out, t.stderr
	if t.held != nil {
		t.stderr.Write(t.held.Bytes())
	}
	return err
}
