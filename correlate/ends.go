package correlate

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// endState is the newest evidence on the wire of where a partition ends:
// the high watermark (and last stable offset) of any Fetch response, a
// consumer's or a follower's; the offset after the records a Produce
// response acknowledged; a ListOffsets answer for the latest offset.
// A group's lag is measured against it, not against the group's own last
// Fetch: a consumer whose processing hangs fetches no more, and its own
// last high watermark grows old while the others' move on.
type endState struct {
	hwm newest // from fetch, produce or list_offsets
	lso newest // from fetch or list_offsets

	// Lag in seconds (ends_time.go): batches seen, sorted by base
	// offset; the end offsets seen at capture times; groups' partitions
	// waiting for a batch that holds their committed offset.
	batches []batchTime
	marks   []endMark
	waiting []*partState

	// acked are the records Produce responses acknowledged, by offset
	// (hazard_acked.go); ackedHi the highest offset of them.
	acked   []ackedRun
	ackedHi int64
}

// End sources, as EndFrom says them.
const (
	endFetch       = "fetch"
	endProduce     = "produce"
	endListOffsets = "list_offsets"
)

// endEvidence learns partition ends from e's response. Every correlator
// of a sharded run takes it from every exchange (Tick too), so that each
// group's lag is measured against the same end.
func (c *Correlator) endEvidence(e *decode.Exchange) {
	if e.Resp == nil || e.Req == nil {
		return
	}
	at := e.RespTime.UTC()
	ms := at.UnixMilli()
	switch resp := e.Resp.(type) {
	case *kmsg.FetchResponse:
		if resp.ErrorCode != 0 {
			return
		}
		copied := len(e.RecordsNotCopied) == 0
		for i := range resp.Topics {
			t := &resp.Topics[i]
			topic, ok := c.endTopic(t.Topic, t.TopicID)
			if !ok {
				continue
			}
			for j := range t.Partitions {
				rp := &t.Partitions[j]
				if rp.ErrorCode != 0 || rp.HighWatermark < 0 {
					continue
				}
				if s := c.endOf(tp{topic, rp.Partition}); s != nil {
					s.hwm.set(rp.HighWatermark, at, endFetch)
					if rp.LastStableOffset >= 0 {
						s.lso.set(rp.LastStableOffset, at, endFetch)
					}
					s.addMark(rp.HighWatermark, ms)
					if copied {
						s.fetchBatches(rp.RecordBatches)
					}
				}
			}
		}
	case *kmsg.ProduceResponse:
		req, _ := e.Req.(*kmsg.ProduceRequest)
		if req == nil {
			return
		}
		batches := c.produceBatches(e, req)
		for i := range resp.Topics {
			t := &resp.Topics[i]
			topic, ok := c.endTopic(t.Topic, t.TopicID)
			if !ok {
				continue
			}
			for j := range t.Partitions {
				rp := &t.Partitions[j]
				pr := batches[tp{topic, rp.Partition}]
				bs := pr.batches
				if rp.ErrorCode != 0 || rp.BaseOffset < 0 || len(bs) == 0 {
					continue
				}
				s := c.endOf(tp{topic, rp.Partition})
				if s == nil {
					continue
				}
				for _, b := range bs {
					b.base, b.last = b.base+rp.BaseOffset, b.last+rp.BaseOffset
					if rp.LogAppendTime >= 0 { // the topic's timestamps are the broker's
						b.first, b.max, b.logAppend = rp.LogAppendTime, rp.LogAppendTime, true
					}
					s.addBatch(b)
				}
				end := bs[len(bs)-1].last + rp.BaseOffset + 1
				s.hwm.set(end, at, endProduce)
				s.addMark(end, ms)
				c.producedAcked(e, req, s, tp{topic, rp.Partition}, rp.BaseOffset, end-1, t.TopicID, pr.records)
			}
		}
	case *kmsg.ListOffsetsResponse:
		req, _ := e.Req.(*kmsg.ListOffsetsRequest)
		if req == nil {
			return
		}
		latest := make(map[tp]bool)
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if p.Timestamp == -1 {
					latest[tp{t.Topic, p.Partition}] = true
				}
			}
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				p := tp{t.Topic, rp.Partition}
				if req.Version == 0 { // the old form (Burrow 1.2 asks it): the newest offset first
					rp.Offset = -1
					if len(rp.OldStyleOffsets) > 0 {
						rp.Offset = rp.OldStyleOffsets[0]
					}
				}
				if !latest[p] || rp.ErrorCode != 0 || rp.Offset < 0 {
					continue
				}
				s := c.endOf(p)
				switch {
				case s == nil:
				case req.IsolationLevel == 1:
					s.lso.set(rp.Offset, at, endListOffsets)
				default:
					s.hwm.set(rp.Offset, at, endListOffsets)
					s.addMark(rp.Offset, ms)
				}
			}
		}
	}
}

