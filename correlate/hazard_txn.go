package correlate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// isFenceCode says whether a broker's answer fences the producer epoch
// that sent the request: PRODUCER_FENCED (KIP-588) or its older name,
// INVALID_PRODUCER_EPOCH.
func isFenceCode(code int16) bool {
	return code == kerr.ProducerFenced.Code || code == kerr.InvalidProducerEpoch.Code
}

// txnRefused judges a transactional request the broker refused, or sent
// by an epoch older than the transactional id's latest InitProducerID:
// when the broker's answer fences the epoch, its sender is a zombie
// producer (KIP-98): a newer instance of the same transactional id took
// over, and this one keeps sending. Other refusals change nothing.
//
// A fence answer to the current instance's epoch whose transaction ended
// by its timeout is no zombie's: under transactions v2 (KIP-890) the
// coordinator's abort of a timed-out transaction bumps the epoch, so the
// producer's next request in it is refused (INVALID_PRODUCER_EPOCH on a
// Produce) until it aborts; hanging_transaction told the timeout.
func (c *Correlator) txnRefused(t *txnState, e *decode.Exchange, pid int64, epoch int16, code int16) {
	if !isFenceCode(code) || t.timedOutOwn(pid, epoch) {
		return
	}
	t.fenced++
	k := c.keyOf(e)
	ev := &HazardEvent{Kind: HazardZombieProducer, Severity: SeverityWarn, ClientID: k.clientID, ClientHost: k.host,
		TransactionalID: t.id, ProducerID: i64(pid), ProducerEpoch: i16p(epoch), ErrorCode: code, Error: errName(code),
		at: e.ReqTime.UTC()}
	api := kmsg.NameForKey(e.Key)
	if t.stale(pid, epoch) && t.initEvidence != nil {
		ev.CurrentEpoch, ev.FencedBy = i16p(t.initEpoch), t.initClient.clientID
		ev.Evidence = []Evidence{*t.initEvidence, c.evidenceOf(e)}
		ev.Summary = fmt.Sprintf("producer %s on %s (transactional id %s, producer id %d, epoch %d) keeps sending after "+
			"InitProducerID by %s on %s gave epoch %d at %s: its %s was answered %s; two instances of one "+
			"transactional id run at once, and this one's writes are refused", k.clientID, k.host, t.id, pid, epoch,
			t.initClient.clientID, t.initClient.host, t.initEpoch, stamp(t.initEvidence.TS.Time), api, errName(code))
	} else {
		ev.Evidence = []Evidence{c.evidenceOf(e)}
		ev.Summary = fmt.Sprintf("producer %s on %s (transactional id %s, producer id %d, epoch %d): its %s was answered %s: "+
			"a newer instance of the transactional id fenced it (its InitProducerID is not in the capture)",
			k.clientID, k.host, t.id, pid, epoch, api, errName(code))
	}
	c.report(episodeKey(HazardZombieProducer, t.id, strconv.FormatInt(pid, 10), strconv.Itoa(int(epoch))), ev)
}

// timedOutOwn says whether pid and epoch are the current instance's (its
// InitProducerID seen, none newer) in the transaction kwire last ended by
// its timeout.
func (t *txnState) timedOutOwn(pid int64, epoch int16) bool {
	return t.initEpoch >= 0 && !t.stale(pid, epoch) && pid == t.producerID && epoch == t.timedOutEpoch
}

// txnCommitRejected reports a TxnOffsetCommit the broker refused
// (txn_offset_commit_rejected): the group's progress is not part of the
// transaction, and the group will replay what the transaction produced
// from.
func (c *Correlator) txnCommitRejected(t *txnState, e *decode.Exchange, req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse) {
	k := c.keyOf(e)
	offsets := map[tp]int64{}
	for _, rt := range req.Topics {
		topic := c.topicKey(rt.Topic, rt.TopicID)
		for _, p := range rt.Partitions {
			offsets[tp{topic, p.Partition}] = p.Offset
		}
	}
	for _, rt := range resp.Topics {
		topic := c.topicKey(rt.Topic, rt.TopicID)
		for _, p := range rt.Partitions {
			if p.ErrorCode == 0 {
				continue
			}
			key := tp{topic, p.Partition}
			ev := partHazardEvent(HazardTxnOffsetCommitRejected, SeverityWarn, req.Group, key, e.ReqTime)
			ev.MemberID, ev.Generation = req.MemberID, i32p(req.Generation)
			ev.ClientID, ev.ClientHost, ev.TransactionalID = k.clientID, k.host, t.id
			ev.ProducerID, ev.ProducerEpoch = i64(req.ProducerID), i16p(req.ProducerEpoch)
			ev.ErrorCode, ev.Error = p.ErrorCode, errName(p.ErrorCode)
			if off, ok := offsets[key]; ok {
				ev.Offset = i64(off)
			}
			ev.Evidence = []Evidence{c.evidenceOf(e)}
			ev.Summary = fmt.Sprintf("TxnOffsetCommit of group %s for %s[%d] by %s (transactional id %s) was answered %s: "+
				"the offset is not part of the transaction, so the group will process again what it produced from",
				req.Group, topic, p.Partition, k.clientID, t.id, errName(p.ErrorCode))
			c.report(episodeKey(HazardTxnOffsetCommitRejected, req.Group, topic, strconv.Itoa(int(p.Partition)),
				t.id, strconv.FormatInt(req.ProducerID, 10), strconv.Itoa(int(req.ProducerEpoch))), ev)
		}
	}
}

