package aggregate

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// agentFeed encodes what an agent publishes of a capture file: the
// decoder's exchanges and anomalies at the latest packet time read, in
// batches of about limit bytes, and its final counters (it stopped).
// shift moves every time (a clock that lies).
type agentFeed struct {
	enc    *wire.Encoder
	clock  time.Time
	shift  time.Duration
	seq    uint64
	limit  int
	values [][]byte
	dec    *decode.Decoder
}

func (f *agentFeed) Chunk(c *capture.Chunk) {
	if c.Time.After(f.clock) {
		f.clock = c.Time
	}
	f.dec.Chunk(c)
}

func (f *agentFeed) Exchange(e *decode.Exchange) {
	f.enc.Exchange(f.clock.Add(f.shift), e)
	f.maybeFlush()
}

func (f *agentFeed) Anomaly(a *decode.Anomaly) {
	f.enc.Anomaly(f.clock.Add(f.shift), a)
	f.maybeFlush()
}

func (f *agentFeed) maybeFlush() {
	if f.enc.Len() >= f.limit {
		f.flush()
	}
}

func (f *agentFeed) flush() {
	if f.enc.Items() > 0 {
		f.values = append(f.values, bytes.Clone(f.enc.Bytes()))
	}
	f.seq++
	f.enc.Reset(f.seq)
}

// agentBatches returns the batches agent ag publishes of capture file
// (testdata), its times moved by shift.
func agentBatches(t testing.TB, file string, ag wire.Agent, shift time.Duration) [][]byte {
	t.Helper()
	return agentBatchesOf(t, file, ag, shift, version.Get().Build())
}

// agentBatchesOf is agentBatches of an agent of kwire build b.
func agentBatchesOf(t testing.TB, file string, ag wire.Agent, shift time.Duration, b version.Build) [][]byte {
	t.Helper()
	f := &agentFeed{enc: wire.NewEncoder(ag), shift: shift, limit: 4 << 10, seq: 1}
	f.enc.SetBuild(b)
	f.enc.Reset(1)
	f.dec = decode.New(f, &decode.Options{DropProduceRecords: true})
	src, err := capture.OpenFiles([]string{"../testdata/" + file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	f.enc.Counters(f.clock.Add(shift), &wire.Counters{Final: true})
	f.flush()
	return f.values
}

// run feeds values to an aggregator with opts, a Release after each
// (every release a poll, the wall clock 1 ms on per record), and returns
// its output and the aggregator.
func runValues(t testing.TB, opts *Options, values [][]byte) (string, *Aggregator) {
	t.Helper()
	var out bytes.Buffer
	ag := New(opts, &out)
	now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	for _, v := range values {
		now = now.Add(time.Millisecond)
		ag.Add(v, now)
		ag.Release(now, false)
	}
	if err := ag.Finish(); err != nil {
		t.Fatal(err)
	}
	return out.String(), ag
}

// interleave merges the agents' batches as a topic of one partition per
// agent would deliver them: one of each in turn.
func interleave(agents ...[][]byte) [][]byte {
	var out [][]byte
	for i := 0; ; i++ {
		n := 0
		for _, a := range agents {
			if i < len(a) {
				out = append(out, a[i])
				n++
			}
		}
		if n == 0 {
			return out
		}
	}
}
