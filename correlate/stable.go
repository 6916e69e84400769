package correlate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// stableState is what Fetch responses said of one partition's last stable
// offset (KIP-98: the first offset of its oldest open transaction, or its
// high watermark), over every consumer. Kept for transactional partitions
// only: fetched read_committed, or seen with a transaction marker, an
// aborted transaction or an LSO below the high watermark.
type stableState struct {
	lso, hw int64 // from the last response with the partition; -1 unknown
	// since is when lso took its value (the first response showing it),
	// sinceEv that response; last and lastEv the last read_committed
	// Fetch answered with the partition in its request or session.
	since, last     time.Time
	sinceEv, lastEv Evidence
	// waiters are read_committed consumers that fetched at or above lso
	// since then (the first few): they wait for it to move.
	waiters  []clientKey
	reported bool  // hanging_transaction reported for this lso
	maxStuck int64 // ms: the longest lso stayed below hw unmoved
	// rcFetches counts read_committed responses with the partition in
	// their request or session; markers and aborted the transaction
	// markers and AbortedTransactions entries seen, each once (by offset).
	rcFetches               int64
	markers, aborted        int64
	lastMarker, lastAborted int64
}

// maxWaiters caps stableState.waiters.
const maxWaiters = 8

// stableOf returns p's state, creating it when create; nil when absent or
// over the cap.
func (c *Correlator) stableOf(p tp, create bool) *stableState {
	if s := c.stable[p]; s != nil || !create {
		return s
	}
	if c.stable == nil {
		c.stable = make(map[tp]*stableState)
	}
	if len(c.stable) >= c.opts.MaxPartitionsPerGroup {
		c.stats.Limits.PartitionsDropped++
		return nil
	}
	s := &stableState{lso: -1, hw: -1, lastMarker: -1, lastAborted: -1}
	c.stable[p] = s
	return s
}

// stableFetch follows the last stable offset of the partitions of a
// consumer Fetch (v4+: the response carries it): offsets are the fetch
// offsets of every partition of the request or its session; a partition
// of them missing from an incremental response did not change (KIP-227).
// tc are the response partitions' transaction counts.
func (c *Correlator) stableFetch(e *decode.Exchange, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, offsets map[tp]int64, tc map[tp]txnCounts) {
	if req.Version < 4 || resp == nil || resp.ErrorCode != 0 {
		return
	}
	rc := req.IsolationLevel == 1
	at, ev := e.RespTime.UTC(), c.evidenceOf(e)
	seen := c.stableSeen[:0]
	for _, t := range resp.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			p := tp{topic, rp.Partition}
			seen = append(seen, p)
			if rp.ErrorCode != 0 || rp.LastStableOffset < 0 {
				continue
			}
			n, ok := tc[p]
			if !ok {
				n.lastControl = -1
			}
			s := c.stableOf(p, rc || rp.LastStableOffset < rp.HighWatermark || n.lastControl >= 0 || len(rp.AbortedTransactions) > 0)
			if s == nil {
				continue
			}
			s.count(rp, n)
			// A new value, or the first below the high watermark: the
			// wait for it starts now.
			if rp.LastStableOffset != s.lso || rp.LastStableOffset >= rp.HighWatermark || s.lso >= s.hw {
				c.stableMoved(s, p, at, ev)
			}
			s.lso, s.hw = rp.LastStableOffset, rp.HighWatermark
		}
	}
	c.stableSeen = seen
	if !rc {
		return
	}
	k := c.keyOf(e)
	for p, off := range offsets {
		if s := c.stableOf(p, false); s != nil {
			s.observe(k, off, at, ev)
		}
	}
	for _, p := range seen {
		if _, ok := offsets[p]; !ok {
			if s := c.stableOf(p, false); s != nil {
				s.observe(k, -1, at, ev)
			}
		}
	}
	for _, p := range sortedTPs(offsets) {
		if s := c.stableOf(p, false); s != nil {
			c.checkStuck(p, s)
		}
	}
}

// count notes the transaction markers and aborted transactions of one
// response partition not counted before.
func (s *stableState) count(rp *kmsg.FetchResponseTopicPartition, n txnCounts) {
	if n.lastControl > s.lastMarker {
		s.markers += max(n.control, 1)
		s.lastMarker = n.lastControl
	}
	for _, a := range rp.AbortedTransactions {
		if a.FirstOffset > s.lastAborted {
			s.aborted++
			s.lastAborted = a.FirstOffset
		}
	}
}

