package route

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// MaxStableParts bounds the transactional partitions a Router remembers;
// beyond, every consumer Fetch goes to TxnKey's shard.
const MaxStableParts = 1 << 16

// stableParts are the partitions the correlator follows the last stable
// offset of (its stableState: fetched read_committed, or answered with an
// LSO below the high watermark, a transaction marker or an aborted
// transaction), by topic name or id as the Fetch named them. A client
// whose Fetch touches one, or makes one, is bound to TxnKey: that
// shard sees every Fetch response that moves a last stable offset.
type stableParts struct {
	parts map[stablePart]bool
	full  bool
}

type stablePart struct {
	topic     string
	id        [16]byte
	partition int32
}

// touches reports whether x is a consumer Fetch the correlator's stable
// partitions take in (remembering the partitions it makes transactional).
func (s *stableParts) touches(x *decode.Exchange) bool {
	req, ok := x.Req.(*kmsg.FetchRequest)
	if !ok || req.Version < 4 || replica(req) {
		return false
	}
	if s.full {
		return true
	}
	resp, _ := x.Resp.(*kmsg.FetchResponse)
	rc := req.IsolationLevel == 1
	if resp == nil || resp.ErrorCode != 0 {
		return rc
	}
	hit := rc
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			if rp.ErrorCode != 0 || rp.LastStableOffset < 0 {
				continue
			}
			p := stablePart{t.Topic, t.TopicID, rp.Partition}
			if s.parts[p] {
				hit = true
				continue
			}
			if rc || rp.LastStableOffset < rp.HighWatermark || len(rp.AbortedTransactions) > 0 || hasControl(rp.RecordBatches) {
				if s.parts == nil {
					s.parts = map[stablePart]bool{}
				}
				if len(s.parts) >= MaxStableParts {
					s.full = true
				}
				s.parts[p] = true
				hit = true
			}
		}
	}
	return hit
}

// hasControl reports whether record batches b hold a control batch (a
// transaction marker).
func hasControl(b []byte) bool {
	return decode.ScanBatches(b).Control > 0
}

// replica reports whether req is a broker's (a follower's) Fetch.
func replica(req *kmsg.FetchRequest) bool { return req.ReplicaID >= 0 || req.ReplicaState.ID >= 0 }
