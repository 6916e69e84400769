package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// produceTxn follows transactional Produce requests (key 0, v3+ with a
// transactional id): the producer id and epoch are in each record batch's
// header (decode.BatchProducer; kept when the records are dropped). Under KIP-890 part 2 (Produce v12+,
// transaction version 2) the first Produce to a partition adds it to the
// transaction without AddPartitionsToTxn; before that it was added
// already, so adding it again changes nothing.
func (c *Correlator) produceTxn(e *decode.Exchange, req *kmsg.ProduceRequest) {
	if req.TransactionID == nil || *req.TransactionID == "" {
		return
	}
	resp, _ := e.Resp.(*kmsg.ProduceResponse)
	codes := map[tp]int16{}
	if resp != nil {
		for _, rt := range resp.Topics {
			topic := c.topicKey(rt.Topic, rt.TopicID)
			for _, p := range rt.Partitions {
				codes[tp{topic, p.Partition}] = p.ErrorCode
			}
		}
	}
	pid, epoch := int64(-1), int16(-1)
	var parts []tp
	var refused int16
	var errs []int16 // the refused partitions' codes
	for _, rt := range req.Topics {
		topic := c.topicKey(rt.Topic, rt.TopicID)
		for _, p := range rt.Partitions {
			id, ep, ok := decode.BatchProducer(p.Records)
			if !ok || id < 0 {
				continue
			}
			pid, epoch = id, ep
			key := tp{topic, p.Partition}
			if code := codes[key]; code != 0 {
				errs = append(errs, code)
				if refused == 0 || isFenceCode(code) {
					refused = code
				}
				continue
			}
			parts = append(parts, key)
		}
	}
	if pid < 0 {
		return
	}
	t := c.txn(*req.TransactionID)
	for _, code := range errs {
		c.txnError(t, e, code)
	}
	if isFenceCode(refused) || t.stale(pid, epoch) {
		c.txnRefused(t, e, pid, epoch, refused)
		return
	}
	if len(parts) == 0 || (pid == t.producerID && epoch < t.epoch && !t.open) || !c.txnStep(t, pid, epoch) {
		// An older epoch of the current instance: a Produce of a
		// transaction that has ended since it was sent (KIP-890 part 2
		// gives each transaction its own epoch; the answer came after
		// the EndTxn's). It begins nothing.
		return
	}
	t.adopt(c, e, pid, epoch)
	c.addParts(t, e, parts)
}
