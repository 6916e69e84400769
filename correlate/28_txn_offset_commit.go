package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// txnOffsetCommit handles TxnOffsetCommit (key 28): a group's offsets
// committed inside the transaction, visible to the group only once the
// transaction commits. v5+ (KIP-890 part 2) adds the group implicitly,
// without AddOffsetsToTxn.
func (c *Correlator) txnOffsetCommit(e *decode.Exchange, req *kmsg.TxnOffsetCommitRequest) {
	resp, _ := e.Resp.(*kmsg.TxnOffsetCommitResponse)
	if resp == nil || req.TransactionalID == "" {
		return
	}
	t := c.txn(req.TransactionalID)
	var code int16
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			c.txnError(t, e, p.ErrorCode)
			if code == 0 {
				code = p.ErrorCode
			}
		}
	}
	if t.stale(req.ProducerID, req.ProducerEpoch) || isFenceCode(code) {
		c.txnRefused(t, e, req.ProducerID, req.ProducerEpoch, code)
		return
	}
	if code != 0 {
		c.txnCommitRejected(t, e, req, resp)
		return
	}
	if !c.txnStep(t, req.ProducerID, req.ProducerEpoch) {
		// The offsets of a transaction that a later epoch showed ended:
		// they are its, and its EndTxn (to come) decides them.
		i := t.pendingOf(req.ProducerEpoch)
		if i < 0 {
			return
		}
		open := t.txnBody
		t.txnBody = t.pending[i]
		defer func() { t.pending[i], t.txnBody = t.txnBody, open }()
	}
	t.adopt(c, e, req.ProducerID, req.ProducerEpoch)
	c.addGroup(t, e, req.Group)
	if t.offsets == nil {
		t.offsets = map[string]map[tp]txnOffset{}
	}
	if t.offsets[req.Group] == nil {
		if len(t.offsets) >= c.opts.MaxGroups {
			return
		}
		t.offsets[req.Group] = map[tp]txnOffset{}
	}
	ev := c.evidenceOf(e)
	for _, rt := range req.Topics {
		topic := c.topicKey(rt.Topic, rt.TopicID)
		for _, p := range rt.Partitions {
			if len(t.offsets[req.Group]) < c.opts.MaxPartitionsPerGroup {
				t.offsets[req.Group][tp{topic, p.Partition}] = txnOffset{p.Offset, req.MemberID, req.Generation, ev}
			}
		}
	}
}
