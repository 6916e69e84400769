package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// addOffsetsToTxn handles AddOffsetsToTxn (key 25): a group's offsets join
// the transaction (committed by TxnOffsetCommit, made visible by EndTxn).
func (c *Correlator) addOffsetsToTxn(e *decode.Exchange, req *kmsg.AddOffsetsToTxnRequest) {
	resp, _ := e.Resp.(*kmsg.AddOffsetsToTxnResponse)
	if resp == nil || req.TransactionalID == "" {
		return
	}
	t := c.txn(req.TransactionalID)
	c.txnError(t, e, resp.ErrorCode)
	if resp.ErrorCode != 0 || t.stale(req.ProducerID, req.ProducerEpoch) {
		c.txnRefused(t, e, req.ProducerID, req.ProducerEpoch, resp.ErrorCode)
		return
	}
	if !c.txnStep(t, req.ProducerID, req.ProducerEpoch) {
		return
	}
	t.adopt(c, e, req.ProducerID, req.ProducerEpoch)
	c.addGroup(t, e, req.Group)
}
