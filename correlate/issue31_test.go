package correlate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnTruthFile is what these tests read of a generator truth file: each
// transactional id's EndTxn and InitProducerID answers on the broker's
// tap (internal/gen TxnTruth), and the share groups' records.
type txnTruthFile struct {
	Case     string `json:"case"`
	Captures []struct {
		File string `json:"file"`
	} `json:"captures"`
	Transactions map[string]struct {
		Committed int64 `json:"committed"`
		Aborted   int64 `json:"aborted"`
		Refused   int64 `json:"refused"`
		Epochs    map[string]struct {
			Committed int64 `json:"committed"`
			Aborted   int64 `json:"aborted"`
		} `json:"epochs"`
	} `json:"transactions"`
	Share   map[string]json.RawMessage `json:"share"`
	Hazards []truthHazard              `json:"hazards"`
}

func loadTxnTruths(t *testing.T) []*txnTruthFile {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	var out []*txnTruthFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var tr txnTruthFile
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, &tr)
	}
	return out
}

// endTxnCounts counts, per transactional id, the transactions rec shows
// ended by an accepted EndTxn, as "committed"/"aborted" and per epoch
// ("<epoch> commit"), the broker's way of counting them.
func endTxnCounts(rec *recorder) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for _, ev := range rec.events {
		te, ok := ev.(*TransactionEvent)
		if !ok || te.EndedBy != TxnEndedByEndTxn || te.ErrorCode != 0 {
			continue
		}
		if out[te.TransactionalID] == nil {
			out[te.TransactionalID] = map[string]int64{}
		}
		out[te.TransactionalID][te.Action]++
		out[te.TransactionalID][strconv.Itoa(int(te.ProducerEpoch))+" "+te.Action]++
	}
	return out
}

// TestTransactionsMatchBroker (issue 31): in every capture whose truth
// holds the broker's EndTxn answers (transactional producers killed
// mid-transaction while another id commits, sub-second after the kill
// and inside its transaction, a restarted instance, aborted
// TxnOffsetCommits, a fenced zombie), kwire counts each transactional
// id's committed and aborted transactions, per producer epoch, exactly as
// the broker answered them, in events and in the summary.
func TestTransactionsMatchBroker(t *testing.T) {
	ran := false
	for _, tr := range loadTxnTruths(t) {
		if len(tr.Transactions) == 0 {
			continue
		}
		ran = true
		t.Run(tr.Case, func(t *testing.T) {
			c, rec := analyze(t, tr.Captures[0].File)
			got := endTxnCounts(rec)
			snap := map[string]Transaction{}
			for _, s := range c.Snapshot().Transactions {
				snap[s.TransactionalID] = s
			}
			for id, want := range tr.Transactions {
				w := map[string]int64{}
				if want.Committed > 0 {
					w[TxnCommit] = want.Committed
				}
				if want.Aborted > 0 {
					w[TxnAbort] = want.Aborted
				}
				for epoch, n := range want.Epochs {
					if n.Committed > 0 {
						w[epoch+" "+TxnCommit] = n.Committed
					}
					if n.Aborted > 0 {
						w[epoch+" "+TxnAbort] = n.Aborted
					}
				}
				g := got[id]
				if g == nil {
					g = map[string]int64{}
				}
				if d := diff(w, g); d != "" {
					t.Errorf("%s: EndTxn-ended transactions (-broker +kwire):\n%s", id, d)
				}
				if s := snap[id]; s.Committed != want.Committed {
					t.Errorf("%s: summary committed %d, broker committed %d", id, s.Committed, want.Committed)
				}
			}
		})
	}
	if !ran {
		t.Skip("no capture with a transactions truth in testdata (go run ./cmd/kwire-gen)")
	}
}

// isTxnOrShareCase says whether a capture is one of transactional
// producers or share groups.
func isTxnOrShareCase(tr *txnTruthFile) bool {
	if len(tr.Transactions) > 0 || len(tr.Share) > 0 {
		return true
	}
	for _, p := range []string{"txn_", "h_txn_", "share_", "h_share_", "h_zombie_producer", "h_hanging_lso"} {
		if strings.HasPrefix(tr.Case, p) {
			return true
		}
	}
	return false
}

