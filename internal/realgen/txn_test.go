package realgen

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// checkTxns compares kwire's transactional ids with the transaction
// coordinators' __transaction_state records and logs: per id the
// transactions committed, aborted and aborted by the broker on timeout
// (kwire: no EndTxn within the timeout InitProducerID asked for), and the
// producer id and epoch of the last record. For each id the broker timed
// out, kwire must tell the hanging transaction (hanging_transaction with
// the id) and the last stable offset it held while read_committed
// consumers waited (hanging_transaction on the partition, naming it); an
// id whose transaction a second InitProducerID aborted is a fenced
// instance's, which kwire must tell refused (zombie_producer) when its
// client reported the fence; and one whose client's commit was refused
// PRODUCER_FENCED, a zombie_producer of that EndTxn naming its fencer.
// The coordinator's error answers (checkTxnErrors) must be kwire's.
func checkTxns(t *testing.T, truth Truth, s *correlate.Snapshot) {
	t.Helper()
	kw := map[string]correlate.Transaction{}
	for _, x := range s.Transactions {
		kw[x.TransactionalID] = x
	}
	fenced := map[string]bool{}
	for _, r := range txnReports(truth) {
		if r.Result == "fenced" {
			fenced[r.TransactionalID] = true
		}
	}
	for _, tt := range truth.Transactions {
		x, ok := kw[tt.TransactionalID]
		if !ok {
			t.Errorf("kwire found no transactional id %q", tt.TransactionalID)
			continue
		}
		t.Logf("%s: broker committed %d aborted %d (timed out %d) pid %d epoch %d; kwire committed %d aborted %d timed out %d pid %d epoch %d fenced %d",
			tt.TransactionalID, tt.Committed, tt.Aborted, tt.TimedOut, tt.ProducerID, tt.ProducerEpoch,
			x.Committed, x.Aborted, x.TimedOut, x.ProducerID, x.ProducerEpoch, x.Fenced)
		if x.Committed != int64(tt.Committed) || x.Aborted != int64(tt.Aborted-tt.TimedOut) || x.TimedOut != int64(tt.TimedOut) {
			t.Errorf("%s: kwire committed %d, aborted %d, timed out %d; the broker committed %d, aborted %d of which %d on timeout",
				tt.TransactionalID, x.Committed, x.Aborted, x.TimedOut, tt.Committed, tt.Aborted-tt.TimedOut, tt.TimedOut)
		}
		if x.ProducerID != tt.ProducerID || x.ProducerEpoch != tt.ProducerEpoch {
			t.Errorf("%s: kwire producer id %d epoch %d; the broker's last record %d epoch %d",
				tt.TransactionalID, x.ProducerID, x.ProducerEpoch, tt.ProducerID, tt.ProducerEpoch)
		}
		if x.OpenSince != nil {
			t.Errorf("%s: kwire has a transaction open since %s; the broker ended them all", tt.TransactionalID, x.OpenSince)
		}
		if tt.TimedOut > 0 {
			checkHang(t, tt, s)
		}
		checkHeld(t, tt, x, s)
		if fenced[tt.TransactionalID] && !hasHazard(s, correlate.HazardZombieProducer, tt.TransactionalID, false) {
			t.Errorf("%s: a client was fenced, and kwire told no zombie_producer of it", tt.TransactionalID)
		}
		if !fenced[tt.TransactionalID] && hasHazard(s, correlate.HazardZombieProducer, tt.TransactionalID, false) {
			t.Errorf("%s: zombie_producer, but no client of it was fenced", tt.TransactionalID)
		}
		checkTxnErrors(t, truth, tt, x)
		checkFencedEndTxn(t, truth, tt, s)
	}
}

// txnReport is a txn mode report (java/driver TxnMode).
type txnReport struct {
	ClientID        string `json:"client_id"`
	TransactionalID string `json:"transactional_id"`
	Result, Error   string
}

