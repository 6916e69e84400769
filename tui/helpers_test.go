package tui

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

var nowForTest = time.Unix(1700000000, 0)

// testdata is where the committed real-client captures are.
func testdata(name string) string { return filepath.Join("..", "testdata", name) }

// pipe is the real pipeline (capture -> decode -> correlate) with a Feed
// tapped in, as cmd/kwire wires it.
type pipe struct {
	feed *Feed
	dec  *decode.Decoder
	corr *correlate.Correlator
	src  *capture.Files
	at   time.Time
}

func (p *pipe) Exchange(e *decode.Exchange) {
	p.feed.Exchange(e)
	p.corr.Exchange(e)
}

func (p *pipe) Anomaly(*decode.Anomaly) {}

func (p *pipe) build(fr *Frame) {
	fr.Snapshot = p.corr.Snapshot()
	fr.Capture = p.src.Stats()
	fr.Decode = p.dec.Stats()
}

func newPipe(t testing.TB, file string) *pipe {
	t.Helper()
	src, err := capture.OpenFiles([]string{testdata(file)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipe{feed: NewFeed(nil), src: src}
	p.corr = correlate.New(nil, p.feed)
	p.dec = decode.New(p, nil)
	return p
}

// stopAt passes chunks on until capture time until, then cancels the run.
type stopAt struct {
	next   capture.Sink
	until  time.Time
	cancel func()
	p      *pipe
}

func (s *stopAt) Chunk(c *capture.Chunk) {
	if !s.until.IsZero() && !c.Time.Before(s.until) {
		s.cancel()
		return
	}
	if c.Time.After(s.p.at) {
		s.p.at = c.Time
	}
	s.next.Chunk(c)
}

// frameOf runs file through the pipeline up to capture time until (zero:
// to its end, then closes the Correlator) and returns the frame published
// last.
func frameOf(t testing.TB, file string, until time.Time) *Frame {
	t.Helper()
	p := newPipe(t, file)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := p.src.Run(ctx, &stopAt{next: p.dec, until: until, cancel: cancel, p: p})
	if until.IsZero() {
		if err != nil {
			t.Fatal(err)
		}
		p.corr.Close(p.at)
	}
	p.feed.Publish(time.Now(), func(fr *Frame) {
		p.build(fr)
		fr.Done = until.IsZero()
	})
	fr := p.feed.Take()
	if fr == nil || fr.Snapshot == nil {
		t.Fatal("no frame published")
	}
	return fr
}

// screen is a UI drawing on a simulation screen.
type screen struct {
	t   testing.TB
	u   *UI
	sim tcell.SimulationScreen
}

func newScreen(t testing.TB, ctl Control, w, h int) *screen {
	t.Helper()
	return newScreenOpts(t, ctl, w, h, Options{})
}

// newScreenOpts is newScreen with options (Source and Screen set).
func newScreenOpts(t testing.TB, ctl Control, w, h int, opts Options) *screen {
	t.Helper()
	sim := tcell.NewSimulationScreen("UTF-8")
	opts.Source, opts.Screen = "test.pcapng", sim
	u := New(NewFeed(nil), ctl, &opts)
	sim.SetSize(w, h)
	return &screen{t: t, u: u, sim: sim}
}

// draw draws the UI and returns the screen's lines.
func (s *screen) draw() []string {
	s.u.app.ForceDraw()
	cells, w, h := s.sim.GetContents()
	lines := make([]string, h)
	for y := range h {
		var b strings.Builder
		for x := range w {
			cl := cells[y*w+x]
			if len(cl.Runes) == 0 {
				b.WriteByte(' ')
				continue
			}
			b.WriteString(string(cl.Runes))
		}
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// text is the screen as one string.
func (s *screen) text() string { return strings.Join(s.draw(), "\n") }

// press delivers a key as the application's event loop does: the input
// capture (the key table) first, then the focused primitive.
func (s *screen) press(k tcell.Key, r rune) {
	ev := tcell.NewEventKey(k, r, tcell.ModNone)
	if ev = s.u.app.GetInputCapture()(ev); ev == nil {
		return
	}
	if h := s.u.root.InputHandler(); h != nil {
		h(ev, func(p tview.Primitive) { s.u.app.SetFocus(p) })
	}
}

// typeText presses the runes of text.
func (s *screen) typeText(text string) {
	for _, r := range text {
		s.press(tcell.KeyRune, r)
	}
}

// reversed returns the screen's lines drawn in reverse video (a list's
// or a text pane's selection), as draw gives them.
func (s *screen) reversed() []string {
	lines := s.draw()
	cells, w, _ := s.sim.GetContents()
	var out []string
	for y, l := range lines {
		if l == "" {
			continue
		}
		if _, _, attr := cells[y*w].Style.Decompose(); attr&tcell.AttrReverse != 0 {
			out = append(out, l)
		}
	}
	return out
}