// TestTxnShareNoUnexpectedAlarms (issue 31): on every transactional and
// share capture, each warn or critical hazard is one the scenario drove
// (its truth lists it); one truth hazard answers one event, so a silence
// reported twice (member_expired and heartbeat_late) fails.
func TestTxnShareNoUnexpectedAlarms(t *testing.T) {
	ran := false
	for _, tr := range loadTxnTruths(t) {
		if !isTxnOrShareCase(tr) {
			continue
		}
		ran = true
		t.Run(tr.Case, func(t *testing.T) {
			_, rec := analyze(t, tr.Captures[0].File)
			used := make([]bool, len(tr.Hazards))
			for _, ev := range hazardEvents(rec) {
				if ev.Severity == SeverityInfo {
					continue
				}
				best := -1 // the most specific truth it answers
				for i, want := range tr.Hazards {
					if !used[i] && matchHazard(want, ev) == "" && (best < 0 || specificity(want) > specificity(tr.Hazards[best])) {
						best = i
					}
				}
				if best >= 0 {
					used[best] = true
				} else {
					t.Errorf("unexpected %s %s: %s", ev.Severity, ev.Kind, ev.Summary)
				}
			}
		})
	}
	if !ran {
		t.Skip("no transactional or share captures in testdata")
	}
}

// TestTxnShareCountsRepeat (issue 31): the same capture analysed 20 times
// gives the same counts (no map-order or state-reuse dependence).
func TestTxnShareCountsRepeat(t *testing.T) {
	runs := 20
	if testing.Short() {
		runs = 3
	}
	for _, tr := range loadTxnTruths(t) {
		if !isTxnOrShareCase(tr) {
			continue
		}
		t.Run(tr.Case, func(t *testing.T) {
			var first string
			for i := range runs {
				c, rec := analyze(t, tr.Captures[0].File)
				s := c.Snapshot()
				var kinds []string
				for _, ev := range hazardEvents(rec) {
					kinds = append(kinds, ev.Kind+"/"+ev.Severity+"/"+ev.MemberID+"/"+ev.TransactionalID)
				}
				slices.Sort(kinds)
				var share []string
				for _, g := range s.Groups {
					if g.Share != nil {
						share = append(share, fmt.Sprintf("%s %+v", g.Group, *g.Share))
					}
				}
				got := fmt.Sprintf("%v\n%v\n%+v\n%v", endTxnCounts(rec), kinds, s.Transactions, share)
				if i == 0 {
					first = got
				} else if got != first {
					t.Fatalf("run %d counts differ from run 0:\n%s\nvs\n%s", i, got, first)
				}
			}
		})
	}
}

// TestShareKilledHolderCause (issue 31): records a SIGKILLed share member
// held come back because its connection closed, not because their lock
// ran out (15 s, long after); so no share_ack_lost, and every
// redelivered record the broker counted is one kwire names so.
func TestShareKilledHolderCause(t *testing.T) {
	const file = "h_share_killed_held.pcapng"
	if _, err := os.Stat(filepath.Join("..", "testdata", file)); err != nil {
		t.Skip("no " + file + " in testdata")
	}
	c, rec := analyze(t, file)
	causes := map[string]int64{}
	for _, ev := range rec.events {
		if e, ok := ev.(*ShareGroupEvent); ok && e.Action == ShareAcquired {
			for _, r := range e.Acquired {
				if r.DeliveryCount > 1 {
					causes[r.Cause] += records(r.FirstOffset, r.LastOffset)
				}
			}
		}
	}
	var redelivered int64
	for _, g := range c.Snapshot().Groups {
		if g.Share != nil {
			for _, p := range g.Share.Partitions {
				redelivered += p.Redelivered
			}
		}
	}
	tr := loadShareTruths(t)
	var want int64
	for _, s := range tr {
		if s.Case != "h_share_killed_held" {
			continue
		}
		for _, g := range s.Share {
			for _, ps := range g.Partitions {
				for _, p := range ps {
					want += p.Redelivered
				}
			}
		}
	}
	if want == 0 || redelivered != want {
		t.Errorf("redelivered %d, broker %d", redelivered, want)
	}
	if d := diff(map[string]int64{ShareCauseConnClosed: want}, causes); d != "" {
		t.Errorf("redelivery causes (-want +got):\n%s", d)
	}
	for _, ev := range hazardEvents(rec) {
		if ev.Kind == HazardShareAckLost {
			t.Errorf("share_ack_lost for records its connection's close released: %s", ev.Summary)
		}
	}
}