// txnTick looks for transactions open past their timeout
// (hanging_transaction): partitions added and no EndTxn within the
// transaction timeout InitProducerID asked for (Kafka's 60 s default when
// the capture does not show it), counted from the transaction's begin, as
// the broker counts it. The broker then aborts the transaction; until it
// does, read_committed consumers of its partitions wait at its first
// offset (the last stable offset does not move). It rests on the absence
// of an EndTxn from the producer's client.
//
// When the input holds a coordinator's WriteTxnMarkers (the brokers'
// listeners are captured), the transaction stays open until the broker's
// abort shows: writeTxnMarkers ends it at the markers' answer. The
// coordinator looks for timed-out transactions every
// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by
// default), so kwire waits txnAbortWait past the deadline, or for the end
// of the input (final), before it ends the transaction at its deadline,
// its markers not in the capture. Without markers in the input (clients'
// traffic only) it ends the transaction at its deadline at once.
func (c *Correlator) txnTick(final bool) {
	for _, t := range c.sortedTxns() {
		if !t.open {
			continue
		}
		timeout, assumed := int64(t.timeoutMillis), ""
		if timeout <= 0 {
			timeout, assumed = defaultTxnTimeoutMs, " (assumed: the InitProducerID is not in the capture)"
		}
		deadline := t.began.Add(time.Duration(timeout) * time.Millisecond)
		if t.hangSeen {
			if final || !c.now.Before(deadline.Add(txnAbortWait)) {
				c.endTxn(t, nil, false, TxnEndedByTimeout, deadline)
			}
			continue
		}
		if c.now.Before(deadline) {
			continue
		}
		t.hangSeen = true
		ev := &HazardEvent{Kind: HazardHangingTransaction, Severity: SeverityWarn, ClientID: t.client.clientID,
			ClientHost: t.client.host, TransactionalID: t.id, ProducerID: i64(t.producerID), ProducerEpoch: i16p(t.epoch),
			TxnPartitions: partsMap(t.parts), Groups: sortedKeys(t.groups), TransactionTimeoutMillis: int32(timeout),
			DurationMillis: timeout, at: deadline.UTC(), Evidence: []Evidence{t.beganEv},
			absent: &absence{clients: []clientKey{t.client}, from: t.began, to: deadline}}
		ev.Summary = fmt.Sprintf("transaction of %s on %s (transactional id %s, producer id %d, epoch %d) began at %s "+
			"with %d partitions and %d groups and saw no EndTxn within its %d ms timeout%s: read_committed consumers "+
			"of its partitions waited until the broker aborted it", t.client.clientID, t.client.host, t.id, t.producerID,
			t.epoch, stamp(t.began), len(t.parts), len(t.groups), timeout, assumed)
		c.report(episodeKey(HazardHangingTransaction, t.id, strconv.FormatInt(t.producerID, 10), t.began.String()), ev)
		if final || !c.markersSeen {
			c.endTxn(t, nil, false, TxnEndedByTimeout, deadline)
		}
	}
}

// txnAbortWait is how long past a transaction's timeout kwire waits for
// its coordinator's abort markers: Kafka's default
// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s)
// with room for the markers' round trips.
const txnAbortWait = 30 * time.Second

func i16p(v int16) *int16 { return &v }

