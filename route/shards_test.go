package route

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// feed is a decode handler giving every item to one correlator (corr) or
// to Shards (sh), one item at a time, and keeping the lines written: the
// events of each item (in SortEvents' order), then the summary.
type feed struct {
	corr  *correlate.Correlator
	sh    *Shards
	evs   []correlate.Event
	lines []string
	last  time.Time
}

func (f *feed) write(_ int, evs []correlate.Event) {
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		f.lines = append(f.lines, ev.Type()+" "+string(b))
	}
}

func (f *feed) item(it Item) {
	if f.sh != nil {
		f.sh.Batch([]Item{it}, f.write, nil)
		f.sh.Flush() // the decoder's item is only valid during its call
		return
	}
	switch {
	case it.Exchange != nil:
		f.corr.Exchange(it.Exchange)
	case it.Anomaly != nil:
		f.corr.Anomaly(it.Anomaly)
	case it.Closed != nil:
		f.corr.ConnClosed(it.Closed, it.At, it.Reason)
	}
	SortEvents(f.evs)
	f.write(0, f.evs)
	f.evs = f.evs[:0]
}

func (f *feed) Exchange(e *decode.Exchange) {
	for _, t := range []time.Time{e.ReqTime, e.RespTime} {
		if t.After(f.last) {
			f.last = t
		}
	}
	f.item(Item{Exchange: e})
}
func (f *feed) Anomaly(a *decode.Anomaly) { f.item(Item{Anomaly: a}) }
func (f *feed) ConnClosed(c *capture.Conn, at time.Time, r capture.CloseReason) {
	f.item(Item{Closed: c, At: at, Reason: r})
}

// run correlates file with shards correlators (0: one Correlator, no
// Shards) and returns its lines.
func run(t *testing.T, file string, shards int) []string {
	t.Helper()
	f := &feed{}
	if shards == 0 {
		f.corr = correlate.New(nil, correlate.SinkFunc(func(ev correlate.Event) { f.evs = append(f.evs, ev) }))
	} else {
		f.sh = NewShards(shards, nil)
	}
	ports, _ := capture.ParsePorts("9092")
	src, err := capture.OpenFiles([]string{file}, &capture.Options{Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dec := decode.New(f, nil)
	if err := src.Run(context.Background(), dec); err != nil {
		t.Fatal(err)
	}
	var snap *correlate.Snapshot
	if f.sh != nil {
		f.sh.Close(f.last, func(evs []correlate.Event) { f.write(0, evs) })
		snap = f.sh.Snapshot()
	} else {
		f.corr.Close(f.last)
		f.item(Item{}) // Close's events
		snap = f.corr.Snapshot()
	}
	b, _ := json.Marshal(snap)
	return append(f.lines, "summary "+string(b))
}

// TestShards: Shards over 1, 2 and 3 correlators gives the lines one
// Correlator gives, on captures of several groups, a client bound to two,
// transactions and share groups.
func TestShards(t *testing.T) {
	for _, c := range []string{"g_xbroker.b1", "h_offset_reset", "h_txn_offsets_aborted", "h_share_killed_held"} {
		file := "../testdata/" + c + ".pcapng"
		want := run(t, file, 0)
		if len(want) < 10 {
			t.Fatalf("%s: %d lines: not the capture wanted", c, len(want))
		}
		for _, n := range []int{1, 2, 3} {
			if got := run(t, file, n); !slices.Equal(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Errorf("%s, %d shards: line %d:\n got %.300s\nwant %.300s", c, n, i, got[i], want[i])
						break
					}
				}
				t.Errorf("%s, %d shards: %d lines, want %d", c, n, len(got), len(want))
			}
		}
	}
}
