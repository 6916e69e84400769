package decode

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// TestBatchProducerAndDrop: the producer id, epoch and base sequence are
// read from a batch header built by kmsg, and survive DropRecords only for
// transactional Produce requests.
func TestBatchProducerAndDrop(t *testing.T) {
	b := kmsg.RecordBatch{Magic: 2, ProducerID: 7391, ProducerEpoch: 12, FirstSequence: 4021, NumRecords: 1, Records: []byte{1, 2, 3}}
	raw := b.AppendTo(nil)
	if id, ep, ok := BatchProducer(raw); !ok || id != 7391 || ep != 12 {
		t.Fatalf("BatchProducer = %d, %d, %v; want 7391, 12, true", id, ep, ok)
	}
	if seq, ok := BatchSequence(raw); !ok || seq != 4021 {
		t.Fatalf("BatchSequence = %d, %v; want 4021, true", seq, ok)
	}
	if _, _, ok := BatchProducer(raw[:batchHeaderLen-1]); ok {
		t.Error("a cut header was read")
	}
	if _, ok := BatchSequence(raw[:batchHeaderLen-1]); ok {
		t.Error("a cut header's sequence was read")
	}
	txn := "t"
	tests := []struct {
		name    string
		txnID   *string
		wantLen int
	}{
		{"transactional keeps the header", &txn, batchHeaderLen},
		{"plain drops everything", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &kmsg.ProduceRequest{TransactionID: tt.txnID, Topics: []kmsg.ProduceRequestTopic{{Topic: "x",
				Partitions: []kmsg.ProduceRequestTopicPartition{{Records: append([]byte(nil), raw...)}}}}}
			DropRecords(req)
			got := req.Topics[0].Partitions[0].Records
			if len(got) != tt.wantLen {
				t.Fatalf("%d bytes kept, want %d", len(got), tt.wantLen)
			}
			if tt.wantLen > 0 {
				if id, ep, ok := BatchProducer(got); !ok || id != 7391 || ep != 12 {
					t.Errorf("after drop: %d, %d, %v", id, ep, ok)
				}
			}
		})
	}
}

// TestDropRecordsOwnHeader: with DropProduceRecords, the batch header a
// Produce request keeps (its partition's only batch: lag in seconds)
// outlives the chunk it came in, which the source reuses at once (feed
// clears every chunk after the call), until the response arrives.
func TestDropRecordsOwnHeader(t *testing.T) {
	b := kmsg.RecordBatch{Magic: 2, ProducerID: 7391, ProducerEpoch: 12, NumRecords: 3, LastOffsetDelta: 2,
		FirstTimestamp: 1_796_656_000_000, MaxTimestamp: 1_796_656_000_250, Records: []byte{1, 2, 3}}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	pr := produceReq(-1, 0)
	pr.Topics[0].Partitions[0].Records = raw
	for _, split := range []int{0, 16} {
		r, _, _ := feed(&Options{DropProduceRecords: true}, newConn(capture.RolePort, true), split,
			req(reqFrame(pr, 9, 3, "p")), resp(respFrame(produceResp(), 9, 3)))
		diff(t, "exchanges", []string{"Produce v9 #3 seen"}, summary(r))
		got := r.ex[0].req.(*kmsg.ProduceRequest).Topics[0].Partitions[0].Records
		if !bytes.Equal(got, raw[:batchHeaderLen]) {
			t.Errorf("split %d: kept header\n%x\nwant\n%x", split, got, raw[:batchHeaderLen])
		}
	}
}
