package correlate

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// consumedTruth reads what a generator truth says each group's
// applications got from their polls: group -> topic -> partition ->
// records (internal/gen GroupTruth.Consumed), and committed at the end.
func consumedTruth(t *testing.T, file string) (consumed, committed map[string]map[string]map[string]int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Groups map[string]struct {
			Consumed map[string]map[string]int64 `json:"consumed"`
		} `json:"groups"`
		Committed map[string]map[string]map[string]int64 `json:"committed"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	consumed = map[string]map[string]map[string]int64{}
	for g, gt := range tr.Groups {
		if gt.Consumed != nil {
			consumed[g] = gt.Consumed
		}
	}
	return consumed, tr.Committed
}

// markerOffsets adds the offsets of the control batches (transaction
// markers) of a Fetch response, per partition, as kmsg's own RecordBatch
// parser reads them; topics are named by name (topic ids resolved).
func markerOffsets(t *testing.T, e *decode.Exchange, name func(string, [16]byte) string, out map[tp]map[int64]bool) {
	resp, ok := e.Resp.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			for b := rp.RecordBatches; len(b) >= 12; {
				n := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
				if n > len(b) || n < 12 {
					break
				}
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(b[:n]); err != nil {
					t.Fatalf("record batch: %v", err)
				}
				if rb.Attributes&0x20 != 0 {
					p := tp{name(rt.Topic, rt.TopicID), rp.Partition}
					if out[p] == nil {
						out[p] = map[int64]bool{}
					}
					out[p][rb.FirstOffset] = true
				}
				b = b[n:]
			}
		}
	}
}

// TestReadCommittedAccounting: two kgo read_committed groups consume a
// topic with committed and aborted transactions. Of the records Fetch
// delivered, kwire counts the transaction markers and the aborted
// records apart: what is left is what the applications got (the clients'
// own count, in the truth); a group that commits past the markers (kgo
// KeepControlRecords, as Java's position does) commits marker + 1, past
// the last data record, and kwire flags no commit_beyond_fetch, gap or
// skip for it; lag is measured to the last stable offset.
func TestReadCommittedAccounting(t *testing.T) {
	const file = "txn_read_committed"
	consumed, committed := consumedTruth(t, file+".truth.json")
	if len(consumed) != 2 {
		t.Fatalf("truth has consumed counts for %d groups, want 2 (regenerate %s)", len(consumed), file)
	}
	markers := map[tp]map[int64]bool{}
	p := &pipeline{}
	p.tap = func(e *decode.Exchange) { markerOffsets(t, e, p.c.topicKey, markers) }
	c, rec := analyzeTaps(t, p, filepath.Join("..", "testdata", file+".pcapng"))
	s := c.Snapshot()
	for _, g := range s.Groups {
		want := consumed[g.Group]
		if want == nil {
			continue
		}
		for _, p := range g.Partitions {
			w := want[p.Topic][strconv.Itoa(int(p.Partition))]
			if got := p.Records - p.ControlRecords - p.AbortedRecords; got != w {
				t.Errorf("%s %s/%d: %d records, %d markers, %d aborted: %d reached the application, the client got %d",
					g.Group, p.Topic, p.Partition, p.Records, p.ControlRecords, p.AbortedRecords, got, w)
			}
			if n := int64(len(markers[tp{p.Topic, p.Partition}])); p.Records > 0 && p.ControlRecords != n {
				t.Errorf("%s %s/%d: %d control records, the responses held %d markers", g.Group, p.Topic, p.Partition, p.ControlRecords, n)
			}
			if !p.ReadCommitted || p.PositionLag == nil || p.EndOffset == nil || p.Position == nil || *p.PositionLag != *p.EndOffset-*p.Position {
				t.Errorf("%s %s/%d: read_committed %v, position lag %v: want end %v - position %v", g.Group, p.Topic, p.Partition,
					p.ReadCommitted, ptrStr64(p.PositionLag), ptrStr64(p.EndOffset), ptrStr64(p.Position))
			}
			if p.EndOffsetAt != nil && p.LastFetch != nil && p.EndOffsetAt.Equal(p.LastFetch.Time) && (p.LastStable == nil || *p.EndOffset != *p.LastStable) {
				t.Errorf("%s %s/%d: end %v from the group's own last Fetch, whose last stable offset is %v", g.Group, p.Topic, p.Partition,
					ptrStr64(p.EndOffset), ptrStr64(p.LastStable))
			}
			if p.Committed != nil && (p.Lag == nil || *p.Lag != *p.EndOffset-*p.Committed) {
				t.Errorf("%s %s/%d: lag %v, want end %v - committed %d", g.Group, p.Topic, p.Partition, ptrStr64(p.Lag), ptrStr64(p.EndOffset), *p.Committed)
			}
			if p.Records > 0 && (p.Committed == nil || *p.Committed != committed[g.Group][p.Topic][strconv.Itoa(int(p.Partition))]) {
				t.Errorf("%s %s/%d: committed %v, the broker says %d", g.Group, p.Topic, p.Partition, ptrStr64(p.Committed),
					committed[g.Group][p.Topic][strconv.Itoa(int(p.Partition))])
			}
		}
	}
	pastMarker := 0
	for _, ev := range rec.events {
		if ce, ok := ev.(*CommitEvent); ok && ce.Group == "txrc-b" && ce.ErrorCode == 0 && markers[tp{ce.Topic, ce.Partition}][ce.Offset-1] {
			pastMarker++
		}
	}
	if pastMarker == 0 {
		t.Errorf("txrc-b made no commit at a marker + 1: the capture does not show the case")
	}
	for _, h := range hazardEvents(rec) {
		switch h.Kind {
		case HazardCommitBeyondFetch, HazardCommitGap, HazardOffsetReset, HazardCommitOnReceive:
			if h.Kind == HazardOffsetReset && h.Skipped == nil && h.Severity == SeverityInfo ||
				h.Kind == HazardCommitOnReceive && h.Severity == SeverityInfo {
				continue // a group's start; a heuristic
			}
			t.Errorf("%s %s on a transactional topic: %s", h.Severity, h.Kind, h.Summary)
		}
	}
}

func ptrStr64(p *int64) any {
	if p == nil {
		return "null"
	}
	return *p
}

// TestStablePartitions: the summary's transactional partitions count each
// transaction marker and aborted transaction once across consumers, and
// end at a last stable offset equal to the high watermark once every
// transaction ended.
func TestStablePartitions(t *testing.T) {
	markers := map[tp]map[int64]bool{}
	aborted := map[tp]map[int64]bool{}
	pl := &pipeline{}
	pl.tap = func(e *decode.Exchange) {
		markerOffsets(t, e, pl.c.topicKey, markers)
		if resp, ok := e.Resp.(*kmsg.FetchResponse); ok {
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					for _, a := range rp.AbortedTransactions {
						p := tp{pl.c.topicKey(rt.Topic, rt.TopicID), rp.Partition}
						if aborted[p] == nil {
							aborted[p] = map[int64]bool{}
						}
						aborted[p][a.FirstOffset] = true
					}
				}
			}
		}
	}
	c, _ := analyzeTaps(t, pl, filepath.Join("..", "testdata", "txn_read_committed.pcapng"))
	s := c.Snapshot()
	if len(s.StablePartitions) == 0 {
		t.Fatal("no stable partitions in the summary")
	}
	for _, sp := range s.StablePartitions {
		p := tp{sp.Topic, sp.Partition}
		if sp.TransactionMarkers != int64(len(markers[p])) || sp.AbortedTransactions != int64(len(aborted[p])) {
			t.Errorf("%s/%d: %d markers, %d aborted transactions; the responses held %d and %d", sp.Topic, sp.Partition,
				sp.TransactionMarkers, sp.AbortedTransactions, len(markers[p]), len(aborted[p]))
		}
		if sp.LastStable != sp.HighWatermark || sp.Unstable != 0 || sp.StuckSince != nil || sp.ReadCommittedFetches == 0 {
			t.Errorf("%s/%d at the end: %+v, want the last stable offset at the high watermark, fetched read_committed", sp.Topic, sp.Partition, sp)
		}
	}
}

// TestHangingLSO: a transactional producer killed mid-transaction holds
// the last stable offset of its partition while a read_committed group
// member waits there: kwire reports hanging_transaction for the
// partition once it has not moved for LSOStuck, names the open
// transaction's producer, and the summary keeps how long it stayed; with
// LSOStuck above the transaction timeout the broker's abort comes first
// and there is none.
func TestHangingLSO(t *testing.T) {
	const file = "h_hanging_lso.pcapng"
	c, rec := analyze(t, file)
	var lso, timeout *HazardEvent
	for _, h := range hazardEvents(rec) {
		if h.Kind != HazardHangingTransaction {
			continue
		}
		if h.Partition != nil {
			lso = h
		} else {
			timeout = h
		}
	}
	if lso == nil || timeout == nil {
		t.Fatalf("hanging_transaction of the partition %v, of the transaction %v: want both", lso != nil, timeout != nil)
	}
	stuck := c.opts.Hazards.LSOStuck.Milliseconds()
	if lso.Severity != SeverityWarn || lso.DurationMillis < stuck || lso.DurationMillis >= int64(lso.TransactionTimeoutMillis) {
		t.Errorf("%s after %d ms: want warn after LSOStuck (%d ms), before the %d ms timeout", lso.Severity, lso.DurationMillis, stuck, lso.TransactionTimeoutMillis)
	}
	if !slices.Equal(lso.ClientIDs, []string{"txl-member"}) || lso.ClientID != "txl-producer" || lso.TransactionalID != "txl-1" {
		t.Errorf("waiting %v, holder %s/%s: want txl-member waiting on txl-producer's txl-1", lso.ClientIDs, lso.ClientID, lso.TransactionalID)
	}
	if len(lso.Evidence) != 3 || lso.Evidence[0].API != "Produce" || lso.Evidence[1].API != "Fetch" || lso.Evidence[2].API != "Fetch" {
		t.Errorf("evidence %+v: want the transaction's first Produce, then the Fetches that showed the offset first and last", lso.Evidence)
	}
	var sp *StablePartition
	for i := range c.Snapshot().StablePartitions {
		if x := &c.Snapshot().StablePartitions[i]; x.Topic == lso.Topic && x.Partition == *lso.Partition {
			sp = x
		}
	}
	if sp == nil || sp.MaxStuckMillis <= lso.DurationMillis || sp.LastStable != sp.HighWatermark || sp.AbortedTransactions != 1 {
		t.Errorf("summary %+v: want a longest wait above the hazard's %d ms, the offset stable at the end, one aborted transaction", sp, lso.DurationMillis)
	}

	// With LSOStuck above the transaction timeout, kfake's abort moves
	// the offset first.
	paths := []string{filepath.Join("..", "testdata", file)}
	src, err := capture.OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r2 := &recorder{}
	p := &pipeline{}
	p.c = New(&Options{Hazards: HazardOptions{LSOStuck: time.Duration(lso.TransactionTimeoutMillis+5000) * time.Millisecond}}, r2)
	p.dec = decode.New(p, nil)
	if err := src.Run(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.c.Close(p.last)
	for _, h := range hazardEvents(r2) {
		if h.Kind == HazardHangingTransaction && h.Partition != nil {
			t.Errorf("LSOStuck above the timeout: %s", h.Summary)
		}
	}
}

// TestHangingUnderLoss: both sides of hanging_transaction rest on what
// was not seen. A Fetch answer of the waiting member lost in the window
// makes the partition's info with evidence_complete false; a gap on the
// producer's connection does that to the transaction's; each leaves the
// other warn.
func TestHangingUnderLoss(t *testing.T) {
	tests := []struct {
		name            string
		client          string // whose exchange the loss hits
		part, txn       string // severities wanted
		lostAfterMillis int64  // how long into the wait
	}{
		{"no loss", "", SeverityWarn, SeverityWarn, 0},
		{"a Fetch answer of the waiting member lost", "txl-member", SeverityInfo, SeverityWarn, 5000},
		{"a gap on the producer's connection", "txl-producer", SeverityWarn, SeverityInfo, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var began time.Time
			done := false
			p := &pipeline{}
			p.tap = func(e *decode.Exchange) {
				if r, ok := e.Req.(*kmsg.ProduceRequest); ok && r.TransactionID != nil && began.IsZero() {
					began = e.ReqTime
				}
				if done || tt.client == "" || e.ClientID != tt.client || began.IsZero() {
					return
				}
				switch {
				case tt.client == "txl-producer":
					p.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap, Conn: e.Conn, Time: e.ReqTime, Bytes: 100})
					done = true
				case e.Key == 1 && e.ReqTime.Sub(began) > time.Duration(tt.lostAfterMillis)*time.Millisecond:
					e.Resp, e.Response = nil, decode.ResponseLost
					done = true
				}
			}
			_, rec := analyzeTaps(t, p, filepath.Join("..", "testdata", "h_hanging_lso.pcapng"))
			if tt.client != "" && !done {
				t.Fatalf("no exchange of %s to lose", tt.client)
			}
			got := map[bool]*HazardEvent{}
			for _, h := range hazardEvents(rec) {
				if h.Kind == HazardHangingTransaction {
					got[h.Partition != nil] = h
				}
			}
			for isPart, want := range map[bool]string{true: tt.part, false: tt.txn} {
				h := got[isPart]
				if h == nil {
					t.Fatalf("no hanging_transaction (of a partition: %v)", isPart)
				}
				incomplete := h.EvidenceComplete != nil && !*h.EvidenceComplete && h.Loss != nil && h.Loss.any()
				if h.Severity != want || incomplete != (want == SeverityInfo) {
					t.Errorf("of a partition %v: %s, evidence_complete %v, loss %+v: want %s", isPart, h.Severity, h.EvidenceComplete, h.Loss, want)
				}
			}
		})
	}
}

// TestTxnOffsetsAborted: offsets a transaction committed for a group
// (TxnOffsetCommit, accepted) and then aborted are a txn_offsets_aborted
// hazard resting on both exchanges, and never the group's committed
// offset; a committed transaction's offsets raise none.
func TestTxnOffsetsAborted(t *testing.T) {
	c, rec := analyze(t, "h_txn_offsets_aborted.pcapng")
	var hs []*HazardEvent
	for _, h := range hazardEvents(rec) {
		if h.Kind == HazardTxnOffsetsAborted {
			hs = append(hs, h)
		}
	}
	if len(hs) != 1 {
		t.Fatalf("%d txn_offsets_aborted, want 1", len(hs))
	}
	h := hs[0]
	if len(h.Evidence) != 2 || h.Evidence[0].API != "TxnOffsetCommit" || h.Evidence[1].API != "EndTxn" {
		t.Errorf("evidence %+v: want the TxnOffsetCommit, then the EndTxn that aborted", h.Evidence)
	}
	if h.Offset == nil || h.PreviousOffset == nil || h.Replayed == nil || *h.Replayed != *h.Offset-*h.PreviousOffset || h.MemberID == "" {
		t.Errorf("offset %v, committed %v, replayed %v, member %q", ptrStr64(h.Offset), ptrStr64(h.PreviousOffset), ptrStr64(h.Replayed), h.MemberID)
	}
	for _, g := range c.Snapshot().Groups {
		for _, p := range g.Partitions {
			if g.Group == h.Group && p.Topic == h.Topic && p.Partition == *h.Partition && (p.Committed == nil || *p.Committed != *h.PreviousOffset) {
				t.Errorf("the group's committed offset is %v after the abort, want %d", ptrStr64(p.Committed), *h.PreviousOffset)
			}
		}
	}
	// txn_clean's consume-transform-produce session commits its offsets
	// in transactions that commit.
	_, rec = analyze(t, "txn_clean.pcapng")
	offsets := 0
	for _, ev := range rec.events {
		if te, ok := ev.(*TransactionEvent); ok && te.Action == TxnOffsetsAdded {
			offsets++
		}
	}
	for _, h := range hazardEvents(rec) {
		if h.Kind == HazardTxnOffsetsAborted {
			t.Errorf("txn_clean: %s", h.Summary)
		}
	}
	if offsets == 0 {
		t.Error("txn_clean has no transaction with offsets: the negative case is not shown")
	}
}
