package correlate

import "time"

// Transaction is one transactional id in a Snapshot: its current producer
// instance and what its transactions did in the capture.
type Transaction struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	ClientID        string `json:"client_id"`
	ClientHost      string `json:"client_host"`
	Coordinator     string `json:"coordinator,omitempty"`
	// TimeoutMillis is the transaction timeout (0: not in the capture).
	TimeoutMillis int32 `json:"transaction_timeout_ms,omitempty"`
	// Committed, Aborted and TimedOut count the transactions that ended
	// so (TimedOut: no EndTxn within the timeout); Fenced the requests of
	// fenced instances refused (zombie_producer).
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	TimedOut  int64 `json:"timed_out,omitempty"`
	Fenced    int64 `json:"fenced,omitempty"`
	// MaxDurationMillis and TotalDurationMillis are over the ended
	// transactions.
	MaxDurationMillis   int64 `json:"max_duration_ms"`
	TotalDurationMillis int64 `json:"total_duration_ms"`
	// OpenSince and OpenPartitions describe a transaction still open at
	// the end of the input.
	OpenSince      *time.Time         `json:"open_since,omitempty"`
	OpenPartitions map[string][]int32 `json:"open_partitions,omitempty"`
}

// txnSnapshots returns the transactional ids, sorted.
func (c *Correlator) txnSnapshots() []Transaction {
	var out []Transaction
	for _, t := range c.sortedTxns() {
		s := Transaction{TransactionalID: t.id, ProducerID: t.producerID, ProducerEpoch: t.epoch, ClientID: t.client.clientID,
			ClientHost: t.client.host, Coordinator: t.coordinator, TimeoutMillis: t.timeoutMillis, Committed: t.committed,
			Aborted: t.aborted, TimedOut: t.timedOut, Fenced: t.fenced, MaxDurationMillis: t.durMax, TotalDurationMillis: t.durTotal}
		if t.open {
			s.OpenSince, s.OpenPartitions = timePtr(t.began), partsMap(t.parts)
		}
		out = append(out, s)
	}
	return out
}
