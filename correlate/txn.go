package correlate

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Transaction actions (TransactionEvent.Action).
const (
	TxnInit             = "init"
	TxnBegin            = "begin"
	TxnPartitionsAdded  = "partitions_added"
	TxnOffsetsAdded     = "offsets_added"
	TxnCommit           = "commit"
	TxnAbort            = "abort"
	TxnEndedByEndTxn    = "end_txn"
	TxnEndedByInit      = "init_producer_id"
	TxnEndedByTimeout   = "timeout"
	defaultTxnTimeoutMs = 60000 // Kafka's transaction.timeout.ms default
)

// TransactionEvent ("type":"transaction") is one step of a transactional
// producer (KIP-98), per transactional id and producer id/epoch, across
// connections and brokers:
//
//   - init: InitProducerID answered (producer id and epoch; a new epoch for
//     the same transactional id fences every older instance).
//   - begin: the first partition or group added to a new transaction.
//   - partitions_added: partitions added, by AddPartitionsToTxn or, under
//     KIP-890 part 2 (transaction version 2), implicitly by the first
//     transactional Produce to each partition.
//   - offsets_added: a group's offsets joined the transaction, by
//     AddOffsetsToTxn or (KIP-890, TxnOffsetCommit v5+) the first
//     TxnOffsetCommit for it.
//   - commit, abort: the transaction ended. EndedBy says how: end_txn (an
//     EndTxn answered; ErrorCode set when refused), init_producer_id (a
//     new InitProducerID for the transactional id: the broker aborts the
//     open transaction) or timeout (kwire's inference: no EndTxn within
//     the transaction timeout, the broker aborts it; see the
//     hanging_transaction hazard).
//
// Requests carrying an epoch older than the transactional id's latest
// InitProducerID answer are a fenced instance's (zombie_producer) and do
// not change the current transaction.
type TransactionEvent struct {
	Action          string `json:"action"`
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	ClientID        string `json:"client_id"`
	ClientHost      string `json:"client_host"`
	Conn            *Conn  `json:"conn,omitempty"`
	// Coordinator is the transaction coordinator (FindCoordinator key
	// type 1, or the broker that answered InitProducerID/EndTxn).
	Coordinator string `json:"coordinator,omitempty"`
	// TimeoutMillis is the transaction timeout InitProducerID asked for
	// (0: the InitProducerID is not in the capture).
	TimeoutMillis int32 `json:"transaction_timeout_ms,omitempty"`
	// Partitions are, for partitions_added, those added by this request;
	// for commit and abort, all of the transaction's.
	Partitions map[string][]int32 `json:"partitions,omitempty"`
	// Group is the group of offsets_added; Groups those of a commit/abort.
	Group  string   `json:"group,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// EndedBy (commit, abort): end_txn, init_producer_id or timeout.
	EndedBy string `json:"ended_by,omitempty"`
	// Began and DurationMillis (commit, abort): the transaction's begin
	// and how long it was open.
	Began          *Time  `json:"began,omitempty"`
	DurationMillis *int64 `json:"duration_ms,omitempty"`
	ErrorCode      int16  `json:"error_code,omitempty"`
	Error          string `json:"error,omitempty"`

	at time.Time
}

// Type implements Event.
func (*TransactionEvent) Type() string { return "transaction" }

// Time implements Event: the request's time (timeout: when it ran out).
func (e *TransactionEvent) Time() time.Time { return e.at }

// txnState is one transactional id.
type txnState struct {
	id            string
	producerID    int64
	epoch         int16 // latest epoch the broker gave (InitProducerID, EndTxn v5+)
	initEpoch     int16 // epoch of the latest InitProducerID answer; -1: none seen
	initAt        time.Time
	initEvidence  *Evidence
	initClient    clientKey
	timeoutMillis int32
	client        clientKey // the current instance's
	coordinator   string
	lastSeen      time.Time

	txnBody // the open transaction
	// pending are transactions a request of a later epoch of the same
	// producer id showed ended, whose EndTxn is not seen yet (it comes on
	// the coordinator's connection, which the capture may deliver after
	// the next transaction's Produces): each waits for the EndTxn that
	// carries its epoch, which says how it ended. At most maxPendingTxns.
	pending []txnBody

	committed, aborted, timedOut, fenced int64
	// timedOutEpoch is the epoch of the last transaction kwire ended by
	// its timeout (-1: none). Under transactions v2 (KIP-890) the
	// coordinator's abort bumps the epoch, so the producer, if alive, is
	// refused its next Produce (INVALID_PRODUCER_EPOCH) and then aborts:
	// that is its own late abort, not a fenced instance's or a new
	// transaction's.
	timedOutEpoch int16
	// errors counts the broker's error answers to the id's requests by
	// "API:ERROR" (Transaction.Errors).
	errors map[string]int64
	// unseen counts the EndTxns accepted (in committed and aborted)
	// whose transaction's begin the capture did not show or delivered
	// after them: the broker ended a transaction all the same.
	unseen           int64
	durMax, durTotal int64 // ended transactions' durations, ms
}

// txnBody is one transaction of a transactional id.
type txnBody struct {
	open     bool
	epoch    int16 // the producer epoch that began it (KIP-890 part 2: each transaction has its own)
	began    time.Time
	beganEv  Evidence
	parts    map[tp]struct{}
	groups   map[string]struct{}
	hangSeen bool // hanging_transaction reported for this transaction
	// offsets are the TxnOffsetCommits accepted in the transaction, by
	// group: they become the group's committed offsets only when the
	// transaction commits (KIP-98).
	offsets map[string]map[tp]txnOffset
}

// maxPendingTxns bounds txnState.pending; an older one whose EndTxn never
// comes (lost) is dropped uncounted.
const maxPendingTxns = 8

// txnStep places a request of producer id pid and epoch, not stale, in t's
// transactions, whatever order the capture delivers connections in. A
// later epoch of the open transaction's producer id ends it: the broker
// gives a new epoch only with an EndTxn answer (v5+, transaction version
// 2) or an InitProducerID, and either ends the transaction first; so the
// open one becomes pending, waiting for its EndTxn. It reports false for a
// request of an earlier epoch than the open transaction's: one of a
// transaction that has ended, which begins nothing.
func (c *Correlator) txnStep(t *txnState, pid int64, epoch int16) bool {
	if !t.open || pid != t.producerID || t.txnBody.epoch < 0 {
		return true
	}
	switch {
	case epoch > t.txnBody.epoch:
		if len(t.pending) >= maxPendingTxns {
			t.pending = t.pending[1:]
		}
		t.pending = append(t.pending, t.txnBody)
		t.txnBody = txnBody{}
		return true
	case epoch < t.txnBody.epoch:
		return false
	}
	return true
}

// pendingOf returns the index of t's pending transaction of epoch (-1:
// none).
func (t *txnState) pendingOf(epoch int16) int {
	for i := range t.pending {
		if t.pending[i].epoch == epoch {
			return i
		}
	}
	return -1
}

// txnError counts the broker's error answer code to t's request e (none
// for 0).
func (c *Correlator) txnError(t *txnState, e *decode.Exchange, code int16) {
	if code == 0 {
		return
	}
	if t.errors == nil {
		t.errors = make(map[string]int64)
	}
	t.errors[kmsg.NameForKey(e.Key)+":"+errName(code)]++
}

// txn returns the state of transactional id, creating it.
func (c *Correlator) txn(id string) *txnState {
	if c.txns == nil {
		c.txns = make(map[string]*txnState)
	}
	t := c.txns[id]
	if t == nil {
		if len(c.txns) >= c.opts.MaxClients {
			c.evictTxns()
		}
		t = &txnState{id: id, producerID: -1, epoch: -1, initEpoch: -1, timedOutEpoch: -1}
		c.txns[id] = t
	}
	t.lastSeen = c.now
	return t
}

// evictTxns forgets transactional ids until fewer than 90% of the cap
// remain, in this order: ids only named (a FindCoordinator answer, which
// any client gets for any name: no producer id, no transaction seen),
// then those with no transaction open, then the others, each least
// recently seen first. One sort per tenth of the cap keeps a flood of
// names linear: one at a time, 12,000 names past a cap of 10,000 took
// 24 s (a FindCoordinator carries any number).
func (c *Correlator) evictTxns() {
	type entry struct {
		t    *txnState
		rank int
	}
	all := make([]entry, 0, len(c.txns))
	for _, t := range c.txns {
		all = append(all, entry{t, t.evictRank()})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		if c := a.t.lastSeen.Compare(b.t.lastSeen); c != 0 {
			return c
		}
		return strings.Compare(a.t.id, b.t.id)
	})
	for _, e := range all {
		if len(c.txns) < c.opts.MaxClients*9/10 {
			break
		}
		delete(c.txns, e.t.id)
		if c.txnPIDs[e.t.producerID] == e.t.id {
			delete(c.txnPIDs, e.t.producerID)
		}
		c.stats.Limits.TxnsEvicted++
	}
}

// evictRank orders t for evictTxns: 0 only named, 1 no transaction
// open, 2 one open.
func (t *txnState) evictRank() int {
	switch {
	case t.open:
		return 2
	case t.producerID < 0 && t.epoch < 0 && len(t.pending) == 0 && t.committed+t.aborted+t.timedOut+t.fenced == 0:
		return 0
	}
	return 1
}

// setProducer sets t's producer id, and indexes it for WriteTxnMarkers
// (txnOfProducer).
func (c *Correlator) setProducer(t *txnState, pid int64) {
	if t.producerID == pid {
		return
	}
	if c.txnPIDs[t.producerID] == t.id {
		delete(c.txnPIDs, t.producerID)
	}
	t.producerID = pid
	if pid >= 0 {
		if c.txnPIDs == nil {
			c.txnPIDs = make(map[int64]string)
		}
		c.txnPIDs[pid] = t.id
	}
}

// stale says whether a request with producer id pid and epoch comes from an
// instance older than the transactional id's latest InitProducerID.
func (t *txnState) stale(pid int64, epoch int16) bool {
	if t.initEpoch < 0 {
		return false
	}
	return pid != t.producerID || epoch < t.initEpoch
}

// adopt takes pid/epoch from a request when the capture has not shown them
// (it began mid-way) or they are newer.
func (t *txnState) adopt(c *Correlator, e *decode.Exchange, pid int64, epoch int16) {
	if t.producerID != pid || epoch > t.epoch {
		c.setProducer(t, pid)
		t.epoch = epoch
	}
	t.client = c.keyOf(e)
	if t.coordinator == "" && e.Conn != nil && !isProduce(e) {
		t.coordinator = e.Conn.Server.String()
	}
}

func isProduce(e *decode.Exchange) bool { return e.Key == 0 }

// event fills what every transaction event of t shares.
func (c *Correlator) txnEvent(t *txnState, e *decode.Exchange, action string) *TransactionEvent {
	ev := &TransactionEvent{Action: action, TransactionalID: t.id, ProducerID: t.producerID, ProducerEpoch: t.epoch,
		ClientID: t.client.clientID, ClientHost: t.client.host, Coordinator: t.coordinator, TimeoutMillis: t.timeoutMillis, at: c.now}
	if e != nil {
		cn := c.connOf(e)
		ev.Conn, ev.at = &cn, e.ReqTime.UTC()
	}
	return ev
}

// addParts adds partitions to t's transaction, beginning it if needed,
// and emits begin and partitions_added for those new to it.
func (c *Correlator) addParts(t *txnState, e *decode.Exchange, parts []tp) {
	c.beginTxn(t, e)
	added := map[string][]int32{}
	for _, p := range parts {
		if _, ok := t.parts[p]; ok {
			continue
		}
		if len(t.parts) >= c.opts.MaxPartitionsPerGroup {
			break
		}
		t.parts[p] = struct{}{}
		added[p.topic] = append(added[p.topic], p.partition)
	}
	if len(added) == 0 {
		return
	}
	for _, ps := range added {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	ev := c.txnEvent(t, e, TxnPartitionsAdded)
	ev.Partitions = added
	c.emit(ev)
}

// addGroup adds group's offsets to t's transaction.
func (c *Correlator) addGroup(t *txnState, e *decode.Exchange, group string) {
	c.beginTxn(t, e)
	if _, ok := t.groups[group]; ok || len(t.groups) >= c.opts.MaxGroups {
		return
	}
	t.groups[group] = struct{}{}
	ev := c.txnEvent(t, e, TxnOffsetsAdded)
	ev.Group = group
	c.emit(ev)
}

func (c *Correlator) beginTxn(t *txnState, e *decode.Exchange) {
	if t.open {
		return
	}
	t.txnBody = txnBody{open: true, epoch: t.epoch, began: e.ReqTime.UTC(), beganEv: c.evidenceOf(e),
		parts: map[tp]struct{}{}, groups: map[string]struct{}{}}
	c.emit(c.txnEvent(t, e, TxnBegin))
}

// endTxn ends t's open transaction at time at and emits commit or abort.
func (c *Correlator) endTxn(t *txnState, e *decode.Exchange, commit bool, by string, at time.Time) {
	if !t.open {
		return
	}
	action := TxnAbort
	switch {
	case commit:
		action = TxnCommit
		t.committed++
	case by == TxnEndedByTimeout:
		t.timedOut++
		t.timedOutEpoch = t.txnBody.epoch
	default:
		t.aborted++
	}
	ev := c.txnEvent(t, e, action)
	if e == nil {
		ev.at = at.UTC()
	}
	if t.txnBody.epoch >= 0 {
		ev.ProducerEpoch = t.txnBody.epoch
	}
	ev.EndedBy, ev.Began = by, timePtr(t.began)
	d := max(millis(at.Sub(t.began)), 0)
	ev.DurationMillis = i64(d)
	t.durMax, t.durTotal = max(t.durMax, d), t.durTotal+d
	ev.Partitions = partsMap(t.parts)
	ev.Groups = sortedKeys(t.groups)
	if commit {
		c.applyTxnOffsets(t, at)
	}
	offsets := t.offsets
	t.open, t.parts, t.groups, t.offsets = false, nil, nil, nil
	c.emit(ev)
	if !commit && len(offsets) > 0 {
		c.txnOffsetsAborted(t, offsets, e, by, at)
	}
}

// txnOffset is one partition of an accepted TxnOffsetCommit.
type txnOffset struct {
	offset int64
	member string
	gen    int32
	ev     Evidence // the TxnOffsetCommit
}

// applyTxnOffsets makes a committed transaction's offsets the groups'
// committed offsets, as the broker does at its commit marker.
func (c *Correlator) applyTxnOffsets(t *txnState, at time.Time) {
	for _, group := range sortedKeys(t.offsets) {
		g := c.groups[group]
		if g == nil {
			continue
		}
		c.anchor(g)
		for p, o := range t.offsets[group] {
			if ps := c.part(g, p); ps != nil {
				ps.setCommitted(o.offset, at.UTC(), o.member, o.gen, "commit")
				c.wantTime(p, ps)
			}
		}
	}
}

// partsMap turns a partition set into topic -> sorted partitions.
func partsMap(set map[tp]struct{}) map[string][]int32 {
	if len(set) == 0 {
		return nil
	}
	out := map[string][]int32{}
	for p := range set {
		out[p.topic] = append(out[p.topic], p.partition)
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	return out
}

// sortedTxns returns the transactional ids' states in id order.
func (c *Correlator) sortedTxns() []*txnState {
	out := make([]*txnState, 0, len(c.txns))
	for _, id := range sortedKeys(c.txns) {
		out = append(out, c.txns[id])
	}
	return out
}
