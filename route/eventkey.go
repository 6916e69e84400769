package route

import (
	"slices"
	"strings"

	"github.com/kwire/kwire/correlate"
)

// key is a routing key in parts, made without allocating: its string is
// kind, NUL, a, and (a client's) NUL, b.
type key struct {
	kind byte
	a, b string
	two  bool // b is part of it (ClientKey)
}

func (k key) String() string {
	s := string(k.kind) + "\x00" + k.a
	if k.two {
		s += "\x00" + k.b
	}
	return s
}

// shard is Shard(k.String(), n).
func (k key) shard(n int32) int32 {
	h := fnv1a(2166136261, string(k.kind))
	h = fnv1a(h, "\x00")
	h = fnv1a(h, k.a)
	if k.two {
		h = fnv1a(fnv1a(h, "\x00"), k.b)
	}
	return int32(h % uint32(n))
}

func fnv1a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// compare orders keys as the lines of one input item are written: the
// transactions' first (an EndTxn's outcome before what it causes in a
// group), then by the keys' strings.
func (k key) compare(o key) int {
	if tk, to := k.kind == 't', o.kind == 't'; tk != to {
		if tk {
			return -1
		}
		return 1
	}
	if k.kind != o.kind {
		return int(k.kind) - int(o.kind)
	}
	if c := strings.Compare(k.a, o.a); c != 0 || !k.two {
		return c
	}
	return strings.Compare(k.b, o.b)
}

// eventKey is EventKey's key in parts.
func eventKey(ev correlate.Event) key {
	switch ev := ev.(type) {
	case *correlate.GenerationEvent:
		return key{kind: 'g', a: ev.Group}
	case *correlate.MemberEvent:
		return key{kind: 'g', a: ev.Group}
	case *correlate.CommitEvent:
		return key{kind: 'g', a: ev.Group}
	case *correlate.CoordinatorEvent:
		return key{kind: 'g', a: ev.Group}
	case *correlate.ShareGroupEvent:
		return key{kind: 'g', a: ev.Group}
	case *correlate.TransactionEvent:
		return key{kind: 't'}
	case *correlate.HazardEvent:
		return hazardKey(ev)
	}
	return key{}
}

func hazardKey(h *correlate.HazardEvent) key {
	switch {
	case h.Group != "":
		return key{kind: 'g', a: h.Group}
	case h.TransactionalID != "" || h.Kind == correlate.HazardHangingTransaction:
		return key{kind: 't'}
	case h.Kind == correlate.HazardClientIDChurn:
		return key{kind: 'h', a: h.ClientHost}
	}
	return key{kind: 'c', a: h.ClientHost, b: h.ClientID, two: true}
}

// SortEvents puts the events one input item gave in the order a run
// writes them, whatever the number of shards: by key (key.compare), the
// events of one key in the order given.
func SortEvents(evs []correlate.Event) {
	if len(evs) < 2 {
		return
	}
	first := eventKey(evs[0])
	for _, ev := range evs[1:] {
		if eventKey(ev) != first {
			slices.SortStableFunc(evs, func(a, b correlate.Event) int { return eventKey(a).compare(eventKey(b)) })
			return
		}
	}
}
