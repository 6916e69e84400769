package aggregate

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
)

// verifyLogEvery bounds the stderr lines about batches that fail
// verification: the first of each reason (verifyFix) at once, then at
// most one per reason this often, with the count so far (a forger can
// write many).
const verifyLogEvery = 10 * time.Second

// verifier checks the agents' records against Options.Keys before
// anything reads them: a record that is not signed with a key of the agent
// it names is dropped and counted (unverified_batches), and said on
// stderr (rate-limited). Without keys every record passes. It runs on
// the goroutine that reads the agents' topic; dropped is read by others.
type verifier struct {
	keys    *wire.Keyring
	stderr  io.Writer
	dropped atomic.Int64
	logged  map[string]time.Time // wall clock of the last line, per reason
}

func newVerifier(keys []wire.Key, stderr io.Writer) *verifier {
	v := &verifier{stderr: stderr, logged: map[string]time.Time{}}
	if len(keys) > 0 {
		v.keys = wire.NewKeyring(keys)
	}
	return v
}

// ok says whether value may be read. replay marks a record read again (a
// router taking a partition over): checked, but neither counted nor said
// again.
func (v *verifier) ok(value []byte, replay bool) bool {
	if v == nil || v.keys == nil {
		return true
	}
	agent, err := v.keys.Verify(value)
	if err == nil || errors.Is(err, wire.ErrVersion) {
		return true // a format this build does not read: Decode refuses it, and says why
	}
	if replay {
		return false
	}
	v.dropped.Add(1)
	fix := verifyFix(err)
	if now, last := time.Now(), v.logged[fix]; last.IsZero() || now.Sub(last) >= verifyLogEvery {
		fmt.Fprintf(v.stderr, "kwire: dropped a batch naming agent %q: %v (%s); %d dropped in all\n",
			agent, err, fix, v.dropped.Load())
		v.logged[fix] = now
	}
	return false
}

// verifyFix says what to check for a batch that failed verification.
func verifyFix(err error) string {
	switch {
	case errors.Is(err, wire.ErrUnsigned):
		return "an agent without a key, or a forger: give the agent its key with --publish-key-file"
	case errors.Is(err, wire.ErrUnknownAgent):
		return "not in --agent-key-file: add the agent's key, or it is a forger"
	case errors.Is(err, wire.ErrBadTag):
		return "the agent's key differs from the one in --agent-key-file, or a forger"
	}
	return "not a batch"
}

// count is the number of batches dropped so far; safe from any goroutine.
func (v *verifier) count() int64 {
	if v == nil {
		return 0
	}
	return v.dropped.Load()
}
