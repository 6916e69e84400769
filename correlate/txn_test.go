package correlate

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// txnSteps lists each transactional id's transaction events of rec as
// "client action[:ended_by][ group]" (producer ids and the partitions the
// sticky partitioner picked vary from run to run; the steps do not).
func txnSteps(rec *recorder) map[string][]string {
	out := map[string][]string{}
	for _, ev := range rec.events {
		te, ok := ev.(*TransactionEvent)
		if !ok {
			continue
		}
		s := te.ClientID + " " + te.Action
		if te.EndedBy != "" {
			s += ":" + te.EndedBy
		}
		if te.Group != "" {
			s += " " + te.Group
		}
		out[te.TransactionalID] = append(out[te.TransactionalID], s)
	}
	return out
}

// TestTransactionEvents: the transaction events of the generator's
// transactional captures (real kgo producers against kfake) follow each
// transactional id through instances, epochs and brokers.
func TestTransactionEvents(t *testing.T) {
	committed := func(client string, extra ...string) []string {
		return append([]string{client + " begin", client + " partitions_added"}, append(extra, client+" commit:end_txn")...)
	}
	tests := []struct {
		name string
		file string
		want map[string][]string
	}{
		{
			name: "clean: TV2 producer with an abort, TV1 consume-transform-produce",
			file: "txn_clean.pcapng",
			want: map[string][]string{
				"txc-producer-1": slices.Concat([]string{"txc-producer init"}, committed("txc-producer"), committed("txc-producer"),
					[]string{"txc-producer begin", "txc-producer partitions_added", "txc-producer abort:end_txn"}, committed("txc-producer")),
				"txc-etl-1": slices.Concat([]string{"txc-etl init"}, committed("txc-etl", "txc-etl offsets_added txc-etl")),
			},
		},
		{
			name: "zombie: a second instance takes the transactional id over",
			file: "h_zombie_producer.pcapng",
			want: map[string][]string{
				"txz-1": slices.Concat([]string{"txz-producer-a init"}, committed("txz-producer-a"), []string{"txz-producer-b init"},
					committed("txz-producer-b"), committed("txz-producer-b")),
			},
		},
		{
			name: "hanging: killed mid-transaction, aborted at its timeout",
			file: "h_hanging_transaction.pcapng",
			want: map[string][]string{
				"txh-1": {"txh-producer init", "txh-producer begin", "txh-producer partitions_added", "txh-producer abort:timeout"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rec := analyze(t, tt.file)
			got := txnSteps(rec)
			for _, id := range sortedKeys(mergeKeys(tt.want, got)) {
				if w, g := tt.want[id], got[id]; !reflect.DeepEqual(w, g) {
					t.Errorf("transactional id %q steps:\n-want %q\n+got  %q", id, w, g)
				}
			}
			for _, ev := range rec.events {
				te, ok := ev.(*TransactionEvent)
				if !ok || (te.Action != TxnCommit && te.Action != TxnAbort) {
					continue
				}
				if te.DurationMillis == nil || te.Began == nil || len(te.Partitions) == 0 || te.Coordinator == "" {
					t.Errorf("%s %s of %s: duration, begin, partitions or coordinator missing: %+v", te.Action, te.EndedBy, te.TransactionalID, te)
				}
				if te.EndedBy == TxnEndedByTimeout && (*te.DurationMillis != 3000 || te.TimeoutMillis != 3000) {
					t.Errorf("timed out after %dms with timeout %dms, want 3000 both", *te.DurationMillis, te.TimeoutMillis)
				}
			}
		})
	}
}

// TestZombieProducerNamesItsFencer: the zombie_producer hazard names the
// InitProducerID that fenced it (client, epoch) as evidence, and the
// refused epoch is older.
func TestZombieProducerNamesItsFencer(t *testing.T) {
	_, rec := analyze(t, "h_zombie_producer.pcapng")
	var zs []*HazardEvent
	for _, h := range hazardEvents(rec) {
		if h.Kind == HazardZombieProducer {
			zs = append(zs, h)
		}
	}
	if len(zs) != 1 {
		t.Fatalf("%d zombie_producer hazards, want 1", len(zs))
	}
	z := zs[0]
	if z.ClientID != "txz-producer-a" || z.FencedBy != "txz-producer-b" || z.TransactionalID != "txz-1" {
		t.Errorf("client %q fenced by %q, transactional id %q; want txz-producer-a, txz-producer-b, txz-1", z.ClientID, z.FencedBy, z.TransactionalID)
	}
	if z.ProducerEpoch == nil || z.CurrentEpoch == nil || *z.ProducerEpoch >= *z.CurrentEpoch {
		t.Errorf("refused epoch %v not older than the fencing epoch %v", z.ProducerEpoch, z.CurrentEpoch)
	}
	if len(z.Evidence) != 2 || z.Evidence[0].API != "InitProducerID" || !strings.Contains(z.Summary, "txz-producer-b") {
		t.Errorf("evidence %+v, summary %q: want the fencing InitProducerID first", z.Evidence, z.Summary)
	}
}

func mergeKeys(a, b map[string][]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestTransactionSnapshot: the summary counts each transactional id's
// transactions by how they ended.
func TestTransactionSnapshot(t *testing.T) {
	tests := []struct {
		file string
		want map[string][4]int64 // committed, aborted, timed out, open (1)
	}{
		{"txn_clean.pcapng", map[string][4]int64{"txc-producer-1": {3, 1, 0, 0}, "txc-etl-1": {1, 0, 0, 0}}},
		{"h_hanging_transaction.pcapng", map[string][4]int64{"txh-1": {0, 0, 1, 0}}},
		// Aborted; or, when the capture holds no answer to its EndTxn
		// (the tap may miss it as the client closes), still open: the
		// capture ends before its 10s timeout.
		{"h_txn_offset_commit_rejected.pcapng", map[string][4]int64{"txr-1": {0, 1, 0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			unanswered := map[string]bool{} // transactional ids with an EndTxn not answered
			c, _ := analyzeTap(t, func(e *decode.Exchange) {
				if r, ok := e.Req.(*kmsg.EndTxnRequest); ok && e.Resp == nil {
					unanswered[r.TransactionalID] = true
				}
			}, tt.file)
			for id := range unanswered {
				if w, ok := tt.want[id]; ok && w[1] > 0 {
					w[1], w[3] = w[1]-1, 1
					tt.want[id] = w
				}
			}
			got := map[string][4]int64{}
			for _, x := range c.Snapshot().Transactions {
				var open int64
				if x.OpenSince != nil && len(x.OpenPartitions) > 0 {
					open = 1
				}
				got[x.TransactionalID] = [4]int64{x.Committed, x.Aborted, x.TimedOut, open}
			}
			if !reflect.DeepEqual(tt.want, got) {
				t.Errorf("committed, aborted, timed out, open:\n-want %v\n+got  %v", tt.want, got)
			}
		})
	}
}

// TestTimedOutTxnEndsAtMarkers: with a coordinator's WriteTxnMarkers in
// the input, a transaction past its timeout stays open (hanging_transaction
// told at the deadline) until its abort markers show, and ends there; one
// whose markers never show ends at its deadline once txnAbortWait has
// passed. Real Kafka aborts a timed-out transaction seconds after its
// timeout (r_txn: 20,060 ms for a 15,000 ms timeout).
func TestTimedOutTxnEndsAtMarkers(t *testing.T) {
	h := newHarness(t, nil)
	broker := "10.0.0.9:9092"
	leader := h.conn("10.0.0.8:40000", broker) // the coordinator's broker to the leader
	for i, id := range []string{"t-marked", "t-unmarked"} {
		cl := h.conn("10.0.0.1:500"+strconv.Itoa(i), broker)
		init := kmsg.NewPtrInitProducerIDRequest()
		init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 4, kmsg.StringPtr(id), 3000
		ir := kmsg.NewPtrInitProducerIDResponse()
		ir.ProducerID = int64(70 + i)
		h.ex(time.Duration(i)*time.Millisecond, cl, id, init, ir)
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.Version, add.TransactionalID, add.ProducerID = 3, id, int64(70+i)
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic, at.Partitions = "orders", []int32{int32(i)}
		add.Topics = append(add.Topics, at)
		ar := kmsg.NewPtrAddPartitionsToTxnResponse()
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = "orders"
		rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		rp.Partition = int32(i)
		rt.Partitions = append(rt.Partitions, rp)
		ar.Topics = append(ar.Topics, rt)
		h.ex(100*time.Millisecond, cl, id, add, ar)
	}
	markers := func(at time.Duration, pid int64, epoch int16, commit bool) {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Version = 1
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "orders", []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = pid
		resp.Markers = append(resp.Markers, rm)
		h.ex(at, leader, "broker-1-txn-marker-sender", req, resp)
	}
	markers(time.Second, 99, 0, true) // another producer's: markers are on the wire
	ended := func() map[string]*TransactionEvent {
		out := map[string]*TransactionEvent{}
		for _, ev := range h.events("transaction") {
			if te := ev.(*TransactionEvent); te.Action == TxnAbort {
				out[te.TransactionalID] = te
			}
		}
		return out
	}
	markers(4*time.Second, 99, 0, true) // past both deadlines (3.1 s)
	if e := ended(); len(e) != 0 {
		t.Fatalf("ended before their markers or txnAbortWait: %v", slices.Collect(maps.Keys(e)))
	}
	markers(20*time.Second, 70, 1, false)
	e := ended()
	if te := e["t-marked"]; te == nil || te.EndedBy != TxnEndedByTimeout || *te.DurationMillis != 19901 {
		t.Fatalf("t-marked: %+v, want abort:timeout after 19901 ms (begin 100 ms to its markers' answer at 20.001 s)", te)
	}
	if e["t-unmarked"] != nil {
		t.Fatalf("t-unmarked ended at 20 s, before txnAbortWait past its deadline")
	}
	markers(34*time.Second, 99, 0, true)
	if te := ended()["t-unmarked"]; te == nil || te.EndedBy != TxnEndedByTimeout || *te.DurationMillis != 3000 {
		t.Fatalf("t-unmarked: %+v, want abort:timeout at its 3000 ms deadline once 30 s passed without its markers", te)
	}
	h.close(35 * time.Second)
	hung := map[string]bool{}
	for _, ev := range h.events("hazard") {
		if he := ev.(*HazardEvent); he.Kind == HazardHangingTransaction {
			hung[he.TransactionalID] = true
		}
	}
	if !hung["t-marked"] || !hung["t-unmarked"] {
		t.Errorf("hanging_transaction told for %v, want both", hung)
	}
}
