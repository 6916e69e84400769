package main

import (
	"io"
	"os"
	"time"

	"github.com/kwire/kwire/capture"
)

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
