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
	c.txnError(t, e, resp.ErrorCode)
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
	// The EndTxn's epoch names its transaction: the open one, or one a
	// later epoch's request already showed ended (pending).
	switch i := t.pendingOf(req.ProducerEpoch); {
	case i < 0 && !req.Commit && !t.open && t.timedOutOwn(req.ProducerID, req.ProducerEpoch):
		// The producer's own abort of the transaction its coordinator
		// aborted on timeout: under transactions v2 the coordinator
		// takes it as a retry of the epoch it bumped, answers it with
		// that epoch and writes nothing (KIP-890). No transaction ends,
		// so no event: its abort was told at the timeout.
	case i >= 0:
		open := t.txnBody
		t.txnBody = t.pending[i]
		t.pending = append(t.pending[:i], t.pending[i+1:]...)
		c.endTxn(t, e, req.Commit, TxnEndedByEndTxn, e.RespTime)
		t.txnBody = open
	case t.open && !(req.ProducerID == t.producerID && req.ProducerEpoch < t.txnBody.epoch):
		c.endTxn(t, e, req.Commit, TxnEndedByEndTxn, e.RespTime)
	default:
		c.endUnseen(t, e, req.Commit, req.ProducerEpoch)
	}
	if req.Version >= 5 && resp.ProducerID >= 0 && (resp.ProducerID != t.producerID || resp.ProducerEpoch > t.epoch) {
		c.setProducer(t, resp.ProducerID)
		t.epoch = resp.ProducerEpoch
	}
}

// endUnseen counts an accepted EndTxn whose transaction kwire did not see
// begin: the capture began inside it, or delivered its Produces after the
// EndTxn (another connection). The broker ended a transaction all the
// same, so it counts; the event has no begin, duration or partitions, and
// the Produces of its epoch that come later begin nothing.
func (c *Correlator) endUnseen(t *txnState, e *decode.Exchange, commit bool, epoch int16) {
	action := TxnAbort
	if commit {
		action, t.committed = TxnCommit, t.committed+1
	} else {
		t.aborted++
	}
	t.unseen++
	ev := c.txnEvent(t, e, action)
	ev.ProducerEpoch, ev.EndedBy = epoch, TxnEndedByEndTxn
	c.emit(ev)
}
