package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/evict"
)

// Topic ids (KIP-516): Fetch v13+, OffsetCommit v10+ and KIP-848
// assignments name topics by id only. The Correlator learns names from
// Metadata responses (topics) and remembers the ids used before one named
// them (unresolved): their state is kept under "id:<hex>" and renamed when
// a response does.
//
// A stream of made-up ids would grow both without end, so each holds at
// most Options.MaxTopicIDs ids; when one is full, its least recently used
// ids are forgotten, down to 90% of the cap so that it is rare
// (Limits.TopicIDsEvicted). A forgotten name is learned again from the next
// Metadata response naming it; state under a forgotten unresolved id keeps
// that key.

// learnTopics records the topic ids a Metadata response in e names and
// renames the state kept under those that were unresolved.
func (c *Correlator) learnTopics(e *decode.Exchange) {
	r, ok := e.Resp.(*kmsg.MetadataResponse)
	if !ok {
		return
	}
	before := c.topics.Forgotten
	c.topics.Learn(e)
	c.stats.Limits.TopicIDsEvicted += c.topics.Forgotten - before
	var resolved [][16]byte
	for i := range r.Topics {
		if id := r.Topics[i].TopicID; r.Topics[i].Topic != nil {
			if _, ok := c.unresolved[id]; ok {
				resolved = append(resolved, id)
			}
		}
	}
	c.resolveTopics(resolved)
}

// UnresolvedTopics returns the topic ids still without a name
// (Stats.UnresolvedTopicIDs counts them), in no order.
func (c *Correlator) UnresolvedTopics() [][16]byte {
	out := make([][16]byte, 0, len(c.unresolved))
	for id := range c.unresolved {
		out = append(out, id)
	}
	return out
}

// topicName returns the name learned for topic id, if any.
func (c *Correlator) topicName(id [16]byte) (string, bool) { return c.topics.Name(id) }

// markUnresolved remembers that state is kept under topic id's "id:<hex>"
// key until a Metadata response names it.
func (c *Correlator) markUnresolved(id [16]byte) {
	if _, ok := c.unresolved[id]; !ok && len(c.unresolved) >= c.opts.MaxTopicIDs {
		c.stats.Limits.TopicIDsEvicted += evict.Oldest(c.unresolved, c.opts.MaxTopicIDs,
			func(used uint64) uint64 { return used })
	}
	c.unresolvedClock++
	c.unresolved[id] = c.unresolvedClock
}
