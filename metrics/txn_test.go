package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// midHandler takes the correlator's snapshot once capture time passes at.
type midHandler struct {
	corr  *correlate.Correlator
	first time.Time
	after time.Duration
	mid   *correlate.Snapshot
}

func (h *midHandler) Exchange(e *decode.Exchange) {
	h.corr.Exchange(e)
	if h.first.IsZero() {
		h.first = e.ReqTime
	}
	if h.mid == nil && e.ReqTime.Sub(h.first) > h.after {
		h.mid = h.corr.Snapshot()
	}
}
func (h *midHandler) Anomaly(*decode.Anomaly) {}

// TestTransactionMetrics: the transaction metrics agree with the
// snapshots they come from, for real captures (kgo against kfake): mid-way
// through h_hanging_lso a transaction is open and its partition's last
// stable offset stuck; at the end of txn_read_committed its transactions
// are counted by outcome; without partition labels the partitions of a
// topic are summed.
func TestTransactionMetrics(t *testing.T) {
	h := &midHandler{corr: correlate.New(nil, nil), after: 15 * time.Second}
	src, err := capture.OpenFiles([]string{"../testdata/h_hanging_lso.pcapng"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(context.Background(), decode.New(h, nil)); err != nil {
		t.Fatal(err)
	}
	if h.mid == nil || len(h.mid.Transactions) != 1 || h.mid.Transactions[0].OpenSince == nil || len(h.mid.StablePartitions) != 1 {
		t.Fatalf("15s into h_hanging_lso: want one open transaction and one transactional partition, got %+v", h.mid)
	}
	x := New(nil)
	x.Snapshot(h.mid)
	m := scrape(t, x)
	tx, sp := h.mid.Transactions[0], h.mid.StablePartitions[0]
	id := fmt.Sprintf("{transactional_id=%q}", tx.TransactionalID)
	part := fmt.Sprintf("{partition=\"%d\",topic=%q}", sp.Partition, sp.Topic)
	want := map[string]float64{
		"kwire_transaction_open" + id:                       1,
		"kwire_transaction_open_seconds" + id:               h.mid.Time.Sub(tx.OpenSince.Time).Seconds(),
		"kwire_transaction_producer_epoch" + id:             float64(tx.ProducerEpoch),
		"kwire_last_stable_offset" + part:                   float64(sp.LastStable),
		"kwire_unstable_offsets" + part:                     float64(sp.Unstable),
		"kwire_last_stable_offset_stuck_seconds" + part:     float64(sp.StuckMillis) / 1000,
		"kwire_last_stable_offset_max_stuck_seconds" + part: float64(sp.MaxStuckMillis) / 1000,
		"kwire_transaction_fenced_requests_total" + id:      0,
		fmt.Sprintf("kwire_transactions_total{outcome=\"timed_out\",transactional_id=%q}", tx.TransactionalID): 0,
	}
	if sp.StuckMillis == 0 || sp.Unstable == 0 {
		t.Errorf("15s in, the partition is not stuck: %+v", sp)
	}
	checkAll(t, m, want)

	p := runCaptureOf(t, "../testdata/txn_read_committed.pcapng", nil)
	m = scrape(t, p.x)
	want = map[string]float64{}
	for _, tx := range p.snap.Transactions {
		for outcome, n := range map[string]int64{"committed": tx.Committed, "aborted": tx.Aborted, "timed_out": tx.TimedOut} {
			want[fmt.Sprintf("kwire_transactions_total{outcome=%q,transactional_id=%q}", outcome, tx.TransactionalID)] = float64(n)
		}
		want[fmt.Sprintf("kwire_transaction_open{transactional_id=%q}", tx.TransactionalID)] = 0
	}
	if len(want) == 0 {
		t.Fatal("no transactional id in txn_read_committed")
	}
	checkAll(t, m, want)

	p = runCaptureOf(t, "../testdata/txn_read_committed.pcapng", &Options{NoPartitionLabels: true})
	m = scrape(t, p.x)
	sums := map[string]float64{}
	for _, sp := range p.snap.StablePartitions {
		sums[fmt.Sprintf("kwire_unstable_offsets{topic=%q}", sp.Topic)] += float64(sp.Unstable)
	}
	checkAll(t, m, sums)
	for k := range m {
		if len(k) > len("kwire_last_stable_offset{") && k[:len("kwire_last_stable_offset{")] == "kwire_last_stable_offset{" {
			t.Errorf("%s without partition labels: an offset summed over partitions means nothing", k)
		}
	}
}

func checkAll(t *testing.T, m, want map[string]float64) {
	t.Helper()
	for k, w := range want {
		if got, ok := m[k]; !ok || got != w {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, w)
		}
	}
}
