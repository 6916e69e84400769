package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
)

// TxnTruth is one transactional id as its transaction coordinator
// recorded it.
type TxnTruth struct {
	TransactionalID string `json:"transactional_id"`
	// Log is its __transaction_state records (Kafka's
	// TransactionLogMessageFormatter), in log order.
	Log []TxnStateTruth `json:"log"`
	// Committed and Aborted count the CompleteCommit and CompleteAbort
	// records: the transactions that ended so.
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
	// TimedOut counts the coordinator's "Completed rollback of ongoing
	// transaction for transactionalId X due to timeout" log lines: aborts
	// (in Aborted) the broker made itself, with no EndTxn.
	TimedOut int `json:"timed_out"`
	// ProducerID and ProducerEpoch are the last record's.
	ProducerID    int64 `json:"producer_id"`
	ProducerEpoch int16 `json:"producer_epoch"`
	// Errors counts the transaction coordinator's error answers by
	// "API:ERROR" (kmsg's API names), from its DEBUG log lines: every
	// AddPartitionsToTxn refused (the producer's, or under transactions
	// v2 a partition leader's on its behalf) and every EndTxn refused
	// before its append to the transaction log.
	// Empty, not absent, when there were none (absent: a truth made
	// before the log was read).
	Errors map[string]int `json:"errors"`
}

// TxnStateTruth is one TransactionLogValue record.
type TxnStateTruth struct {
	State         string             `json:"state"` // Empty, Ongoing, PrepareCommit, CompleteAbort...
	ProducerID    int64              `json:"producer_id"`
	ProducerEpoch int16              `json:"producer_epoch"`
	PrevID        int64              `json:"previous_producer_id"`
	NextID        int64              `json:"next_producer_id"`
	TimeoutMs     int32              `json:"transaction_timeout_ms"`
	Partitions    map[string][]int32 `json:"partitions,omitempty"`
	StartMs       int64              `json:"start_timestamp_ms"`
	UpdateMs      int64              `json:"last_update_timestamp_ms"`
	Version       int8               `json:"client_transaction_version"`
}

var txnTimeoutRE = regexp.MustCompile(`Completed rollback of ongoing transaction for transactionalId (\S+) due to timeout`)

// txnErrorREs are the transaction coordinator's log lines of a refused
// request, by API: error, then transactional id (Kafka 4.4's
// TransactionCoordinator, kafka.coordinator.transaction at DEBUG; its
// handleAddPartitionsToTransaction logs NONE too, for partitions already
// in the transaction).
var txnErrorREs = map[string]*regexp.Regexp{
	"AddPartitionsToTxn": regexp.MustCompile(`Returning (\S+) error code to client for (\S+)'s AddPartitions request \(`),
	"EndTxn":             regexp.MustCompile(`returning (\S+) error to client for (\S+)'s EndTransaction request`),
}

// txnLogErrors counts a broker log's txnErrorREs lines: transactional id
// -> "API:ERROR" -> lines.
func txnLogErrors(log []byte) map[string]map[string]int {
	out := map[string]map[string]int{}
	for api, re := range txnErrorREs {
		for _, m := range re.FindAllSubmatch(log, -1) {
			if string(m[1]) == "NONE" {
				continue
			}
			id := string(m[2])
			if out[id] == nil {
				out[id] = map[string]int{}
			}
			out[id][api+":"+string(m[1])]++
		}
	}
	return out
}

// transactions reads ids' truth from __transaction_state and the
// coordinators' logs.
func (e *Env) transactions(ctx context.Context, ids []string) ([]TxnTruth, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	fs, err := e.consumeTopic(ctx, "__transaction_state", "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter")
	if err != nil {
		return nil, err
	}
	e.Logf("__transaction_state: %d records", len(fs))
	timedOut := map[string]int{}
	errs := map[string]map[string]int{}
	for _, id := range e.C.Nodes() {
		b, err := os.ReadFile(e.C.LogFile(id))
		if err != nil {
			return nil, err
		}
		for _, m := range txnTimeoutRE.FindAllStringSubmatch(string(b), -1) {
			timedOut[m[1]]++
		}
		for id, m := range txnLogErrors(b) {
			if errs[id] == nil {
				errs[id] = map[string]int{}
			}
			for k, n := range m {
				errs[id][k] += n
			}
		}
	}
	var out []TxnTruth
	for _, id := range ids {
		tt := TxnTruth{TransactionalID: id, TimedOut: timedOut[id], ProducerID: -1, ProducerEpoch: -1, Errors: errs[id]}
		if tt.Errors == nil {
			tt.Errors = map[string]int{}
		}
		for _, f := range fs {
			var k struct {
				TransactionalID string `json:"transactionalId"`
			}
			if json.Unmarshal(f.Key.Data, &k) != nil || k.TransactionalID != id || f.Value == nil {
				continue
			}
			var v struct {
				ProducerID                       int64  `json:"producerId"`
				PreviousProducerID               int64  `json:"previousProducerId"`
				NextProducerID                   int64  `json:"nextProducerId"`
				ProducerEpoch                    int16  `json:"producerEpoch"`
				TransactionTimeoutMs             int32  `json:"transactionTimeoutMs"`
				TransactionStatus                string `json:"transactionStatus"`
				TransactionLastUpdateTimestampMs int64  `json:"transactionLastUpdateTimestampMs"`
				TransactionStartTimestampMs      int64  `json:"transactionStartTimestampMs"`
				ClientTransactionVersion         int8   `json:"clientTransactionVersion"`
				TransactionPartitions            []struct {
					Topic        string  `json:"topic"`
					PartitionIDs []int32 `json:"partitionIds"`
				} `json:"transactionPartitions"`
			}
			if err := json.Unmarshal(f.Value.Data, &v); err != nil {
				return nil, fmt.Errorf("transaction log record %s: %w", f.Value.Data, err)
			}
			s := TxnStateTruth{State: v.TransactionStatus, ProducerID: v.ProducerID, ProducerEpoch: v.ProducerEpoch,
				PrevID: v.PreviousProducerID, NextID: v.NextProducerID, TimeoutMs: v.TransactionTimeoutMs,
				StartMs: v.TransactionStartTimestampMs, UpdateMs: v.TransactionLastUpdateTimestampMs, Version: v.ClientTransactionVersion}
			for _, p := range v.TransactionPartitions {
				if s.Partitions == nil {
					s.Partitions = map[string][]int32{}
				}
				ps := append(s.Partitions[p.Topic], p.PartitionIDs...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				s.Partitions[p.Topic] = ps
			}
			switch s.State {
			case "CompleteCommit":
				tt.Committed++
			case "CompleteAbort":
				tt.Aborted++
			}
			tt.ProducerID, tt.ProducerEpoch = s.ProducerID, s.ProducerEpoch
			tt.Log = append(tt.Log, s)
		}
		out = append(out, tt)
	}
	return out, nil
}
