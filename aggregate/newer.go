package aggregate

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/kwire/kwire/aggregate/wire"
)

// maxNewerSaid bounds the agents (host and format) whose newer format
// stderr names: past it batches are still counted, not said (names come
// from unverified bytes).
const maxNewerSaid = 1000

// newerFormats counts the agents' batches of a format this aggregator
// does not read (a newer kwire's: wire.VersionError naming the agent) and
// says so on stderr, once per agent host and format: they are dropped,
// and the fix is to upgrade the aggregator (aggregators first,
// docs/deploy.md). Safe from any goroutine.
type newerFormats struct {
	stderr io.Writer
	count  atomic.Int64
	mu     sync.Mutex
	said   map[string]bool
}

func newNewerFormats(stderr io.Writer) *newerFormats {
	return &newerFormats{stderr: stderr, said: map[string]bool{}}
}

// note counts err, a decode error, if it is a newer agent's format, and
// reports whether it was (else it is the caller's: corrupt). replay marks
// a record read again (a router taking a partition over): not counted.
func (n *newerFormats) note(err error, replay bool) bool {
	var ve *wire.VersionError
	if !errors.As(err, &ve) || ve.Agent.Host == "" {
		return false // format 1, or not a batch
	}
	if replay {
		return true
	}
	total := n.count.Add(1)
	key := fmt.Sprintf("%s %d", ve.Agent.Host, ve.Format)
	n.mu.Lock()
	say := !n.said[key] && len(n.said) < maxNewerSaid
	if say {
		n.said[key] = true
	}
	n.mu.Unlock()
	if say {
		fmt.Fprintf(n.stderr, "kwire: %v; its batches are dropped and counted (newer_format_batches, %d so far)\n", err, total)
	}
	return true
}

// batches is the number of batches counted; 0 for a nil n.
func (n *newerFormats) batches() int64 {
	if n == nil {
		return 0
	}
	return n.count.Load()
}
