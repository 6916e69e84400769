package decode

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/evict"
)

// Topics maps topic ids (KIP-516) to names, learned from Metadata responses.
// Newer Fetch, Produce and OffsetCommit versions name topics by id only.
// The zero value is ready to use.
//
// It holds at most Max ids (MaxTopicNames when 0): a stream of made-up ids
// must not grow it without end. When full, the least recently used ids
// (learned or looked up) are forgotten, down to 90% of Max, and Forgotten
// counts them; a forgotten name comes back with the next Metadata response
// naming it (clients refresh metadata every few minutes).
type Topics struct {
	Max       int
	Forgotten int64
	names     map[[16]byte]*topicName
	clock     uint64 // bumped on every use: the recency of names
}

type topicName struct {
	name string
	used uint64
}

// MaxTopicNames is the default bound of a Topics.
const MaxTopicNames = 100000

// Learn records the topic ids named by a Metadata response in e; other
// exchanges are ignored.
func (t *Topics) Learn(e *Exchange) {
	r, ok := e.Resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	for i := range r.Topics {
		tp := &r.Topics[i]
		if tp.Topic == nil || tp.TopicID == ([16]byte{}) {
			continue
		}
		t.clock++
		if n := t.names[tp.TopicID]; n != nil {
			n.name, n.used = *tp.Topic, t.clock
			continue
		}
		if t.names == nil {
			t.names = make(map[[16]byte]*topicName)
		}
		if max := t.max(); len(t.names) >= max {
			t.Forgotten += evict.Oldest(t.names, max, func(n *topicName) uint64 { return n.used })
		}
		t.names[tp.TopicID] = &topicName{name: *tp.Topic, used: t.clock}
	}
}

// Name returns the name of topic id, if a Metadata response named it.
func (t *Topics) Name(id [16]byte) (string, bool) {
	if t == nil {
		return "", false
	}
	n := t.names[id]
	if n == nil {
		return "", false
	}
	t.clock++
	n.used = t.clock
	return n.name, true
}

// Len returns the number of names held.
func (t *Topics) Len() int { return len(t.names) }

func (t *Topics) max() int {
	if t.Max > 0 {
		return t.Max
	}
	return MaxTopicNames
}