// txnOffsetsAborted reports the offsets TxnOffsetCommits put in t's
// transaction, which ended aborted (txn_offsets_aborted): they never
// become the group's committed offsets (KIP-98), so the group resumes from
// its committed offset and processes again what the transaction consumed.
// e is the exchange that ended it (nil: kwire's timeout inference, which
// rests on the absence of an EndTxn, as hanging_transaction does).
func (c *Correlator) txnOffsetsAborted(t *txnState, offsets map[string]map[tp]txnOffset, e *decode.Exchange, by string, at time.Time) {
	var end []Evidence
	how := "was aborted by its EndTxn"
	switch {
	case e != nil && by == TxnEndedByInit:
		end, how = []Evidence{c.evidenceOf(e)}, "was aborted by a new InitProducerID of its transactional id"
	case e != nil && by == TxnEndedByTimeout:
		end, how = []Evidence{c.evidenceOf(e)}, "saw no EndTxn within its timeout, so its coordinator aborted it (WriteTxnMarkers)"
	case e != nil:
		end = []Evidence{c.evidenceOf(e)}
	default:
		how = "saw no EndTxn within its timeout, so the broker aborts it"
	}
	for _, group := range sortedKeys(offsets) {
		g := c.groups[group]
		for _, p := range sortedTPs(offsets[group]) {
			o := offsets[group][p]
			ev := partHazardEvent(HazardTxnOffsetsAborted, SeverityWarn, group, p, at)
			ev.MemberID, ev.Generation = o.member, i32p(o.gen)
			ev.ClientID, ev.ClientHost, ev.TransactionalID = t.client.clientID, t.client.host, t.id
			ev.ProducerID, ev.ProducerEpoch, ev.Offset = i64(t.producerID), i16p(t.epoch), i64(o.offset)
			ev.Evidence = append([]Evidence{o.ev}, end...)
			stays := "its committed offset is not in the capture"
			if ps := g.partOf(p); ps != nil && ps.hasCommitted {
				ev.PreviousOffset = i64(ps.committed)
				stays = fmt.Sprintf("its committed offset stays %d", ps.committed)
				if o.offset > ps.committed {
					ev.FromOffset, ev.ToOffset = i64(ps.committed), i64(o.offset-1)
					stays += c.replayText(ev, group, o.member, p, ps.committed, o.offset)
				}
			}
			ev.Summary = fmt.Sprintf("%s %s/%d: the transaction of %s on %s (transactional id %s, producer id %d, epoch %d) "+
				"committed offset %d for the group (TxnOffsetCommit at %s) and %s: the offset is discarded, %s",
				group, p.topic, p.partition, t.client.clientID, t.client.host, t.id, t.producerID, t.epoch, o.offset,
				stamp(o.ev.TS.Time), how, stays)
			if e == nil {
				ev.absent = &absence{clients: []clientKey{t.client}, from: t.began, to: at}
			}
			c.report(partKey(HazardTxnOffsetsAborted, group, p, t.id, strconv.FormatInt(t.producerID, 10), t.began.String()), ev)
		}
	}
}

// replayText fills ev's Replayed, ReplayedOffsets and MarkerOffsets for
// offsets from..to-1, which the group will fetch again, and says so. Only
// records count: a transaction marker takes an offset and is never given
// to the application (KIP-98). They are counted from the batches the
// committing member (or, failing that, another member of the group) was
// delivered; when no member's cover them all, the count is not known and
// only the offsets are named.
func (c *Correlator) replayText(ev *HazardEvent, group, member string, p tp, from, to int64) string {
	ms := c.hz().members[group]
	keys := append([]string{member}, sortedKeys(ms)...)
	for _, k := range keys {
		mh := ms[k]
		if mh == nil || mh.parts[p] == nil {
			continue
		}
		n, offs, markers, ok := mh.parts[p].records(from, to)
		if !ok {
			continue
		}
		ev.Replayed, ev.ReplayedOffsets, ev.MarkerOffsets = i64(n), offs, markers
		text := fmt.Sprintf(" and %d records (offsets %s) will be processed again", n, offsetList(offs, n))
		switch len(markers) {
		case 0:
		case 1:
			text += fmt.Sprintf("; offset %d is a transaction marker, not a record", markers[0])
		default:
			text += fmt.Sprintf("; offsets %s are transaction markers, not records", offsetList(markers, int64(len(markers))))
		}
		return text
	}
	return fmt.Sprintf(" and offsets %d..%d will be fetched again (how many are records, not transaction markers, "+
		"the capture does not show)", from, to-1)
}

// offsetList writes offsets as "4, 5, 6", or "4..6" when there are more
// than 5 in a row, and "..." when n is more than listed.
func offsetList(offs []int64, n int64) string {
	if len(offs) == 0 {
		return "none"
	}
	if len(offs) > 5 && offs[len(offs)-1]-offs[0] == int64(len(offs)-1) {
		s := fmt.Sprintf("%d..%d", offs[0], offs[len(offs)-1])
		if n > int64(len(offs)) {
			s += "..."
		}
		return s
	}
	parts := make([]string, len(offs))
	for i, o := range offs {
		parts[i] = strconv.FormatInt(o, 10)
	}
	s := strings.Join(parts, ", ")
	if n > int64(len(offs)) {
		s += ", ..."
	}
	return s
}
