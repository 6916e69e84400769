package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// endTxnReq handles EndTxn (key 26): the producer commits or aborts. v5+
// (KIP-890 part 2) answers with the producer's next epoch: every
// transaction gets its own.
func (c *Correlator) endTxnReq(e *decode.Exchange, req *kmsg.EndTxnRequest) {
	resp, _ := e.Resp.(*kmsg.EndTxnResponse)
	if resp == nil || req.TransactionalID == "" {
		return
	}
	t := c.txn(req.TransactionalID)
	if t.stale(req.ProducerID, req.ProducerEpoch) || isFenceCode(resp.ErrorCode) {
		c.txnRefused(t, e, req.ProducerID, req.ProducerEpoch, resp.ErrorCode)
		return
	}
	t.adopt(c, e, req.ProducerID, req.ProducerEpoch)
	if e.Conn != nil {
		t.coordinator = e.Conn.Server.String()
	}
	if resp.ErrorCode != 0 {
		// Refused (INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS...): the
		// transaction stays as it was.
		action := TxnAbort
		if req.Commit {
			action = TxnCommit
		}
		ev := c.txnEvent(t, e, action)
		ev.EndedBy, ev.ErrorCode, ev.Error = TxnEndedByEndTxn, resp.ErrorCode, errName(resp.ErrorCode)
		c.emit(ev)
		return
	}
	c.endTxn(t, e, req.Commit, TxnEndedByEndTxn, e.RespTime)
	if req.Version >= 5 && resp.ProducerID >= 0 {
		t.producerID, t.epoch = resp.ProducerID, resp.ProducerEpoch
	}
}
