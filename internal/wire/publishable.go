package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// read lists the API keys whose bodies the correlator reads: only those
// are published. Any other body (SASL, delegation tokens, transactions,
// broker-to-broker APIs...) is withheld: the aggregator sees the
// exchange, its key, version, times and sizes, and kmsg's default message.
var read = map[int16]bool{
	0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 10: true, 11: true,
	12: true, 13: true, 14: true, 15: true, 16: true, 68: true,
}

// publishable returns m if its body may be published, nil for a withheld
// body. Record bytes (a Produce request's records; a Fetch response's
// record batches, which go as segments) are left out when it is encoded
// (Encoder.appendBody).
func publishable(m message) message {
	if !read[m.Key()] {
		return nil
	}
	return m
}

// appendBody appends m encoded at its version, without its record bytes:
// they are set aside for the encoding and put back, so that m is as it
// was when appendBody returns, without copying m (an agent encodes every
// Produce and Fetch it sees).
func (e *Encoder) appendBody(m message) {
	saved := e.saved[:0]
	switch r := m.(type) {
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				saved = append(saved, p.Records)
				p.Records = nil
			}
		}
		e.tmp = m.AppendTo(e.tmp[:0])
		k := 0
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].Records = saved[k]
				k++
			}
		}
	case *kmsg.FetchResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				saved = append(saved, p.RecordBatches)
				p.RecordBatches = nil
			}
		}
		e.tmp = m.AppendTo(e.tmp[:0])
		k := 0
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].RecordBatches = saved[k]
				k++
			}
		}
	default:
		e.tmp = m.AppendTo(e.tmp[:0])
	}
	clear(saved) // no reference to the caller's bytes after the call
	e.saved = saved[:0]
}

// message is what kmsg's requests and responses have in common.
type message interface {
	Key() int16
	MaxVersion() int16
	SetVersion(int16)
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}
