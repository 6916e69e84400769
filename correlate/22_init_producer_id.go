package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// initProducerID handles InitProducerID (key 22) of transactional
// producers; idempotent-only producers (null transactional id) are not
// followed. An answer gives the transactional id's producer id and a new
// epoch: it fences every older instance (KIP-98), and the broker aborts a
// transaction the id still had open.
func (c *Correlator) initProducerID(e *decode.Exchange, req *kmsg.InitProducerIDRequest) {
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		return
	}
	resp, _ := e.Resp.(*kmsg.InitProducerIDResponse)
	if resp == nil {
		return
	}
	t := c.txn(*req.TransactionalID)
	c.txnError(t, e, resp.ErrorCode)
	if resp.ErrorCode != 0 {
		ev := c.txnEvent(t, e, TxnInit)
		ev.ClientID, ev.ClientHost = e.ClientID, c.hostOf(e)
		ev.TimeoutMillis = req.TransactionTimeoutMillis
		ev.ErrorCode, ev.Error = resp.ErrorCode, errName(resp.ErrorCode)
		c.emit(ev)
		return
	}
	if t.open {
		c.endTxn(t, e, false, TxnEndedByInit, e.ReqTime)
	}
	c.setProducer(t, resp.ProducerID)
	t.epoch, t.initEpoch = resp.ProducerEpoch, resp.ProducerEpoch
	t.initAt, t.timeoutMillis = e.RespTime.UTC(), req.TransactionTimeoutMillis
	t.client = c.keyOf(e)
	t.initClient = t.client
	ev := c.evidenceOf(e)
	t.initEvidence = &ev
	if e.Conn != nil {
		t.coordinator = e.Conn.Server.String()
	}
	c.emit(c.txnEvent(t, e, TxnInit))
}
