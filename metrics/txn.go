package metrics

import (
	"strconv"

	"github.com/kwire/kwire/correlate"
)

// Transactions (KIP-98): per transactional id, how its transactions ended
// and the one open now; per transactional partition, the last stable
// offset against the high watermark. Taken from the snapshot, like the
// group state.

// txnRow is one transactional id.
type txnRow struct {
	id                                   string
	epoch                                int16
	committed, aborted, timedOut, fenced int64
	openSeconds                          float64 // -1: none open
}

// stableRow is one transactional partition (or, without partition labels,
// one topic: unstable summed, stuck the longest).
type stableRow struct {
	topic           string
	partition       int32
	lso, unstable   int64 // lso -1 when aggregated
	stuck, maxStuck float64
}

// txnRows makes the rows of s's transactional ids within the cap on
// their label (Options.MaxTransactionalIDs): any client gets a
// FindCoordinator answer for any id, so ids with a producer or a
// transaction take labels first, ids only named a tenth of them; the
// rest are one transactional_id="other" row, summed. It returns how many
// ids were folded.
func (c *stateCollector) txnRows(s *correlate.Snapshot) ([]txnRow, int) {
	out := make([]txnRow, 0, len(s.Transactions))
	folded := 0
	for _, real := range []bool{true, false} {
		for i := range s.Transactions {
			t := &s.Transactions[i]
			if realTxn(t) != real {
				continue
			}
			r := txnRow{id: t.TransactionalID, epoch: t.ProducerEpoch, committed: t.Committed, aborted: t.Aborted,
				timedOut: t.TimedOut, fenced: t.Fenced, openSeconds: -1}
			if t.OpenSince != nil {
				r.openSeconds = max(s.Time.Sub(t.OpenSince.Time).Seconds(), 0)
			}
			if _, f := c.txnIDs.label(t.TransactionalID, real); f {
				r.id, r.epoch = other, -1
				folded++
			}
			out = append(out, r)
		}
	}
	return mergeRows(out, func(r *txnRow) string { return r.id }, func(into, r *txnRow) {
		into.committed += r.committed
		into.aborted += r.aborted
		into.timedOut += r.timedOut
		into.fenced += r.fenced
		into.openSeconds = max(into.openSeconds, r.openSeconds) // the oldest open one
	}), folded
}

// realTxn reports whether t has had a producer id or a transaction: more
// than a name in a FindCoordinator answer.
func realTxn(t *correlate.Transaction) bool {
	return t.ProducerID >= 0 || t.OpenSince != nil || t.Committed+t.Aborted+t.TimedOut+t.Fenced > 0
}

func (c *stateCollector) stableRows(s *correlate.Snapshot) []stableRow {
	var out []stableRow
	at := map[string]int{}
	for _, p := range s.StablePartitions {
		r := stableRow{topic: p.Topic, partition: p.Partition, lso: p.LastStable, unstable: p.Unstable,
			stuck: float64(p.StuckMillis) / 1000, maxStuck: float64(p.MaxStuckMillis) / 1000}
		if len(c.partLabels) == 3 {
			out = append(out, r)
			continue
		}
		i, ok := at[p.Topic]
		if !ok {
			at[p.Topic] = len(out)
			r.lso = -1
			out = append(out, r)
			continue
		}
		o := &out[i]
		o.unstable += r.unstable
		o.stuck, o.maxStuck = max(o.stuck, r.stuck), max(o.maxStuck, r.maxStuck)
	}
	return out
}

// collectTxn exports the transactions' rows through Collect's gauge
// and count.
func (c *stateCollector) collectTxn(gauge, count func(name string, v float64, labels ...string)) {
	for _, t := range c.txns {
		for _, o := range []struct {
			outcome string
			n       int64
		}{{"committed", t.committed}, {"aborted", t.aborted}, {"timed_out", t.timedOut}} {
			count("kwire_transactions_total", float64(o.n), t.id, o.outcome)
		}
		count("kwire_transaction_fenced_requests_total", float64(t.fenced), t.id)
		open := 0.0
		if t.openSeconds >= 0 {
			open = 1
			gauge("kwire_transaction_open_seconds", t.openSeconds, t.id)
		}
		gauge("kwire_transaction_open", open, t.id)
		if t.epoch >= 0 {
			gauge("kwire_transaction_producer_epoch", float64(t.epoch), t.id)
		}
	}
	for _, p := range c.stable {
		labels := []string{p.topic}
		if len(c.partLabels) == 3 {
			labels = append(labels, strconv.Itoa(int(p.partition)))
		}
		if p.lso >= 0 {
			gauge("kwire_last_stable_offset", float64(p.lso), labels...)
		}
		gauge("kwire_unstable_offsets", float64(p.unstable), labels...)
		gauge("kwire_last_stable_offset_stuck_seconds", p.stuck, labels...)
		gauge("kwire_last_stable_offset_max_stuck_seconds", p.maxStuck, labels...)
	}
}
