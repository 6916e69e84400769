package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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

func (c *stateCollector) defTxn(def func(name, help string, labels ...string)) {
	def("transactions_total", "Transactions of a transactional id that ended, by outcome: committed, aborted (EndTxn, or a new "+
		"InitProducerID), timed_out (no EndTxn within the transaction timeout).", "transactional_id", "outcome")
	def("transaction_fenced_requests_total", "Requests of fenced instances of a transactional id refused (zombie_producer).", "transactional_id")
	def("transaction_open", "1 while a transactional id has a transaction open, else 0.", "transactional_id")
	def("transaction_open_seconds", "Age of a transactional id's open transaction, by capture time.", "transactional_id")
	def("transaction_producer_epoch", "Latest producer epoch of a transactional id.", "transactional_id")
	labels := c.partLabels[1:] // topic[, partition]
	def("last_stable_offset", "Last stable offset of a transactional partition in the last Fetch response with it.", labels...)
	def("unstable_offsets", "High watermark minus last stable offset of a transactional partition: offsets open "+
		"transactions hold back from read_committed consumers (summed without partition labels).", labels...)
	def("last_stable_offset_stuck_seconds", "How long a transactional partition's last stable offset has stayed below its "+
		"high watermark unmoved (0 when it is at it; the longest without partition labels).", labels...)
	def("last_stable_offset_max_stuck_seconds", "The longest a transactional partition's last stable offset stayed below its "+
		"high watermark unmoved.", labels...)
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
				r.openSeconds = max(s.Time.Sub(*t.OpenSince).Seconds(), 0)
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

func (c *stateCollector) collectTxn(ch chan<- prometheus.Metric) {
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	for _, t := range c.txns {
		for _, o := range []struct {
			outcome string
			n       int64
		}{{"committed", t.committed}, {"aborted", t.aborted}, {"timed_out", t.timedOut}} {
			ch <- prometheus.MustNewConstMetric(c.descs["transactions_total"], prometheus.CounterValue, float64(o.n), t.id, o.outcome)
		}
		ch <- prometheus.MustNewConstMetric(c.descs["transaction_fenced_requests_total"], prometheus.CounterValue, float64(t.fenced), t.id)
		open := 0.0
		if t.openSeconds >= 0 {
			open = 1
			gauge("transaction_open_seconds", t.openSeconds, t.id)
		}
		gauge("transaction_open", open, t.id)
		if t.epoch >= 0 {
			gauge("transaction_producer_epoch", float64(t.epoch), t.id)
		}
	}
	for _, p := range c.stable {
		labels := []string{p.topic}
		if len(c.partLabels) == 3 {
			labels = append(labels, strconv.Itoa(int(p.partition)))
		}
		if p.lso >= 0 {
			gauge("last_stable_offset", float64(p.lso), labels...)
		}
		gauge("unstable_offsets", float64(p.unstable), labels...)
		gauge("last_stable_offset_stuck_seconds", p.stuck, labels...)
		gauge("last_stable_offset_max_stuck_seconds", p.maxStuck, labels...)
	}
}