// txnReports returns the truth's txn reports.
func txnReports(truth Truth) []txnReport {
	var out []txnReport
	for _, raw := range truth.Reports {
		var r struct {
			Kind string
			txnReport
		}
		if json.Unmarshal(raw, &r) == nil && r.Kind == "txn" {
			out = append(out, r.txnReport)
		}
	}
	return out
}

// checkTxnErrors compares kwire's error answers of a transactional id
// with the truth's: the transaction coordinator's, as its log has them
// (AddPartitionsToTxn, EndTxn: exact; truths made before the log was read
// have none), and the Produces refused INVALID_PRODUCER_EPOCH, one per
// report of a client's InvalidProducerEpochException (each client sent
// one record past its fence or timeout).
func checkTxnErrors(t *testing.T, truth Truth, tt TxnTruth, x correlate.Transaction) {
	t.Helper()
	t.Logf("%s: coordinator errors %v; kwire errors %v", tt.TransactionalID, tt.Errors, x.Errors)
	if tt.Errors != nil {
		got := map[string]int{}
		for k, n := range x.Errors {
			if strings.HasPrefix(k, "AddPartitionsToTxn:") || strings.HasPrefix(k, "EndTxn:") {
				got[k] = int(n)
			}
		}
		if d := realkafka.DiffMaps(tt.Errors, got); d != "" {
			t.Errorf("%s: the coordinator's error answers, its log vs kwire (-want +got):\n%s", tt.TransactionalID, d)
		}
	}
	want := 0
	for _, r := range txnReports(truth) {
		if r.TransactionalID == tt.TransactionalID && strings.HasPrefix(r.Error, "InvalidProducerEpochException") {
			want++
		}
	}
	if got := x.Errors["Produce:INVALID_PRODUCER_EPOCH"]; got != int64(want) {
		t.Errorf("%s: kwire has %d Produces refused INVALID_PRODUCER_EPOCH; its clients reported %d", tt.TransactionalID, got, want)
	}
}

// checkFencedEndTxn wants, for each client whose commit the coordinator
// refused PRODUCER_FENCED (its report: fenced, ProducerFencedException),
// a zombie_producer resting on its EndTxn and naming as its fencer the
// client that initialized the id after it and committed.
func checkFencedEndTxn(t *testing.T, truth Truth, tt TxnTruth, s *correlate.Snapshot) {
	t.Helper()
	var zombie, successor string
	for _, r := range txnReports(truth) {
		switch {
		case r.TransactionalID != tt.TransactionalID:
		case r.Result == "fenced" && strings.HasPrefix(r.Error, "ProducerFencedException"):
			zombie = r.ClientID
		case r.Result == "commit" && zombie != "":
			successor = r.ClientID
		}
	}
	if zombie == "" {
		return
	}
	for _, h := range s.Hazards {
		if h.Kind != correlate.HazardZombieProducer || h.TransactionalID != tt.TransactionalID || h.ClientID != zombie {
			continue
		}
		if last := h.Evidence[len(h.Evidence)-1]; last.API != "EndTxn" || h.FencedBy != successor || h.Error != "PRODUCER_FENCED" {
			t.Errorf("%s: zombie_producer of %s rests on %s answered %s, fenced by %q; want its EndTxn answered PRODUCER_FENCED, fenced by %s",
				tt.TransactionalID, zombie, last.API, h.Error, h.FencedBy, successor)
		}
		return
	}
	t.Errorf("%s: %s's commit was refused PRODUCER_FENCED, and kwire told no zombie_producer of it", tt.TransactionalID, zombie)
}

// checkHang wants both hanging_transaction hazards of a transaction the
// broker timed out: the transaction's own and its partitions' held last
// stable offset.
func checkHang(t *testing.T, tt TxnTruth, s *correlate.Snapshot) {
	t.Helper()
	if !hasHazard(s, correlate.HazardHangingTransaction, tt.TransactionalID, false) {
		t.Errorf("%s: the broker aborted it on timeout, and kwire told no hanging_transaction of it", tt.TransactionalID)
	}
	if !hasHazard(s, correlate.HazardHangingTransaction, tt.TransactionalID, true) {
		t.Errorf("%s: kwire told no stuck last stable offset held by it", tt.TransactionalID)
	}
}

