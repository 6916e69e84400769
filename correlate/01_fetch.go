package correlate

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// fetch handles Fetch (key 1). A Fetch names no group: it is attributed to
// one through its client's bindings (client host + client id). Records,
// bytes, high watermark, last stable offset and log start offset come from
// the response; the position from an answered Fetch: the offset after the
// records it delivered, or its fetch offset if it delivered none (an
// unanswered Fetch moved nothing the consumer has).
//
// Records and bytes are counted from batch headers as they are: a batch
// that starts before the fetch offset (a compressed batch the consumer
// resumes inside) counts whole, as the consumer receives and decodes it.
func (c *Correlator) fetch(e *decode.Exchange, req *kmsg.FetchRequest) {
	if req.ReplicaID >= 0 || req.ReplicaState.ID >= 0 {
		c.stats.ReplicaFetches++
		return
	}
	c.stats.Fetches++
	resp, _ := e.Resp.(*kmsg.FetchResponse)
	k := c.keyOf(e)
	a := c.attribute(k)
	switch a.status {
	case AttrGroup, AttrFormer:
		c.stats.FetchesAttributed++
	case AttrAmbiguous:
		c.stats.FetchesAmbiguous++
	default:
		c.stats.FetchesUnknown++
	}
	ask := c.askedBy(req)
	asked := ask.asked
	offsets := c.fetchSession(e, req, resp, asked)
	answered := resp != nil && resp.ErrorCode == 0
	// A Fetch that only closes its session (final epoch, nothing asked:
	// a client closing) is no sign of a consumer consuming.
	closing := req.SessionEpoch == -1 && req.SessionID != 0 && len(req.Topics) == 0
	if g := c.groups[a.group]; g != nil && a.group != "" && answered && !closing && e.RespTime.After(g.lastFetch) {
		g.lastFetch = e.RespTime.UTC()
	}
	for _, p := range ask.sorted {
		for _, f := range c.fetchTargets(a, k, p) {
			if f != nil && answered {
				f.position, f.positionAt = asked[p], e.RespTime.UTC()
			}
		}
	}
	if resp == nil {
		return
	}
	at := e.RespTime.UTC()
	nc := c.recordsNotCopied(e, resp)
	rc := req.IsolationLevel == 1
	if c.tcounts == nil {
		c.tcounts = make(map[tp]txnCounts)
	}
	clear(c.tcounts)
	for _, t := range resp.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			p := tp{topic, rp.Partition}
			b := decode.ScanBatches(rp.RecordBatches)
			bp := &b
			n := txnCounts{readCommitted: rc, lastControl: -1}
			if nc[p] {
				bp = nil
			} else if b.Control > 0 || len(rp.AbortedTransactions) > 0 {
				n = c.abort.countTxn(rp.RecordBatches, rp.AbortedTransactions, rc)
				c.tcounts[p] = n
			}
			if g := c.groups[a.group]; g != nil && a.group != "" && bp != nil && rp.ErrorCode == 0 && b.Batches > 0 {
				if ps := g.parts[p]; ps != nil {
					ps.groupFetched(rp.RecordBatches)
				}
			}
			for _, f := range c.fetchTargets(a, k, p) {
				if f == nil {
					continue
				}
				if off, ok := offsets[p]; ok && answered {
					if _, inReq := asked[p]; !inReq {
						f.position, f.positionAt = off, at // from the session
					}
				}
				f.got(rp, bp, at, a.member, k, n)
			}
		}
	}
	c.stableFetch(e, req, resp, offsets, c.tcounts)
}

// fetchAsk is what a Fetch request asks for, worked out once per exchange
// for fetch and fetchHazards (Correlator.ask, reused).
type fetchAsk struct {
	exchange int64        // Stats.Exchanges of the exchange it is for
	inReq    []tpOffset   // every partition in request order
	asked    map[tp]int64 // the fetch offset of each partition
	sorted   []tp         // asked's partitions in order
}

