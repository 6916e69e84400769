package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kwire/kwire/capture"
)

// runContext is the context a command that runs until stopped runs in:
// done on SIGINT or SIGTERM, and after d when d > 0.
func runContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if d <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, func() { cancel(); stop() }
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// lastTime passes chunks on and remembers the latest capture time, which
// stamps the final stats line (offline output never uses the wall clock).
type lastTime struct {
	next capture.Sink
	t    time.Time
}

func (l *lastTime) Chunk(c *capture.Chunk) {
	if c.Time.After(l.t) {
		l.t = c.Time
	}
	l.next.Chunk(c)
}
