package wire

// read lists the API keys whose bodies the correlator reads: only those
// are published. Any other body (SASL, delegation tokens, broker-to-broker
// APIs...) is withheld: the aggregator sees the exchange, its key,
// version, times and sizes, and kmsg's default message.
var read = [...]bool{
	0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 10: true, 11: true,
	12: true, 13: true, 14: true, 15: true, 16: true, 68: true,
	// Transactions: InitProducerID, AddPartitionsToTxn, AddOffsetsToTxn,
	// EndTxn, TxnOffsetCommit.
	22: true, 24: true, 25: true, 26: true, 28: true,
}

// publishable returns m if its body may be published, nil for a withheld
// body. Record bytes (a Produce request's records; a Fetch response's
// record batches, which go as segments) are never in a compact body
// (compact.go).
func publishable(m message) message {
	if k := m.Key(); k < 0 || int(k) >= len(read) || !read[k] {
		return nil
	}
	return m
}

// message is what kmsg's requests and responses have in common.
type message interface {
	Key() int16
	MaxVersion() int16
	SetVersion(int16)
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}
