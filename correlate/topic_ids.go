package correlate

import (
	"bytes"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Topic ids (KIP-516): Fetch v13+, OffsetCommit v10+ and KIP-848
// assignments name topics by id only. The Correlator learns names from
// Metadata responses (topicNames) and remembers the ids used before one
// named them (unresolved): their state is kept under "id:<hex>" and
// renamed when a response does.
//
// A stream of made-up ids would grow both maps without end, so each holds
// at most Options.MaxTopicIDs ids. When one is full, its least recently
// seen ids are forgotten, down to 90% of the cap so that it is rare
// (Limits.TopicIDsEvicted). A forgotten name is learned again from the
// next Metadata response naming it (clients refresh metadata every few
// minutes); state under a forgotten unresolved id keeps that key.

// topicName is a name learned for a topic id, and when it was last seen
// (named by a response or looked up).
type topicName struct {
	name string
	seen time.Time
}

// learnTopics records the topic ids a Metadata response in e names and
// renames the state kept under those that were unresolved.
func (c *Correlator) learnTopics(e *decode.Exchange) {
	r, ok := e.Resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	var resolved [][16]byte
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Topic == nil || t.TopicID == ([16]byte{}) {
			continue
		}
		if n := c.topicNames[t.TopicID]; n != nil {
			n.name, n.seen = *t.Topic, c.now
			continue
		}
		if len(c.topicNames) >= c.opts.MaxTopicIDs {
			c.stats.Limits.TopicIDsEvicted += evictOldest(c.topicNames, c.opts.MaxTopicIDs,
				func(n *topicName) time.Time { return n.seen })
		}
		c.topicNames[t.TopicID] = &topicName{name: *t.Topic, seen: c.now}
		if _, ok := c.unresolved[t.TopicID]; ok {
			resolved = append(resolved, t.TopicID)
		}
	}
	c.resolveTopics(resolved)
}

// topicName returns the name learned for topic id, if any.
func (c *Correlator) topicName(id [16]byte) (string, bool) {
	n := c.topicNames[id]
	if n == nil {
		return "", false
	}
	n.seen = c.now
	return n.name, true
}

// markUnresolved remembers that state is kept under topic id's "id:<hex>"
// key until a Metadata response names it.
func (c *Correlator) markUnresolved(id [16]byte) {
	if _, ok := c.unresolved[id]; !ok && len(c.unresolved) >= c.opts.MaxTopicIDs {
		c.stats.Limits.TopicIDsEvicted += evictOldest(c.unresolved, c.opts.MaxTopicIDs,
			func(t time.Time) time.Time { return t })
	}
	c.unresolved[id] = c.now
}

// evictOldest forgets the least recently seen ids of m (ties by id, for
// determinism) until fewer than 90% of limit remain, and returns how many.
func evictOldest[V any](m map[[16]byte]V, limit int, seen func(V) time.Time) int64 {
	type entry struct {
		id   [16]byte
		seen time.Time
	}
	all := make([]entry, 0, len(m))
	for id, v := range m {
		all = append(all, entry{id, seen(v)})
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].seen.Equal(all[j].seen) {
			return all[i].seen.Before(all[j].seen)
		}
		return bytes.Compare(all[i].id[:], all[j].id[:]) < 0
	})
	var n int64
	for _, e := range all {
		if len(m) < limit*9/10 {
			break
		}
		delete(m, e.id)
		n++
	}
	return n
}
