package wire

import "github.com/twmb/franz-go/pkg/kmsg"

// read lists the API keys whose bodies the correlator reads: only those
// are published. Any other body (SASL, delegation tokens, broker-to-broker
// APIs...) is withheld: the aggregator sees the exchange, its key,
// version, times and sizes, and kmsg's default message.
var read = [...]bool{
	0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 10: true, 11: true,
	12: true, 13: true, 14: true, 15: true, 16: true, 68: true,
	// Transactions: InitProducerID, AddPartitionsToTxn, AddOffsetsToTxn,
	// EndTxn, WriteTxnMarkers (broker to broker: producer ids, epochs and
	// partitions only), TxnOffsetCommit.
	22: true, 24: true, 25: true, 26: true, 27: true, 28: true,
	// Share groups (KIP-932): ShareGroupHeartbeat, ShareFetch (its
	// answer without its records), ShareAcknowledge.
	76: true, 78: true, 79: true,
}

// publishable returns m if its body may be published, nil for a withheld
// body. Record bytes (a Produce request's records; a Fetch response's
// record batches, which go as segments) are never in a compact body
// (compact.go); a ShareFetch answer goes without its records
// (shareFetchWithoutRecords).
func publishable(m message) message {
	if k := m.Key(); k < 0 || int(k) >= len(read) || !read[k] {
		return nil
	}
	if r, ok := m.(*kmsg.ShareFetchResponse); ok {
		return shareFetchWithoutRecords(r)
	}
	return m
}

// shareFetchWithoutRecords returns a copy of r whose partitions have no
// record bytes: the correlator reads only the acquired ranges, and record
// data is never published. r is not modified.
func shareFetchWithoutRecords(r *kmsg.ShareFetchResponse) *kmsg.ShareFetchResponse {
	cp := *r
	cp.Topics = make([]kmsg.ShareFetchResponseTopic, len(r.Topics))
	for i, t := range r.Topics {
		t.Partitions = append([]kmsg.ShareFetchResponseTopicPartition(nil), t.Partitions...)
		for j := range t.Partitions {
			t.Partitions[j].Records = nil
		}
		cp.Topics[i] = t
	}
	return &cp
}

// message is what kmsg's requests and responses have in common.
type message interface {
	Key() int16
	MaxVersion() int16
	SetVersion(int16)
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}
