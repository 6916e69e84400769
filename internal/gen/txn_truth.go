package gen

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnTruth is one transactional id's transactions as the broker ended
// them: every EndTxn the broker answered on the tap, by outcome and by the
// producer epoch the request carried (decimal). Transactions the broker
// aborted on its own (transaction timeout, or a new InitProducerID of the
// id) have no EndTxn and are not in it.
type TxnTruth struct {
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
	// Refused counts EndTxn answers with an error (fenced, invalid state).
	Refused int64 `json:"refused,omitempty"`
	// Epochs splits Committed and Aborted by producer epoch.
	Epochs map[string]*TxnEpochTruth `json:"epochs"`
	// Inits counts InitProducerID answers without error.
	Inits int64 `json:"inits"`
}

// TxnEpochTruth is what one producer epoch's EndTxns ended.
type TxnEpochTruth struct {
	Committed int64 `json:"committed"`
	Aborted   int64 `json:"aborted"`
}

// txnTruth counts, per transactional id, the EndTxn and InitProducerID
// answers on the tap (nil: none).
func (c *Cluster) txnTruth() map[string]*TxnTruth {
	out := map[string]*TxnTruth{}
	of := func(id string) *TxnTruth {
		if out[id] == nil {
			out[id] = &TxnTruth{Epochs: map[string]*TxnEpochTruth{}}
		}
		return out[id]
	}
	for _, x := range c.tapExchanges(int16(kmsg.InitProducerID), int16(kmsg.EndTxn)) {
		switch req := x.Req.(type) {
		case *kmsg.InitProducerIDRequest:
			resp, _ := x.Resp.(*kmsg.InitProducerIDResponse)
			if req.TransactionalID != nil && *req.TransactionalID != "" && resp != nil && resp.ErrorCode == 0 {
				of(*req.TransactionalID).Inits++
			}
		case *kmsg.EndTxnRequest:
			resp, _ := x.Resp.(*kmsg.EndTxnResponse)
			if resp == nil || req.TransactionalID == "" {
				continue
			}
			t := of(req.TransactionalID)
			if resp.ErrorCode != 0 {
				t.Refused++
				continue
			}
			k := strconv.Itoa(int(req.ProducerEpoch))
			if t.Epochs[k] == nil {
				t.Epochs[k] = &TxnEpochTruth{}
			}
			if req.Commit {
				t.Committed++
				t.Epochs[k].Committed++
			} else {
				t.Aborted++
				t.Epochs[k].Aborted++
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
