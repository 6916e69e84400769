package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// addPartitionsToTxn handles AddPartitionsToTxn (key 24): v0-v3 add one
// producer's partitions; v4+ (KIP-890 part 1) batch transactions, and
// their VerifyOnly entries are a broker checking, not a producer adding.
func (c *Correlator) addPartitionsToTxn(e *decode.Exchange, req *kmsg.AddPartitionsToTxnRequest) {
	resp, _ := e.Resp.(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var parts []tp
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, tp{t.Topic, p})
			}
		}
		code, ok := int16(0), resp != nil
		if resp != nil {
			code = firstTopicCode(resp.Topics)
		}
		c.txnAddParts(e, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, code, ok)
		return
	}
	for _, tx := range req.Transactions {
		if tx.VerifyOnly {
			continue
		}
		var parts []tp
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, tp{t.Topic, p})
			}
		}
		code, ok := int16(0), resp != nil
		if resp != nil {
			code = resp.ErrorCode
			for _, rt := range resp.Transactions {
				if rt.TransactionalID != tx.TransactionalID || code != 0 {
					continue
				}
				for _, t := range rt.Topics {
					for _, p := range t.Partitions {
						if code == 0 {
							code = p.ErrorCode
						}
					}
				}
			}
		}
		c.txnAddParts(e, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts, code, ok)
	}
}

func firstTopicCode(ts []kmsg.AddPartitionsToTxnResponseTopic) int16 {
	for _, t := range ts {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// txnAddParts adds parts to transactional id's transaction when the
// broker accepted them (answered: a response was seen), and judges a
// fenced instance otherwise.
func (c *Correlator) txnAddParts(e *decode.Exchange, id string, pid int64, epoch int16, parts []tp, code int16, answered bool) {
	if id == "" || !answered {
		return
	}
	t := c.txn(id)
	c.txnError(t, e, code)
	if code != 0 || t.stale(pid, epoch) {
		c.txnRefused(t, e, pid, epoch, code)
		return
	}
	if !c.txnStep(t, pid, epoch) {
		return
	}
	t.adopt(c, e, pid, epoch)
	c.addParts(t, e, parts)
}
