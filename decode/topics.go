package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// Topics maps topic ids (KIP-516) to names, learned from Metadata responses.
// Newer Fetch, Produce and OffsetCommit versions name topics by id only.
// The zero value is ready to use. It holds at most MaxTopicNames ids: a
// stream of made-up ids must not grow it without end. When full it
// forgets them all (Forgotten counts them); names in use come back with
// the next Metadata response naming them.
type Topics struct {
	names     map[[16]byte]string
	Forgotten int64
}

// MaxTopicNames bounds a Topics.
const MaxTopicNames = 100000

// Learn records the topic ids named by a Metadata or ConsumerGroupDescribe
// response in e; other exchanges are ignored.
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
		if t.names == nil {
			t.names = make(map[[16]byte]string)
		}
		if _, ok := t.names[tp.TopicID]; !ok && len(t.names) >= MaxTopicNames {
			t.Forgotten += int64(len(t.names))
			clear(t.names)
		}
		if t.names[tp.TopicID] != *tp.Topic {
			t.names[tp.TopicID] = *tp.Topic
		}
	}
}

// Name returns the name of topic id, if a Metadata response named it.
func (t *Topics) Name(id [16]byte) (string, bool) {
	if t == nil {
		return "", false
	}
	n, ok := t.names[id]
	return n, ok
}