// maxHeldSkewMillis is how much shorter than the coordinator's account
// kwire may find the longest hold of a last stable offset: kwire sees it
// from the first read_committed Fetch answered after the transaction's
// first records to the last one before its marker (the consumer's fetches
// wait up to 500 ms), the coordinator from adding the partition to
// completing the abort.
const maxHeldSkewMillis = 2000

// maxAbortSkewMillis is how far kwire's end of a timed-out transaction
// (the answer to its coordinator's WriteTxnMarkers) may be from the
// coordinator's CompleteAbort record, written once the markers are
// answered.
const maxAbortSkewMillis = 250

// checkHeld compares, for a transaction the broker aborted on timeout,
// how long its partitions' last stable offset stayed below the high
// watermark by kwire (StablePartition.MaxStuckMillis) with its time open
// in the coordinator's log (its Ongoing record's start to its
// CompleteAbort): no longer, and at most maxHeldSkewMillis shorter. The
// transaction itself kwire ends at its coordinator's abort markers, so its
// duration (x, the only transaction of the id) is the coordinator's within
// maxAbortSkewMillis, not cut at the timeout.
func checkHeld(t *testing.T, tt TxnTruth, x correlate.Transaction, s *correlate.Snapshot) {
	t.Helper()
	var start, end int64
	for _, r := range tt.Log {
		switch {
		case r.State == "Ongoing" && start == 0:
			start = r.StartMs
		case r.State == "CompleteAbort" && start > 0 && end == 0:
			end = r.UpdateMs
		}
	}
	if tt.TimedOut == 0 || start == 0 || end == 0 {
		return
	}
	held := end - start
	t.Logf("%s: kwire's transaction lasted %d ms, the coordinator's %d ms", tt.TransactionalID, x.MaxDurationMillis, held)
	if d := x.MaxDurationMillis - held; d < -maxAbortSkewMillis || d > maxAbortSkewMillis {
		t.Errorf("%s: kwire's timed-out transaction lasted %d ms; its coordinator's from Ongoing to CompleteAbort %d ms",
			tt.TransactionalID, x.MaxDurationMillis, held)
	}
	for _, r := range tt.Log {
		if r.State != "Ongoing" || r.StartMs != start {
			continue
		}
		for topic, ps := range r.Partitions {
			for _, p := range ps {
				sp := stablePartition(s, topic, p)
				if sp == nil {
					t.Errorf("%s: kwire has no last stable offset of %s/%d", tt.TransactionalID, topic, p)
					continue
				}
				t.Logf("%s/%d: kwire held %d ms, the coordinator's transaction open %d ms", topic, p, sp.MaxStuckMillis, held)
				if sp.MaxStuckMillis > held || held-sp.MaxStuckMillis > maxHeldSkewMillis {
					t.Errorf("%s/%d: kwire's last stable offset held %d ms; %s was open %d ms by its coordinator",
						topic, p, sp.MaxStuckMillis, tt.TransactionalID, held)
				}
			}
		}
	}
}

func stablePartition(s *correlate.Snapshot, topic string, p int32) *correlate.StablePartition {
	for i := range s.StablePartitions {
		if sp := &s.StablePartitions[i]; sp.Topic == topic && sp.Partition == p {
			return sp
		}
	}
	return nil
}

// hasHazard says whether s has a hazard of kind naming transactional id
// id, on a partition (the last stable offset) or not.
func hasHazard(s *correlate.Snapshot, kind, id string, partition bool) bool {
	for _, h := range s.Hazards {
		if h.Kind == kind && h.TransactionalID == id && (h.Topic != "") == partition {
			return true
		}
	}
	return false
}