type tpOffset struct {
	p   tp
	off int64
}

// askedBy returns what req, the request of the current exchange, asks for.
// It is valid until the next exchange.
func (c *Correlator) askedBy(req *kmsg.FetchRequest) *fetchAsk {
	f := &c.ask
	if f.asked != nil && f.exchange == c.stats.Exchanges {
		return f
	}
	f.exchange = c.stats.Exchanges
	if f.asked == nil {
		f.asked = make(map[tp]int64)
	}
	clear(f.asked)
	f.inReq, f.sorted = f.inReq[:0], f.sorted[:0]
	for _, t := range req.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			k := tp{topic, p.Partition}
			f.inReq = append(f.inReq, tpOffset{k, p.FetchOffset})
			f.asked[k] = p.FetchOffset
		}
	}
	for k := range f.asked {
		f.sorted = append(f.sorted, k)
	}
	slices.SortFunc(f.sorted, cmpTP)
	return f
}

// fetchTargets returns the fetch states a Fetch of client k for p updates:
// its group's partition and, when known, its member's; or the client's
// unattributed consumption. Unused places are nil.
func (c *Correlator) fetchTargets(a attribution, k clientKey, p tp) (out [2]*fetchState) {
	if g := c.groups[a.group]; g != nil && a.group != "" {
		if ps := c.part(g, p); ps != nil {
			out[0] = &ps.fetch
		}
		if m := g.members[a.member]; m != nil {
			if m.fetched == nil {
				m.fetched = make(map[tp]*fetchState)
			}
			out[1] = fetchOf(m.fetched, p)
		}
		return out
	}
	cs := c.client(k)
	cs.lastSeen, cs.lastStatus, cs.candidates = c.now, a.status, a.candidates
	if cs.unattributed == nil {
		cs.unattributed = make(map[tp]*fetchState)
	}
	if cs.unattributed[p] == nil && len(cs.unattributed) >= c.opts.MaxPartitionsPerGroup {
		c.stats.Limits.PartitionsDropped++
		return out
	}
	out[0] = fetchOf(cs.unattributed, p)
	return out
}

// recordsNotCopied returns the partitions of resp whose record bytes the
// source did not copy (eBPF --snap): what they delivered is unknown.
func (c *Correlator) recordsNotCopied(e *decode.Exchange, resp *kmsg.FetchResponse) map[tp]bool {
	if len(e.RecordsNotCopied) == 0 || resp == nil {
		return nil
	}
	out := make(map[tp]bool, len(e.RecordsNotCopied))
	for _, ix := range e.RecordsNotCopied {
		if ix.Topic < len(resp.Topics) && ix.Partition < len(resp.Topics[ix.Topic].Partitions) {
			t := &resp.Topics[ix.Topic]
			out[tp{c.topicKey(t.Topic, t.TopicID), t.Partitions[ix.Partition].Partition}] = true
		}
	}
	return out
}

// got records one partition of a Fetch response; b is nil when its record
// bytes were not copied.
// n counts its transaction markers and aborted records.
func (f *fetchState) got(rp *kmsg.FetchResponseTopicPartition, b *decode.Batches, at time.Time, member string, k clientKey, n txnCounts) {
	f.fetches++
	f.lastFetch, f.fetchedBy, f.client, f.readCommitted = at, member, k, n.readCommitted
	if rp.ErrorCode != 0 {
		f.errCode, f.errAt = rp.ErrorCode, at
		return
	}
	f.hwm, f.lso, f.logStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	if b == nil {
		f.notCopied++
		return
	}
	f.records += b.Records
	f.control += n.control
	f.aborted += n.aborted
	f.bytes += b.Bytes
	f.batches += int64(b.Batches)
	if b.NextOffset > f.delivered {
		f.delivered = b.NextOffset
	}
	if b.NextOffset > f.position {
		f.position = b.NextOffset // the records delivered move the position on
	}
}
