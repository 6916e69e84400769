package correlate

import (
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Correlator rebuilds consumer groups from exchanges. It is not safe for
// concurrent use: call it from one goroutine, the decoder's or (with
// Detach) one of its own.
type Correlator struct {
	opts    Options
	sink    Sink
	names   connNames    // endpoint text of recent connections
	codes   map[tp]int16 // commitCodes' map, reused
	codesOf *kmsg.OffsetCommitResponse
	codesAt int64        // Stats.Exchanges when codes was made for codesOf
	spans   []span       // scanSpans' output, reused
	ask     fetchAsk     // the current Fetch's partitions (askedBy)
	got     []gotPart    // fetchHazards' response partitions, reused
	abort   abortTracker // aborted transactions of a Fetch partition, reused
	// tcounts and stableSeen are fetch's and stableFetch's per-response
	// scratch, reused.
	tcounts    map[tp]txnCounts
	stableSeen []tp

	// Topic ids (topic_ids.go): names learned from Metadata, and ids used
	// as "id:<hex>" keys (with the clock of their last use); at most
	// MaxTopicIDs each.
	topics          decode.Topics
	unresolved      map[[16]byte]uint64
	unresolvedClock uint64
	brokers         map[int32]string // node id -> host:port, from Metadata
	// partitionCounts: topic name -> partitions, from Metadata responses
	// (at most MaxPartitionsPerGroup topics).
	partitionCounts map[string]int32
	groups          map[string]*groupState
	// loose: the groups of groups not anchored (groups.go), and the
	// clock of groupState.used.
	loose      map[string]*groupState
	groupClock uint64
	// loosePartitions counts the partitions of loose groups, at most
	// MaxPartitionsPerGroup in all.
	loosePartitions int
	clients         map[clientKey]*clientState
	sessions        map[sessionKey]*fetchSession
	// txns: transactional id -> its producer and open transaction
	// (txn.go), at most MaxClients.
	txns map[string]*txnState
	// txnPIDs indexes txns by producer id (setProducer).
	txnPIDs map[int64]string
	// markersSeen: a transaction coordinator's WriteTxnMarkers is in the
	// input, so a timed-out transaction's abort will show (txnTick).
	markersSeen bool
	// stable: partition -> its last stable offset as Fetch responses
	// showed it (stable.go), at most MaxPartitionsPerGroup.
	stable map[tp]*stableState
	// ends: partition -> the newest evidence of its end (ends.go), at
	// most MaxPartitionsPerGroup.
	ends map[tp]*endState

	now   time.Time // latest capture time seen
	first time.Time // earliest request time seen (health windows begin no earlier)
	// lastHealth is when healthTick last judged health for hazards;
	// lastSample the grid time of the last health samples.
	lastHealth time.Time
	lastSample time.Time
	lastSweep  time.Time
	closed     bool
	stats      Stats
	hazards    *hazardState // see hazard.go; nil until first used
	loss       lossState    // see loss.go
}

// sweepEvery is how much capture time passes between looks for silent
// members.
const sweepEvery = time.Second

// New returns a Correlator that passes its events to sink (nil: none).
// opts may be nil.
func New(opts *Options, sink Sink) *Correlator {
	o := opts.withDefaults()
	return &Correlator{
		opts:            o,
		sink:            sink,
		topics:          decode.Topics{Max: o.MaxTopicIDs},
		unresolved:      make(map[[16]byte]uint64),
		brokers:         make(map[int32]string),
		partitionCounts: make(map[string]int32),
		groups:          make(map[string]*groupState),
		loose:           make(map[string]*groupState),
		clients:         make(map[clientKey]*clientState),
		sessions:        make(map[sessionKey]*fetchSession),
	}
}

// Exchange takes in one decoded exchange. e is only read during the call.
// Exchanges must come in capture order (as the decoder delivers them).
func (c *Correlator) Exchange(e *decode.Exchange) {
	if c.closed || e == nil {
		return
	}
	c.stats.Exchanges++
	c.advance(e)
	c.healthSamples()
	c.lossExchange(e)
	c.learnTopics(e)
	c.endEvidence(e)
	if e.Req != nil {
		c.dispatch(e)
	}
	c.hazardExchange(e)
	c.waited()
}

// waited runs, after an exchange, what waits for time: hazards held
// until loss would have been seen, and the look for silent members.
func (c *Correlator) waited() {
	if h := c.hazards; h != nil && len(h.pending) > 0 {
		c.releasePending(false)
	}
	if c.now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = c.now
		c.sweep()
	}
}

// dispatch hands e to the handler of its API.
func (c *Correlator) dispatch(e *decode.Exchange) {
	switch req := e.Req.(type) {
	case *kmsg.FetchRequest:
		c.fetch(e, req)
	case *kmsg.ListOffsetsRequest:
		c.listOffsets(e, req)
	case *kmsg.MetadataRequest:
		c.metadata(e)
	case *kmsg.OffsetCommitRequest:
		c.offsetCommit(e, req)
	case *kmsg.OffsetFetchRequest:
		c.offsetFetch(e, req)
	case *kmsg.FindCoordinatorRequest:
		c.findCoordinator(e, req)
	case *kmsg.JoinGroupRequest:
		c.joinGroup(e, req)
	case *kmsg.HeartbeatRequest:
		c.heartbeat(e, req)
	case *kmsg.LeaveGroupRequest:
		c.leaveGroup(e, req)
	case *kmsg.SyncGroupRequest:
		c.syncGroup(e, req)
	case *kmsg.DescribeGroupsRequest:
		c.describeGroups(e)
	case *kmsg.ListGroupsRequest:
		c.listGroups(e)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		c.consumerGroupHeartbeat(e, req)
	case *kmsg.ProduceRequest:
		c.produceTxn(e, req)
	case *kmsg.InitProducerIDRequest:
		c.initProducerID(e, req)
	case *kmsg.AddPartitionsToTxnRequest:
		c.addPartitionsToTxn(e, req)
	case *kmsg.AddOffsetsToTxnRequest:
		c.addOffsetsToTxn(e, req)
	case *kmsg.EndTxnRequest:
		c.endTxnReq(e, req)
	case *kmsg.WriteTxnMarkersRequest:
		c.writeTxnMarkers(e, req)
	case *kmsg.TxnOffsetCommitRequest:
		c.txnOffsetCommit(e, req)
	case *kmsg.ShareGroupHeartbeatRequest:
		c.shareGroupHeartbeat(e, req)
	case *kmsg.ShareFetchRequest:
		c.shareFetch(e, req)
	case *kmsg.ShareAcknowledgeRequest:
		c.shareAcknowledge(e, req)
	case *kmsg.StreamsGroupHeartbeatRequest:
		c.streamsGroupHeartbeat(e, req)
	case *kmsg.StreamsGroupDescribeRequest:
		c.streamsGroupDescribe(e)
	}
}

