package tui

import (
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// TestTxnsView: the Transactions view, from real captures (kgo producers
// and read_committed consumers against kfake). Mid-way through
// h_hanging_lso the killed producer's transaction is open and holds its
// partition's last stable offset; at the end of txn_read_committed the
// transactional id is idle with its committed and aborted counts, and the
// partition's markers and aborted transactions are listed. A capture
// without transactions has no such tab.
func TestTxnsView(t *testing.T) {
	hanging := func(t *testing.T) *Frame {
		full := frameOf(t, "h_hanging_lso.pcapng", time.Time{})
		return frameOf(t, "h_hanging_lso.pcapng", full.Traffic.First.Add(15*time.Second))
	}
	readCommitted := func(t *testing.T) *Frame { return frameOf(t, "txn_read_committed.pcapng", time.Time{}) }
	tests := []struct {
		name   string
		frame  func(*testing.T) *Frame
		keys   []press
		want   []string
		reject []string
	}{{
		name: "an open transaction holds the last stable offset", frame: hanging, keys: keys("4"),
		want: []string{
			`\[4 Transactions\]`,
			`^TRANSACTIONAL ID +CLIENT +PRODUCER ID +EPOCH +STATE +COMMITTED +ABORTED +TIMED OUT +FENCED +LONGEST$`,
			`^txl-1 +txl-producer +\d+ +0 +open 1[2-4]\.\d+s +0 +0 +0 +0 +0ms$`,
			`^PARTITION +LAST STABLE +HIGH WM +UNSTABLE +STUCK +MAX STUCK +MARKERS +ABORTED TXNS +HELD BY$`,
			`^txl-orders/0 +5 +15 +10 +1\d{4}ms +1\d{4}ms +0 +0 +txl-1$`,
		},
	}, {
		name: "ended transactions, markers and aborted ones", frame: readCommitted, keys: keys(tcell.KeyTab, tcell.KeyTab, tcell.KeyTab),
		want: []string{
			`\[4 Transactions\]`,
			`^txrc-1 +txrc-producer +\d+ +\d+ +idle +4 +2 +0 +0 +\d+ms$`,
			`^txrc-in/1 +30 +30 +0 +- +0ms +6 +2 +-$`,
		},
	}, {
		name: "filtered to a partition", frame: readCommitted, keys: keys("4", "/", "txrc-in/0", tcell.KeyEnter),
		want:   []string{`^txrc-in/0 `, `no transactional id matches the filter`},
		reject: []string{`^txrc-in/1 `, `^txrc-1 `},
	}, {
		name: "no tab without transactions", frame: churnMid, keys: keys("4"),
		want:   []string{`^kwire \[1 Groups\]  2 Hazards \(\d+\)   3 Traffic  sort:name`},
		reject: []string{`Transactions`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScreen(t, nil, 120, 24)
			s.u.apply(tc.frame(t))
			s.draw()
			for _, k := range tc.keys {
				s.press(k.key, k.r)
				s.draw()
			}
			checkScreen(t, s.draw(), tc.want, tc.reject)
		})
	}
}
