package correlate

import "maps"

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
	// EndedUnseen counts the accepted EndTxns (in Committed and Aborted)
	// whose transaction's begin the capture did not show before them;
	// AwaitingEndTxn the transactions a later epoch showed ended whose
	// EndTxn never came (lost: counted in neither).
	EndedUnseen    int64 `json:"ended_unseen,omitempty"`
	AwaitingEndTxn int64 `json:"awaiting_end_txn,omitempty"`
	// Errors counts the brokers' error answers to the id's requests by
	// "API:ERROR_NAME": its producer's (InitProducerID, Produce per
	// partition, AddOffsetsToTxn, TxnOffsetCommit per partition, EndTxn)
	// and, under transactions v2 (KIP-890), its partition leaders'
	// AddPartitionsToTxn on its behalf. CONCURRENT_TRANSACTIONS there
	// (the previous transaction's markers still being written) is
	// retried by the leader, and by the client on InitProducerID.
	Errors map[string]int64 `json:"errors,omitempty"`
	// MaxDurationMillis and TotalDurationMillis are over the ended
	// transactions.
	MaxDurationMillis   int64 `json:"max_duration_ms"`
	TotalDurationMillis int64 `json:"total_duration_ms"`
	// OpenSince and OpenPartitions describe a transaction still open at
	// the end of the input.
	OpenSince      *Time              `json:"open_since,omitempty"`
	OpenPartitions map[string][]int32 `json:"open_partitions,omitempty"`
}

// txnSnapshots returns the transactional ids, sorted.
func (c *Correlator) txnSnapshots() []Transaction {
	var out []Transaction
	for _, t := range c.sortedTxns() {
		s := Transaction{TransactionalID: t.id, ProducerID: t.producerID, ProducerEpoch: t.epoch, ClientID: t.client.clientID,
			ClientHost: t.client.host, Coordinator: t.coordinator, TimeoutMillis: t.timeoutMillis, Committed: t.committed,
			Aborted: t.aborted, TimedOut: t.timedOut, Fenced: t.fenced, MaxDurationMillis: t.durMax, TotalDurationMillis: t.durTotal,
			EndedUnseen: t.unseen, AwaitingEndTxn: int64(len(t.pending)), Errors: maps.Clone(t.errors)}
		if t.open {
			s.OpenSince, s.OpenPartitions = timePtr(t.began), partsMap(t.parts)
		}
		out = append(out, s)
	}
	return out
}

// StablePartition is one transactional partition in a Snapshot: its last
// stable offset (KIP-98) against its high watermark, as the last Fetch
// response with it showed them. Listed: partitions fetched read_committed,
// or seen with a transaction marker, an aborted transaction or a last
// stable offset below the high watermark.
type StablePartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	LastStable    int64  `json:"last_stable_offset"`
	HighWatermark int64  `json:"high_watermark"`
	// Unstable is HighWatermark - LastStable: offsets that open
	// transactions hold back from read_committed consumers.
	Unstable int64 `json:"unstable"`
	// StuckSince is when the last stable offset took its value, while it
	// is below the high watermark; StuckMillis how long it had not moved
	// at the last read_committed Fetch; MaxStuckMillis the longest it
	// stayed below the high watermark unmoved (this one included).
	StuckSince     *Time `json:"stuck_since,omitempty"`
	StuckMillis    int64 `json:"stuck_ms,omitempty"`
	MaxStuckMillis int64 `json:"max_stuck_ms"`
	// HeldBy is the transactional id of the open transaction holding the
	// partition, when the capture shows it.
	HeldBy string `json:"held_by,omitempty"`
	// ReadCommittedFetches counts read_committed Fetch responses with the
	// partition in their request or session; TransactionMarkers and
	// AbortedTransactions the markers (control batches) and aborted
	// transactions the responses showed, each once.
	ReadCommittedFetches int64 `json:"read_committed_fetches"`
	TransactionMarkers   int64 `json:"transaction_markers"`
	AbortedTransactions  int64 `json:"aborted_transactions"`
}

// stableSnapshots returns the transactional partitions, sorted.
func (c *Correlator) stableSnapshots() []StablePartition {
	var out []StablePartition
	for _, p := range sortedTPs(c.stable) {
		s := c.stable[p]
		o := StablePartition{Topic: p.topic, Partition: p.partition, LastStable: s.lso, HighWatermark: s.hw,
			Unstable: max(s.hw-s.lso, 0), MaxStuckMillis: s.maxStuck, ReadCommittedFetches: s.rcFetches,
			TransactionMarkers: s.markers, AbortedTransactions: s.aborted}
		if s.lso < s.hw {
			o.StuckSince, o.StuckMillis = timePtr(s.since), max(millis(s.last.Sub(s.since)), 0)
			o.MaxStuckMillis = max(o.MaxStuckMillis, o.StuckMillis)
			if t := c.txnHolding(p); t != nil {
				o.HeldBy = t.id
			}
		}
		out = append(out, o)
	}
	return out
}