// stableMoved starts a new value of the last stable offset at at.
func (c *Correlator) stableMoved(s *stableState, p tp, at time.Time, ev Evidence) {
	if s.lso >= 0 && s.lso < s.hw && !s.since.IsZero() {
		s.maxStuck = max(s.maxStuck, millis(s.last.Sub(s.since)))
	}
	if s.reported {
		c.endEpisode(stableKey(p, s.lso))
	}
	s.since, s.sinceEv, s.last, s.lastEv = at, ev, at, ev
	s.waiters, s.reported = s.waiters[:0], false
}

// observe notes a read_committed Fetch of the partition answered at at,
// by client k from fetch offset off (-1 unknown).
func (s *stableState) observe(k clientKey, off int64, at time.Time, ev Evidence) {
	s.rcFetches++
	if at.After(s.last) {
		s.last, s.lastEv = at, ev
	}
	if s.lso >= 0 && s.lso < s.hw && off >= s.lso && !slices.Contains(s.waiters, k) && len(s.waiters) < maxWaiters {
		s.waiters = append(s.waiters, k)
	}
}

func stableKey(p tp, lso int64) string {
	return episodeKey(HazardHangingTransaction, "lso", p.topic, strconv.Itoa(int(p.partition)), strconv.FormatInt(lso, 10))
}

// checkStuck reports a last stable offset below the high watermark that
// did not move for LSOStuck while read_committed consumers waited at it
// (hanging_transaction): an open transaction holds it, and they get
// nothing past its first offset until it ends. It rests on no response
// showing it move: loss on the consumers' connections makes it info.
func (c *Correlator) checkStuck(p tp, s *stableState) {
	stuck := s.last.Sub(s.since)
	if s.reported || s.lso < 0 || s.lso >= s.hw || len(s.waiters) == 0 || stuck < c.opts.Hazards.LSOStuck {
		return
	}
	s.reported = true
	ev := &HazardEvent{Kind: HazardHangingTransaction, Severity: SeverityWarn, Topic: p.topic, Partition: i32p(p.partition),
		LastStableOffset: i64(s.lso), HighWatermark: i64(s.hw), DurationMillis: millis(stuck), at: s.last,
		Evidence: []Evidence{s.sinceEv, s.lastEv}, absent: &absence{clients: slices.Clone(s.waiters), from: s.since, to: s.last}}
	names := make([]string, 0, len(s.waiters))
	for _, w := range s.waiters {
		if !slices.Contains(names, w.clientID) {
			names = append(names, w.clientID)
		}
	}
	slices.Sort(names)
	ev.ClientIDs = names
	holder := "the transaction holding it is not in the capture"
	if t := c.txnHolding(p); t != nil {
		ev.ClientID, ev.ClientHost, ev.TransactionalID = t.client.clientID, t.client.host, t.id
		ev.ProducerID, ev.ProducerEpoch, ev.TransactionTimeoutMillis = i64(t.producerID), i16p(t.epoch), t.timeoutMillis
		ev.Evidence = append([]Evidence{t.beganEv}, ev.Evidence...)
		holder = fmt.Sprintf("the open transaction of %s on %s (transactional id %s, producer id %d, epoch %d) began at %s",
			t.client.clientID, t.client.host, t.id, t.producerID, t.epoch, stamp(t.began))
		if t.timeoutMillis > 0 {
			holder += fmt.Sprintf(" with a %d ms timeout", t.timeoutMillis)
		}
	}
	ev.Summary = fmt.Sprintf("%s/%d: the last stable offset stayed at %d, below the high watermark %d, for %s while "+
		"read_committed consumers %s waited at it: they get nothing past it until its transaction ends; %s",
		p.topic, p.partition, s.lso, s.hw, stuck.Round(time.Millisecond), strings.Join(names, ", "), holder)
	c.report(stableKey(p, s.lso), ev)
}

// txnHolding returns the open transaction that holds p, the oldest when
// several do (nil: none in the capture).
func (c *Correlator) txnHolding(p tp) *txnState {
	var out *txnState
	for _, t := range c.sortedTxns() {
		if _, ok := t.parts[p]; ok && t.open && (out == nil || t.began.Before(out.began)) {
			out = t
		}
	}
	return out
}
