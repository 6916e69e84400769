package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// writeTxnMarkers handles WriteTxnMarkers (key 27), which a transaction
// coordinator sends the partitions' leaders to end a transaction (KIP-98),
// broker to broker. Under transaction version 2 (KIP-890 part 2) a marker
// carries the epoch the coordinator bumped the producer to; when the
// coordinator aborts on its own (a transaction past its timeout, or an
// older instance's fenced by a new InitProducerID) no client is told
// that epoch, and the markers are where the wire shows it. kwire takes it
// as the transactional id's epoch, as the coordinator's log has it. An
// abort marker for a transaction kwire saw hang past its timeout
// (txnTick) is the coordinator's abort: the transaction ends there.
func (c *Correlator) writeTxnMarkers(e *decode.Exchange, req *kmsg.WriteTxnMarkersRequest) {
	if e.Resp == nil {
		return
	}
	c.markersSeen = true
	for _, m := range req.Markers {
		t := c.txnOfProducer(m.ProducerID)
		if t == nil {
			continue
		}
		if !m.Committed && t.open && t.hangSeen {
			c.endTxn(t, e, false, TxnEndedByTimeout, e.RespTime)
		}
		if m.ProducerEpoch > t.epoch {
			t.epoch = m.ProducerEpoch
		}
	}
}

// txnOfProducer finds the transactional id whose producer id is pid (nil:
// none): the coordinator gives each transactional id its own.
func (c *Correlator) txnOfProducer(pid int64) *txnState {
	if t := c.txns[c.txnPIDs[pid]]; t != nil && t.producerID == pid {
		return t
	}
	return nil
}