// advance moves the clock to the latest time of e.
func (c *Correlator) advance(e *decode.Exchange) {
	t := e.ReqTime
	if e.RespTime.After(t) {
		t = e.RespTime
	}
	if t.After(c.now) {
		c.now = t.UTC()
	}
	if c.first.IsZero() || !e.ReqTime.IsZero() && e.ReqTime.Before(c.first) {
		c.first = e.ReqTime.UTC()
	}
}

// Close ends the input at capture time t: members silent past their
// session timeout by t expire, and generations not yet emitted are. Later
// calls to Exchange are ignored. Snapshot still works.
func (c *Correlator) Close(t time.Time) {
	if c.closed {
		return
	}
	if t.After(c.now) {
		c.now = t.UTC()
	}
	for _, g := range c.sortedGroups() {
		c.emitPending(g)
	}
	for _, g := range c.sortedGroups() {
		for _, m := range g.sortedMembers() {
			if m.status != statusLive {
				continue
			}
			if d, ok := m.deadline(c); ok && !d.After(c.now) {
				c.memberGone(g, m, MemberExpired, "", d)
			}
		}
		c.emitPending(g)
	}
	c.hazardClose()
	c.closed = true
}

// Stats returns the counters so far.
func (c *Correlator) Stats() Stats {
	s := c.stats
	s.UnresolvedTopicIDs = len(c.unresolved)
	return s
}

func (c *Correlator) emit(ev Event) {
	if c.sink != nil {
		c.sink.Event(ev)
	}
}

func (c *Correlator) sortedGroups() []*groupState {
	names := make([]string, 0, len(c.groups))
	for n := range c.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*groupState, len(names))
	for i, n := range names {
		out[i] = c.groups[n]
	}
	return out
}

// errName returns Kafka's name for an error code ("" for 0).
func errName(code int16) string { return ErrorName(code) }

// ErrorName returns Kafka's name for an error code: "" for 0, and
// UNKNOWN_<code> for a code Kafka does not define (kerr answers those
// with UNKNOWN_SERVER_ERROR, which is -1's name).
func ErrorName(code int16) string {
	switch code {
	case 0:
		return ""
	case -1:
		return "UNKNOWN_SERVER_ERROR"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("UNKNOWN_%d", code)
}

// millis converts a duration to whole milliseconds.
func millis(d time.Duration) int64 { return d.Milliseconds() }

func strPtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func strVal(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Tick is Exchange for an exchange another correlator takes (a shard of
// route.Shards): the clock moves to its times, its connection's loss
// bookkeeping is kept (whose clients it carries, when it was last heard,
// a lost response), and what waits for time runs, as Exchange would run
// it; nothing else.
func (c *Correlator) Tick(e *decode.Exchange) {
	if c.closed || e == nil {
		return
	}
	c.stats.Exchanges++
	c.advance(e)
	c.healthSamples()
	c.lossExchange(e)
	c.endEvidence(e)
	c.hazardTimers()
	c.waited()
}

// TickBodies reports whether Tick reads the bodies of an exchange of API
// key: those that show where partitions end (Produce, Fetch,
// ListOffsets). Of any other it reads the times, connection, client id
// and response state only.
func TickBodies(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets:
		return true
	}
	return false
}

// ExchangeAfterTick is Exchange for an exchange this correlator took as
// a Tick before (kwire aggregate --group: a client's earlier items, given
// whole to the owner of a group it binds to later): it is not counted
// again.
func (c *Correlator) ExchangeAfterTick(e *decode.Exchange) {
	n := c.stats.Exchanges
	c.Exchange(e)
	c.stats.Exchanges = n
}

// ExchangeUncounted is Exchange for an exchange another correlator
// counts: the counters of exchanges (fetches, commits and their
// outcomes, commits dropped from history, replica fetches, unknown fetch
// sessions) do not move.
func (c *Correlator) ExchangeUncounted(e *decode.Exchange) {
	s := c.stats
	c.Exchange(e)
	c.stats.Fetches, c.stats.FetchesAttributed, c.stats.FetchesAmbiguous, c.stats.FetchesUnknown =
		s.Fetches, s.FetchesAttributed, s.FetchesAmbiguous, s.FetchesUnknown
	c.stats.ReplicaFetches, c.stats.UnknownFetchSessions = s.ReplicaFetches, s.UnknownFetchSessions
	c.stats.Commits, c.stats.CommitsAccepted, c.stats.CommitsRejected, c.stats.CommitsUnanswered =
		s.Commits, s.CommitsAccepted, s.CommitsRejected, s.CommitsUnanswered
	c.stats.Limits.CommitsDropped = s.Limits.CommitsDropped
}