// produced is one partition of a Produce request: its batches, with
// offsets relative to the base offset its response gives, and its records
// (what the batch headers say of the producer).
type produced struct {
	batches []batchTime
	records []byte
}

// produceBatches returns each partition of a Produce request that still
// holds batch headers (kwire analyze keeps a partition's only batch's
// header, decode.DropRecords). A partition whose records are gone, or
// were not copied (eBPF --snap), is left out.
func (c *Correlator) produceBatches(e *decode.Exchange, req *kmsg.ProduceRequest) map[tp]produced {
	if len(e.RecordsNotCopied) > 0 {
		return nil // which partitions is not said for requests: trust none
	}
	out := make(map[tp]produced)
	for i := range req.Topics {
		t := &req.Topics[i]
		topic, ok := c.endTopic(t.Topic, t.TopicID)
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			var bs []batchTime
			next := int64(0)
			decode.ScanHeaders(p.Records, func(h *decode.BatchHeader) {
				n := h.Last - h.Base // each batch of a request numbers its records from 0
				bs = append(bs, batchTime{base: next, last: next + n, first: h.FirstTimestamp, max: h.MaxTimestamp})
				next += n + 1
			})
			if len(bs) > 0 {
				out[tp{topic, p.Partition}] = produced{bs, p.Records}
			}
		}
	}
	return out
}

// endTopic is topicKey without its side effects: an id not (yet)
// resolved to a name gives no evidence.
func (c *Correlator) endTopic(name string, id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return name, name != ""
	}
	return c.topicName(id)
}

// endOf returns p's end state, made if there is room (MaxPartitionsPerGroup
// partitions in all; Limits.EndsDropped counts the others).
func (c *Correlator) endOf(p tp) *endState {
	if s := c.ends[p]; s != nil {
		return s
	}
	if c.ends == nil {
		c.ends = make(map[tp]*endState)
	}
	if len(c.ends) >= c.opts.MaxPartitionsPerGroup {
		c.stats.Limits.EndsDropped++
		return nil
	}
	s := &endState{hwm: newest{off: -1}, lso: newest{off: -1}}
	c.ends[p] = s
	return s
}

// newest is an offset as the newest evidence gave it: when, and what gave
// it; off -1 unknown.
type newest struct {
	off  int64
	at   time.Time
	from string
}

// set keeps the newest: evidence captured earlier than what is known
// (another broker's capture, a late direction) does not replace it.
func (n *newest) set(off int64, at time.Time, from string) {
	if n.off >= 0 && at.Before(n.at) || at.Equal(n.at) && off < n.off {
		return
	}
	*n = newest{off, at, from}
}

// end returns p's end for a consumer (read_committed: its last stable
// offset), when and from what it was learned; ok false when unknown.
func (c *Correlator) end(p tp, readCommitted bool) (off int64, at time.Time, from string, ok bool) {
	s := c.ends[p]
	switch {
	case s == nil:
		return -1, time.Time{}, "", false
	case readCommitted && s.lso.off >= 0:
		return s.lso.off, s.lso.at, s.lso.from, true
	case s.hwm.off >= 0:
		return s.hwm.off, s.hwm.at, s.hwm.from, true
	}
	return -1, time.Time{}, "", false
}

// end returns the end f's last response gave its consumer (read_committed:
// the last stable offset), -1 if unknown.
func (f *fetchState) end() int64 {
	if f.readCommitted && f.lso >= 0 {
		return f.lso
	}
	return f.hwm
}

// partEndFrom returns a group partition's end: the newest evidence of any
// client's (endState), its own last Fetch's if newer; when and from what.
func (c *Correlator) partEndFrom(ps *partState, p tp) (int64, time.Time, string, bool) {
	end, endAt, from, ok := c.end(p, ps.fetch.readCommitted)
	if own := ps.fetch.end(); own >= 0 && (!ok || ps.fetch.lastFetch.After(endAt)) {
		end, endAt, from, ok = own, ps.fetch.lastFetch, endFetch, true
	}
	return end, endAt, from, ok
}

// partEnd is partEndFrom's end alone.
func (c *Correlator) partEnd(ps *partState, p tp) (int64, bool) {
	end, _, _, ok := c.partEndFrom(ps, p)
	return end, ok
}
