package route

import (
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
)

// TestKeyParts: the keys Shards computes without allocating are the keys
// EventKey gives, with the same shard and the same order.
func TestKeyParts(t *testing.T) {
	evs := []correlate.Event{
		&correlate.GenerationEvent{Group: "orders"},
		&correlate.CommitEvent{Group: "orders-2"},
		&correlate.MemberEvent{Group: ""},
		&correlate.TransactionEvent{TransactionalID: "tx"},
		&correlate.HazardEvent{Kind: correlate.HazardClientIDChurn, ClientHost: "10.0.0.1"},
		&correlate.HazardEvent{Kind: correlate.HazardProducerAcksWeak, ClientHost: "10.0.0.1", ClientID: "p"},
		&correlate.HazardEvent{Kind: correlate.HazardProducerAcksWeak, ClientHost: "10.0.0.1", ClientID: "p2"},
		&correlate.HazardEvent{Kind: correlate.HazardProducerAcksWeak, ClientHost: "10.0.0.10", ClientID: ""},
		&correlate.HazardEvent{Kind: correlate.HazardHangingTransaction, Topic: "t"},
		&correlate.HazardEvent{Kind: correlate.HazardCommitGap, Group: "orders"},
	}
	for _, a := range evs {
		ka := eventKey(a)
		sa, ok := EventKey(a)
		if !ok || ka.String() != sa {
			t.Fatalf("%T: key %q, EventKey %q %v", a, ka.String(), sa, ok)
		}
		for _, n := range []int32{1, 2, 3, 8, 64} {
			if got, want := ka.shard(n), Shard(sa, n); got != want {
				t.Errorf("%q: shard %d of %d, Shard says %d", sa, got, n, want)
			}
		}
		for _, b := range evs {
			sb, _ := EventKey(b)
			want := sign(strings.Compare(sa, sb))
			if ta, tb := sa == TxnKey(), sb == TxnKey(); ta != tb { // the transactions' first
				want = map[bool]int{true: -1, false: 1}[ta]
			}
			if got := sign(ka.compare(eventKey(b))); got != want {
				t.Errorf("compare %q %q: %d, want %d", sa, sb, got, want)
			}
		}
	}
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}