// txnBatch is one transactional record batch of producer pid at epoch
// (KIP-98 attributes bit 0x10), built with kmsg.
func txnBatch(pid int64, epoch int16) []byte {
	b := kmsg.RecordBatch{Magic: 2, Attributes: 0x10, ProducerID: pid, ProducerEpoch: epoch, NumRecords: 1, Records: []byte{0}}
	return b.AppendTo(nil)
}

// TestTxnCountsAnyConnectionOrder (issue 31): under transaction version 2
// each transaction has its own epoch (EndTxn v5 answers the next), so a
// capture may deliver the next transaction's Produce (partition leader's
// connection) before the previous EndTxn (coordinator's connection), or
// an EndTxn before its own Produce: every order counts three commits,
// each with its own epoch.
func TestTxnCountsAnyConnectionOrder(t *testing.T) {
	const pid, id = int64(7), "tx-1"
	produce := func(epoch int16) (kmsg.Request, kmsg.Response) {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(12)
		req.TransactionID, req.Acks = kmsg.StringPtr(id), -1
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: txnBatch(pid, epoch)}}}}
		resp := kmsg.NewPtrProduceResponse()
		resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0}}}}
		return req, resp
	}
	endTxn := func(epoch int16) (kmsg.Request, kmsg.Response) {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(5)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
		resp := kmsg.NewPtrEndTxnResponse()
		resp.ProducerID, resp.ProducerEpoch = pid, epoch+1
		return req, resp
	}
	type step struct {
		end   bool
		epoch int16
	}
	tests := []struct {
		name  string
		order []step
	}{
		{"wire order", []step{{false, 0}, {true, 0}, {false, 1}, {true, 1}, {false, 2}, {true, 2}}},
		{"next Produce before the EndTxn", []step{{false, 0}, {false, 1}, {true, 0}, {false, 2}, {true, 1}, {true, 2}}},
		{"EndTxns late", []step{{false, 0}, {false, 1}, {false, 2}, {true, 0}, {true, 1}, {true, 2}}},
		{"EndTxn before its Produce", []step{{true, 0}, {false, 0}, {false, 1}, {true, 1}, {true, 2}, {false, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			coord, leader := h.conn("10.0.0.1:5000", "10.0.0.9:9092"), h.conn("10.0.0.1:5001", "10.0.0.8:9092")
			init := kmsg.NewPtrInitProducerIDRequest()
			init.SetVersion(5)
			init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
			initResp := kmsg.NewPtrInitProducerIDResponse()
			initResp.ProducerID, initResp.ProducerEpoch = pid, 0
			h.ex(0, coord, "p", init, initResp)
			for i, s := range tc.order {
				at := time.Duration(i+1) * time.Millisecond
				if s.end {
					req, resp := endTxn(s.epoch)
					h.ex(at, coord, "p", req, resp)
				} else {
					req, resp := produce(s.epoch)
					h.ex(at, leader, "p", req, resp)
				}
			}
			h.close(time.Second)
			want := map[string]int64{TxnCommit: 3, "0 commit": 1, "1 commit": 1, "2 commit": 1}
			if d := diff(want, endTxnCounts(h.rec)[id]); d != "" {
				t.Errorf("commits (-want +got):\n%s", d)
			}
			for _, s := range h.c.Snapshot().Transactions {
				if s.Committed != 3 || s.OpenSince != nil || s.AwaitingEndTxn != 0 {
					t.Errorf("summary: committed %d, open since %v, awaiting %d; want 3 committed, none open or awaiting",
						s.Committed, s.OpenSince, s.AwaitingEndTxn)
				}
			}
		})
	}
}
