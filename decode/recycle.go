package decode

import "github.com/twmb/franz-go/pkg/kmsg"

// Recycling: Produce, Fetch and OffsetCommit requests and responses are
// most of the frames of a busy capture, and reading each allocates the
// message and its slice of topics. A handler that is done with an
// exchange's messages can give them back with Recycle, once each; later
// frames of the same kind are read into them. The message and its topics
// slice are reused, and so are the topics' partitions slices, which the
// fast paths (fastmsg.go) read into (kmsg allocates everything inside the
// topics again). Nothing may keep a pointer into a message past Recycle:
// the correlator's pointers into a Fetch response's partitions (gotParts)
// are cleared when it is done with them.
const (
	spareMessages   = 256 // kept per kind: more than a handoff has in flight
	spareTopics     = 64  // a longer topics slice is not kept
	sparePartitions = 256 // nor partitions slices past this many in a message
)

type spares struct {
	in          interner // strings shared by the fast paths (fastmsg.go)
	ref         bool     // no fast paths: Options.ReferenceKmsg
	produceReq  []*kmsg.ProduceRequest
	produceResp []*kmsg.ProduceResponse
	fetchReq    []*kmsg.FetchRequest
	fetchResp   []*kmsg.FetchResponse
	commitReq   []*kmsg.OffsetCommitRequest
	commitResp  []*kmsg.OffsetCommitResponse
}

// Recycle gives back an exchange's messages, either of which may be nil,
// once nothing refers to them or to anything in them any more (strings
// excepted: kmsg never writes into a string). It must be called on the
// goroutine that calls the Decoder, like every other method.
func (d *Decoder) Recycle(req kmsg.Request, resp kmsg.Response) { d.spares.recycle(req, resp) }

func (s *spares) recycle(req kmsg.Request, resp kmsg.Response) {
	switch m := req.(type) {
	case *kmsg.ProduceRequest:
		s.produceReq = keepSpare(s.produceReq, m, &m.Topics, func(t *kmsg.ProduceRequestTopic) *[]kmsg.ProduceRequestTopicPartition {
			return &t.Partitions
		})
	case *kmsg.FetchRequest:
		s.fetchReq = keepSpare(s.fetchReq, m, &m.Topics, func(t *kmsg.FetchRequestTopic) *[]kmsg.FetchRequestTopicPartition {
			return &t.Partitions
		})
	case *kmsg.OffsetCommitRequest:
		s.commitReq = keepSpare(s.commitReq, m, &m.Topics, func(t *kmsg.OffsetCommitRequestTopic) *[]kmsg.OffsetCommitRequestTopicPartition {
			return &t.Partitions
		})
	}
	switch m := resp.(type) {
	case *kmsg.ProduceResponse:
		s.produceResp = keepSpare(s.produceResp, m, &m.Topics, func(t *kmsg.ProduceResponseTopic) *[]kmsg.ProduceResponseTopicPartition {
			return &t.Partitions
		})
	case *kmsg.FetchResponse:
		s.fetchResp = keepSpare(s.fetchResp, m, &m.Topics, func(t *kmsg.FetchResponseTopic) *[]kmsg.FetchResponseTopicPartition {
			return &t.Partitions
		})
	case *kmsg.OffsetCommitResponse:
		s.commitResp = keepSpare(s.commitResp, m, &m.Topics, func(t *kmsg.OffsetCommitResponseTopic) *[]kmsg.OffsetCommitResponseTopicPartition {
			return &t.Partitions
		})
	}
}

// keepSpare zeroes *m, all but the capacity of its topics slice, and adds
// it to list. Zeroing matters: kmsg reads only the fields of the message's
// version, so a field of a newer version would otherwise survive. Each
// topic is zeroed too, all but the capacity of its partitions slice
// (parts) while the message's budget of sparePartitions lasts (keepParts).
func keepSpare[M, T, P any](list []*M, m *M, topics *[]T, parts func(*T) *[]P) []*M {
	if len(list) >= spareMessages {
		return list
	}
	t := *topics
	if cap(t) > spareTopics {
		t = nil
	} else {
		budget := sparePartitions
		all := t[:cap(t)]
		for i := range all {
			var ps []P
			ps, budget = keepParts(*parts(&all[i]), budget)
			var zero T
			all[i] = zero // and drop what the old topic points to
			*parts(&all[i]) = ps
		}
		t = t[:0]
	}
	var zero M
	*m = zero
	*topics = t
	return append(list, m)
}

// keepParts empties a topic's partitions for reuse, taking their capacity
// from budget, or drops them when the budget does not have it: the spares
// of many-partition messages would otherwise hold a lot of memory.
func keepParts[P any](ps []P, budget int) ([]P, int) {
	if cap(ps) > budget {
		return nil, budget
	}
	clear(ps[:cap(ps)])
	return ps[:0], budget - cap(ps)
}

// takeSpare pops a spare message from list, reset to its defaults.
func takeSpare[M any, P interface {
	*M
	Default()
}](list *[]P) (P, bool) {
	n := len(*list)
	if n == 0 {
		return nil, false
	}
	m := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	m.Default()
	return m, true
}

// request is kmsg.RequestForKey, with a recycled message when there is one.
func (s *spares) request(key int16) kmsg.Request {
	switch key {
	case 0:
		if m, ok := takeSpare(&s.produceReq); ok {
			return m
		}
	case 1:
		if m, ok := takeSpare(&s.fetchReq); ok {
			return m
		}
	case 8:
		if m, ok := takeSpare(&s.commitReq); ok {
			return m
		}
	}
	return kmsg.RequestForKey(key)
}

// response is kmsg.ResponseForKey, with a recycled message when there is one.
func (s *spares) response(key int16) kmsg.Response {
	switch key {
	case 0:
		if m, ok := takeSpare(&s.produceResp); ok {
			return m
		}
	case 1:
		if m, ok := takeSpare(&s.fetchResp); ok {
			return m
		}
	case 8:
		if m, ok := takeSpare(&s.commitResp); ok {
			return m
		}
	}
	return kmsg.ResponseForKey(key)
}
