package correlate

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Hazard kinds (HazardEvent.Kind). The names are part of the NDJSON schema.
const (
	HazardCommitRegression     = "commit_regression"
	HazardCommitGap            = "commit_gap"
	HazardCommitBeyondFetch    = "commit_beyond_fetch"
	HazardCommitRejected       = "commit_rejected"
	HazardNonOwnerCommit       = "non_owner_commit"
	HazardNonOwnerFetch        = "non_owner_fetch"
	HazardOffsetReset          = "offset_reset"
	HazardCommitOnReceive      = "commit_on_receive"
	HazardMemberExpired        = "member_expired"
	HazardHeartbeatLate        = "heartbeat_late"
	HazardRebalanceStorm       = "rebalance_storm"
	HazardRebalanceSlow        = "rebalance_slow"
	HazardInconsistentProtocol = "inconsistent_group_protocol"
	HazardProducerAcksWeak     = "producer_acks_weak"
	HazardClientIDChurn        = "client_id_churn"
	HazardAckedRecordsLost     = "acked_records_lost"
	// Transactions (KIP-98), see hazard_txn.go.
	HazardZombieProducer          = "zombie_producer"
	HazardHangingTransaction      = "hanging_transaction"
	HazardTxnOffsetCommitRejected = "txn_offset_commit_rejected"
	HazardTxnOffsetsAborted       = "txn_offsets_aborted"
	// Share groups (KIP-932), see hazard_share.go.
	HazardShareRedelivery = "share_redelivery"
	HazardShareAckLost    = "share_ack_lost"
	HazardShareMemberDied = "share_member_died"
	// Consumer health (health.go), see hazard_health.go.
	HazardConsumerStopped = "consumer_stopped"
	HazardConsumerStalled = "consumer_stalled"
)

// HazardKinds are every hazard kind the Correlator reports, in the order
// of the constants above: the text report's remediation lines and
// docs/runbook.md have an entry for each.
var HazardKinds = []string{
	HazardCommitRegression, HazardCommitGap, HazardCommitBeyondFetch, HazardCommitRejected, HazardNonOwnerCommit,
	HazardNonOwnerFetch, HazardOffsetReset, HazardCommitOnReceive, HazardMemberExpired, HazardHeartbeatLate,
	HazardRebalanceStorm, HazardRebalanceSlow, HazardInconsistentProtocol, HazardProducerAcksWeak, HazardClientIDChurn,
	HazardAckedRecordsLost, HazardZombieProducer, HazardHangingTransaction, HazardTxnOffsetCommitRejected, HazardTxnOffsetsAborted,
	HazardShareRedelivery, HazardShareAckLost, HazardShareMemberDied, HazardConsumerStopped, HazardConsumerStalled,
}

// Hazard severities (HazardEvent.Severity), least severe first.
const (
	SeverityInfo     = "info"
	SeverityWarn     = "warn"
	SeverityCritical = "critical"
)

// SeverityRank orders severities: info 1, warn 2, critical 3, unknown 0.
func SeverityRank(s string) int {
	switch s {
	case SeverityInfo:
		return 1
	case SeverityWarn:
		return 2
	case SeverityCritical:
		return 3
	}
	return 0
}

// HazardEvent ("type":"hazard") is a consumer or producer mistake that loses
// or replays data, or a group that keeps rebalancing, read from the wire
// (field reports 2, 3 and 4). Each hazard is reported once per episode, at
// the capture time of the exchange that revealed it; a hazard judged later
// (a rejected commit not retried within RejectedGrace, a commit above what
// was delivered after FetchGrace, an expiry) may follow events with later
// times, and is reported at Close at the latest. A hazard that rests on
// something not seen is held for LossSettle after its window and judged
// against the capture's loss there (loss.go): where evidence may have been
// lost it is info, with EvidenceComplete false and Loss.
//
// Severity says what is at stake: critical, records never processed (data
// loss); warn, records processed twice, or consumption stalled; info, a
// setting or a heuristic the wire cannot confirm.
//
//	kind                         severity  reported once per (episode)
//	commit_regression            warn      group/partition, until the committed offset is back at the earlier high
//	commit_gap                   critical  group/partition/member/generation
//	commit_beyond_fetch          critical  group/partition/member, until Fetch delivered it the committed offset
//	commit_rejected              warn      group/partition/member/generation/error; info when nothing would be
//	                                       replayed; none when the same member or client commits as far in time
//	non_owner_commit             warn      group/partition/member/generation for a member; for an admin commit
//	                                       (generation -1, no member id) group/partition/client/offset: critical
//	                                       forward (skips), warn back (replays), info from an unknown offset
//	non_owner_fetch              warn      group/partition/fetching member
//	offset_reset                 critical  group/partition/from/to when records were skipped; warn replayed;
//	                                       info neither, and (group/partition) a start without committed offset
//	commit_on_receive            info      group/member (heuristic); warn once persistent and timer-paced
//	member_expired               warn      group/member: removed by the broker without a LeaveGroup, for its
//	                                       session timeout (a KIP-848 member: fenced) or its rebalance timeout
//	heartbeat_late               warn      group/member/generation: a silence of HeartbeatGap of the session
//	                                       (KIP-848: of lateIntervals heartbeat intervals, or of the assumed
//	                                       session); info, group/member: heartbeats spaced above
//	                                       HeartbeatSpacing of it
//	rebalance_storm              warn      group, until StormWindow passes without a disruptive generation
//	rebalance_slow               warn      group/generation (folded into an open storm); info when the group
//	                                       was empty as it began (the broker's initial rebalance delay)
//	inconsistent_group_protocol  warn      group/client, until the client's JoinGroup is accepted
//	producer_acks_weak           info      client (host + client id)/topic/acks
//	client_id_churn              warn      client host, until ChurnWindow passes without a new client id
//	acked_records_lost           critical  topic/partition/client/old leader/new leader/first offset taken over
//	zombie_producer              warn      transactional id/producer id/epoch: a request of an epoch that a
//	                                       newer InitProducerID fenced, answered PRODUCER_FENCED or
//	                                       INVALID_PRODUCER_EPOCH
//	hanging_transaction          warn      transactional id/producer id/begin: no EndTxn within the
//	                                       transaction timeout (absence-based); topic/partition/last stable
//	                                       offset: the LSO below the high watermark, unmoved for LSOStuck
//	                                       while read_committed consumers wait at it (absence-based)
//	txn_offset_commit_rejected   warn      group/partition/transactional id/producer id/epoch
//	txn_offsets_aborted          warn      group/partition/transactional id/producer id/begin: offsets a
//	                                       TxnOffsetCommit put in a transaction that then aborted (absence-based
//	                                       when the abort is kwire's timeout inference)
//	share_redelivery             warn      group/partition/first offset: records acquired with a delivery
//	                                       count of ShareRedeliveries or more (a poison message)
//	share_ack_lost               warn      group/partition/member/acquisition: records not acknowledged
//	                                       before their acquisition lock ran out (absence-based)
//	share_member_died            warn      group/partition/member/release: records a member held when its
//	                                       connection closed without a leave, or the broker fenced it,
//	                                       delivered again to another member (absence-based)
//	consumer_stopped             warn      group/partition, while its health is stopped: no commit for a whole
//	                                       HealthWindow while its end moved and it has lag
//	consumer_stalled             warn      group/partition, while its health is stalled: commits of one offset
//	                                       for a whole HealthWindow while its end moved
//
// Every member the broker removes also counts toward rebalance_storm.
// Every accepted commit below the previous one is a commit_regression,
// whatever moved it back; Cause names a hazard that explains it.
//
// Fields that do not apply are omitted. Numbers are typed fields; offsets
// are Kafka's (a committed offset is the next record to read).
type HazardEvent struct {
	// ID names the hazard (hazardID): the same in every run over the same
	// traffic. RangeID is set when the hazard names a range of records
	// (Range): hazards whose ranges of one group partition overlap or
	// touch share it, the ID of the first of them, so that the records
	// are counted once (rangeTracker). A hazard bridging two ranges
	// already written merges them: the later one's hazards keep their
	// RangeID in the events and have the first's in the Snapshot.
	ID       string `json:"id"`
	RangeID  string `json:"range_id,omitempty"`
	Kind     string `json:"kind"`
	Severity string `json:"severity"`
	Group    string `json:"group,omitempty"`
	Topic    string `json:"topic,omitempty"` // "id:<hex>" when known only by id
	// Partition is omitted when the hazard concerns no one partition.
	Partition  *int32 `json:"partition,omitempty"`
	MemberID   string `json:"member_id,omitempty"`
	Generation *int32 `json:"generation,omitempty"` // -1: an admin commit
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	// Summary is one sentence with the numbers, for people.
	Summary string `json:"summary"`

	// Offset is the offset concerned: the committed offset, or the fetch
	// offset of a non-owner fetch.
	Offset *int64 `json:"offset,omitempty"`
	// PreviousOffset is the committed offset before (the last accepted
	// commit, or the broker's OffsetFetch answer).
	PreviousOffset *int64 `json:"previous_offset,omitempty"`
	// DeliveredTo is the offset after the last record Fetch delivered to
	// the member; HighWatermark and LogStartOffset the partition's.
	DeliveredTo    *int64 `json:"delivered_to,omitempty"`
	HighWatermark  *int64 `json:"high_watermark,omitempty"`
	LogStartOffset *int64 `json:"log_start_offset,omitempty"`
	// LastStableOffset is the partition's (KIP-98), from Fetch responses
	// (hanging_transaction of a partition).
	LastStableOffset *int64 `json:"last_stable_offset,omitempty"`
	// FromOffset and ToOffset bound the records concerned: a reset from
	// FromOffset to ToOffset; the records FromOffset..ToOffset replayed
	// (commit_regression, commit_rejected).
	FromOffset *int64 `json:"from_offset,omitempty"`
	ToOffset   *int64 `json:"to_offset,omitempty"`
	// Range is the records lost, replayed... as Impact reads them from
	// the fields each kind names them with (absent: the hazard names no
	// range of records).
	Range *RecordRange `json:"range,omitempty"`
	// Reset is earliest or latest: the ListOffsets a reset asked for.
	Reset string `json:"reset,omitempty"`
	// Skipped and Replayed count records never processed, or processed
	// again, because of the hazard.
	Skipped  *int64 `json:"skipped,omitempty"`
	Replayed *int64 `json:"replayed,omitempty"`
	// MissingOffsets are records delivered and never committed
	// (commit_gap; at most 100 listed, Skipped counts them all).
	MissingOffsets []int64 `json:"missing_offsets,omitempty"`
	// ReplayedOffsets are the records Replayed counts, MarkerOffsets the
	// transaction markers (control records) between them, which take
	// offsets and are never records (txn_offsets_aborted; at most 100
	// each).
	ReplayedOffsets []int64 `json:"replayed_offsets,omitempty"`
	MarkerOffsets   []int64 `json:"marker_offsets,omitempty"`
	// Records counts records delivered by the exchange concerned.
	Records *int64 `json:"records,omitempty"`
	// ErrorCode and Error are the broker's answer concerned.
	ErrorCode int16  `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	// Owner is the member owning the partition in OwnerGeneration.
	Owner           string `json:"owner,omitempty"`
	OwnerGeneration *int32 `json:"owner_generation,omitempty"`
	// LeadMillis is how long before a commit its last record was delivered.
	LeadMillis *int64 `json:"lead_ms,omitempty"`

	SilentMillis           int64 `json:"silent_ms,omitempty"`
	SessionTimeoutMillis   int32 `json:"session_timeout_ms,omitempty"`
	RebalanceTimeoutMillis int32 `json:"rebalance_timeout_ms,omitempty"`
	HeartbeatGapMillis     int64 `json:"heartbeat_gap_ms,omitempty"`
	// HeartbeatIntervalMillis is the interval the broker asked a KIP-848
	// member to heartbeat at.
	HeartbeatIntervalMillis int32 `json:"heartbeat_interval_ms,omitempty"`
	DurationMillis          int64 `json:"duration_ms,omitempty"`
	WindowMillis            int64 `json:"window_ms,omitempty"`
	// Generations counts the generations in WindowMillis, from
	// FirstGeneration to LastGeneration.
	Generations     int    `json:"generations,omitempty"`
	FirstGeneration *int32 `json:"first_generation,omitempty"`
	LastGeneration  *int32 `json:"last_generation,omitempty"`
	// Count counts what the kind is about: commits on receive, disruptive
	// generations of a storm, late heartbeats, new client ids.
	Count int64 `json:"count,omitempty"`
	// RebalanceInProgress counts Heartbeats answered REBALANCE_IN_PROGRESS.
	RebalanceInProgress int64 `json:"rebalance_in_progress,omitempty"`
	// Acks is the Produce requests' acks (0 or 1).
	Acks *int16 `json:"acks,omitempty"`
	// Protocols are the assignors a client offered; GroupProtocol the
	// group's.
	Protocols     []string `json:"protocols,omitempty"`
	GroupProtocol string   `json:"group_protocol,omitempty"`
	// ClientIDs are examples (client_id_churn: the first and last new ids).
	ClientIDs []string `json:"client_ids,omitempty"`

	// Transactions: the producer's transactional id, producer id and
	// epoch; CurrentEpoch is the epoch the latest InitProducerID gave,
	// by FencedBy (client id) (zombie_producer); TxnPartitions and
	// Groups what the transaction held, TransactionTimeoutMillis its
	// timeout (hanging_transaction).
	TransactionalID          string             `json:"transactional_id,omitempty"`
	ProducerID               *int64             `json:"producer_id,omitempty"`
	ProducerEpoch            *int16             `json:"producer_epoch,omitempty"`
	CurrentEpoch             *int16             `json:"current_epoch,omitempty"`
	FencedBy                 string             `json:"fenced_by,omitempty"`
	TxnPartitions            map[string][]int32 `json:"partitions,omitempty"`
	Groups                   []string           `json:"groups,omitempty"`
	TransactionTimeoutMillis int32              `json:"transaction_timeout_ms,omitempty"`

	// Share groups (KIP-932): DeliveryCount is the delivery count of the
	// records concerned and DeliveryLimit the broker's limit assumed
	// (share_redelivery); LockTimeoutMillis the acquisition lock that ran
	// out (share_ack_lost).
	DeliveryCount     *int16 `json:"delivery_count,omitempty"`
	DeliveryLimit     int32  `json:"delivery_limit,omitempty"`
	LockTimeoutMillis int64  `json:"acquisition_lock_timeout_ms,omitempty"`

	// Reason says why the broker removed a member (member_expired):
	// session_timeout (no request within its session timeout) or
	// rebalance_timeout (it did not rejoin a rebalance in time).
	Reason string `json:"reason,omitempty"`
	// LastSeen is the member's last request to the coordinator.
	LastSeen *Time `json:"last_seen,omitempty"`
	// Cause is another hazard that explains this one (a commit_regression
	// made by an admin commit or after an offset reset); that hazard is
	// reported too.
	Cause *HazardCause `json:"cause,omitempty"`
	// EvidenceComplete is false when the hazard rests on something the
	// capture does not show (no Fetch delivering the records, no
	// heartbeat, no rejoin, no commit) and the capture lost data on the
	// connections concerned meanwhile: what was not seen may have been
	// lost. Its severity is then info and Loss says what was lost.
	// Omitted otherwise.
	EvidenceComplete *bool        `json:"evidence_complete,omitempty"`
	Loss             *LossFigures `json:"loss,omitempty"`

	// Evidence are the exchanges the hazard rests on, oldest first.
	Evidence []Evidence `json:"evidence"`

	at time.Time
	// absent, when set, is what the hazard concludes from absence: it is
	// held until loss on those connections would have been noticed.
	absent *absence
	settle time.Time
	// downgraded: made info for lost evidence (Downgraded).
	downgraded bool
}

// HazardCause names another hazard by its kind and time (ts).
type HazardCause struct {
	Kind     string `json:"kind"`
	TS       Time   `json:"ts"`
	TSMillis int64  `json:"ts_ms"` // TS in milliseconds since the epoch (set by publish)
}

// absence is what an absence-based hazard rests on: nothing was seen from
// clients between from and to.
type absence struct {
	clients  []clientKey
	from, to time.Time
}

// Type implements Event.
func (*HazardEvent) Type() string { return "hazard" }

// Time implements Event.
func (e *HazardEvent) Time() time.Time { return e.at }

// Evidence is one exchange a hazard rests on: find it in Wireshark with
// kafka.correlation_id and the connection's addresses.
type Evidence struct {
	TS            Time   `json:"ts"`    // the request's capture time
	TSMillis      int64  `json:"ts_ms"` // TS in milliseconds since the epoch (set by publish)
	Conn          Conn   `json:"conn"`
	API           string `json:"api"`
	CorrelationID int32  `json:"correlation_id"`
}

// maxEvidence caps the evidence of one hazard.
const maxEvidence = 8

func (c *Correlator) evidenceOf(e *decode.Exchange) Evidence {
	return Evidence{TS: TimeOf(e.ReqTime), Conn: c.connOf(e), API: kmsg.NameForKey(e.Key), CorrelationID: e.CorrelationID}
}

// HazardOptions tune hazard detection. A zero field means the default.
type HazardOptions struct {
	// GapMinRun is how many stride-1 commits (one record each) a member
	// makes before a longer stride counts as commit_gap (default 3).
	GapMinRun int
	// OnReceiveWindow is how soon after its last record was delivered a
	// commit counts as "on receive" (default 200ms); OnReceiveRun how
	// many in a row are reported (info, default 5); OnReceivePersistent
	// how many in a row, paced by a timer rather than by deliveries, make
	// it warn (default 10).
	OnReceiveWindow     time.Duration
	OnReceiveRun        int
	OnReceivePersistent int
	// HeartbeatSpacing is the fraction of the session timeout above which
	// HeartbeatSpacingRun gaps in a row are late (default 1/3, 3 gaps);
	// HeartbeatGap the fraction for a single gap (default 2/3).
	HeartbeatSpacing    float64
	HeartbeatSpacingRun int
	HeartbeatGap        float64
	// StormWindow and StormGenerations: that many disruptive generations
	// (a member dropped by the broker, or a dropped client rejoining)
	// within the window are a storm (default 60s, 3).
	StormWindow      time.Duration
	StormGenerations int
	// SlowRebalance is the fraction of the rebalance timeout a rebalance
	// must last to be slow (default 0.5), and at least SlowRebalanceMin
	// (default 1s).
	SlowRebalance    float64
	SlowRebalanceMin time.Duration
	// ChurnWindow and ChurnClientIDs: that many new client ids from one
	// host within the window are churn (default 60s, 20).
	ChurnWindow    time.Duration
	ChurnClientIDs int
	// RejectedGrace is how long a rejected commit may be superseded by the
	// same member's (or client's) accepted commit before it is reported
	// (default 30s).
	RejectedGrace time.Duration
	// OrderTolerance is how far apart in capture time two exchanges of
	// different connections may be and still be taken in either order
	// (default 10ms). A client's requests to two brokers are ordered by
	// cause (the Fetch response that delivered records comes before the
	// commit of them), but the capture's times are not: segments held
	// back on a loaded host or a multi-queue NIC, or per-broker captures
	// whose clocks differ, put them a few milliseconds either way. Within
	// it, a commit slightly before the Fetch that delivered its records
	// counts as after it (commit_beyond_fetch, commit_on_receive), and a
	// Fetch slightly before the ListOffsets it follows resumes the reset
	// (offset_reset).
	OrderTolerance time.Duration
	// FetchGrace is how long after a member lost a partition (or left)
	// its fetches of it are still in flight (default 2s).
	FetchGrace time.Duration
	// ResetWindow bounds an offset reset sequence (out of range or no
	// committed offset, ListOffsets, Fetch; default 60s).
	ResetWindow time.Duration
	// LSOStuck is how long a partition's last stable offset may stay
	// below its high watermark, unmoved, while read_committed consumers
	// wait at it, before it is a hanging_transaction (default 10s: Kafka
	// Streams' exactly-once transactions commit every 100ms and time out
	// at 10s; raise it for producers that hold transactions open longer,
	// such as Flink's checkpoint-long ones).
	LSOStuck time.Duration
	// LossSettle is how long after its window an absence-based hazard is
	// held, so that loss in the window is noticed first: a lost segment is
	// reported once the reassembly stops waiting for it (default 10s of
	// capture time, above capture's 5s reorder timeout and its flushes).
	LossSettle time.Duration
	// ShareRedeliveries is the delivery count at which records of a share
	// group are share_redelivery (default 3: back to the queue twice);
	// ShareDeliveryLimit the broker's group.share.delivery.count.limit
	// assumed (not on the wire; default 5, Kafka's).
	ShareRedeliveries  int
	ShareDeliveryLimit int
	// MaxHazards caps the hazards kept for the Snapshot (default 10000);
	// MaxEpisodes the episodes remembered (default 100000).
	MaxHazards  int
	MaxEpisodes int
}

func (o HazardOptions) withDefaults() HazardOptions {
	setDefault(&o.GapMinRun, 3)
	setDefault(&o.OnReceiveWindow, 200*time.Millisecond)
	setDefault(&o.OnReceiveRun, 5)
	setDefault(&o.OnReceivePersistent, 10)
	setFraction(&o.HeartbeatSpacing, 1.0/3)
	setDefault(&o.HeartbeatSpacingRun, 3)
	setFraction(&o.HeartbeatGap, 2.0/3)
	setDefault(&o.StormWindow, 60*time.Second)
	setDefault(&o.StormGenerations, 3)
	setFraction(&o.SlowRebalance, 0.5)
	setDefault(&o.SlowRebalanceMin, time.Second)
	setDefault(&o.ChurnWindow, 60*time.Second)
	setDefault(&o.ChurnClientIDs, 20)
	setDefault(&o.RejectedGrace, 30*time.Second)
	setDefault(&o.OrderTolerance, 10*time.Millisecond)
	setDefault(&o.FetchGrace, 2*time.Second)
	setDefault(&o.ResetWindow, 60*time.Second)
	setDefault(&o.LSOStuck, 10*time.Second)
	setDefault(&o.LossSettle, 10*time.Second)
	setDefault(&o.ShareRedeliveries, 3)
	setDefault(&o.ShareDeliveryLimit, 5)
	setDefault(&o.MaxHazards, 10000)
	setDefault(&o.MaxEpisodes, 100000)
	return o
}

func setFraction(v *float64, def float64) {
	if *v <= 0 {
		*v = def
	}
}

// hazardState is what hazard detection remembers beyond the group state.
type hazardState struct {
	episodes map[string]*episode
	list     []*HazardEvent
	dropped  int64
	counts   map[string]map[[2]string]int // group -> kind, severity -> hazards
	// bySeverity counts every hazard reported, kept or dropped.
	bySeverity map[string]int
	lastTick   time.Time

	parts   map[string]map[tp]*partHazard       // group -> partition
	members map[string]map[string]*memberHazard // group -> member (or client) key
	groups  map[string]*groupHazard             // group
	hosts   map[string]*hostHazard              // client host
	beyond  []beyondRef                         // commits above what was delivered, waiting
	// recvPend are commits waiting on the Fetch of their records
	// (judgeReceive).
	recvPend []pendingRecv
	// recvParts is the scratch of a commit's recvNote.parts: one
	// commit at a time uses it (a pending one keeps a copy).
	recvParts []recvPart
	pending   []*HazardEvent // absence-based hazards held for loss (releasePending)
	held      map[string]int // group -> its held regressions (heldRegression)
	ranges    rangeTracker   // the records hazards name, for their range ids
}

// episode is one hazard's episode: while open, further occurrences are
// folded into the hazard already reported.
type episode struct {
	open  bool
	count int64
	last  time.Time
}

func (c *Correlator) hz() *hazardState {
	if c.hazards == nil {
		c.hazards = &hazardState{
			episodes:   make(map[string]*episode),
			counts:     make(map[string]map[[2]string]int),
			bySeverity: map[string]int{SeverityCritical: 0, SeverityWarn: 0, SeverityInfo: 0},
			parts:      make(map[string]map[tp]*partHazard),
			members:    make(map[string]map[string]*memberHazard),
			groups:     make(map[string]*groupHazard),
			hosts:      make(map[string]*hostHazard),
			held:       make(map[string]int),
		}
	}
	return c.hazards
}

// episodeKey joins a kind and the fields that identify its episode.
func episodeKey(kind string, parts ...string) string {
	return kind + "\x00" + strings.Join(parts, "\x00")
}

// report emits ev unless the episode key is already open, and opens it.
// It returns whether ev was emitted.
func (c *Correlator) report(key string, ev *HazardEvent) bool {
	h := c.hz()
	ep := h.episodes[key]
	if ep == nil {
		if len(h.episodes) >= c.opts.Hazards.MaxEpisodes {
			c.evictEpisodes()
		}
		ep = &episode{}
		h.episodes[key] = ep
	}
	ep.count++
	ep.last = c.now
	if ep.open {
		return false
	}
	ep.open = true
	if ev.at.IsZero() {
		ev.at = c.now
	}
	ev.at = ev.at.UTC()
	if ev.absent != nil {
		ev.settle = maxTime(c.now, ev.absent.to).Add(c.opts.Hazards.LossSettle)
		h.pending = append(h.pending, ev)
		return true
	}
	c.publish(ev)
	return true
}

// releasePending publishes the absence-based hazards whose loss would have
// been noticed by now (final: all), after checking that loss.
func (c *Correlator) releasePending(final bool) {
	h := c.hz()
	keep := h.pending[:0]
	for _, ev := range h.pending {
		if !final && c.now.Before(ev.settle) {
			keep = append(keep, ev)
			continue
		}
		c.judgeLoss(ev)
		c.publish(ev)
	}
	clear(h.pending[len(keep):])
	h.pending = keep
}

// judgeLoss makes ev info when the capture lost data on the connections
// its conclusion depends on, within its window.
func (c *Correlator) judgeLoss(ev *HazardEvent) {
	a := ev.absent
	ev.absent = nil
	f := c.lossFor(a.clients, a.from, a.to)
	if !f.any() {
		return
	}
	ev.EvidenceComplete, ev.Loss = new(bool), &f
	if ev.Severity != SeverityInfo {
		ev.Severity = SeverityInfo
		ev.downgraded = true
		c.stats.HazardsIncomplete++
	}
	ev.Summary += "; evidence may be incomplete: " + f.text()
}

// publish emits hazard ev and counts it.
func (c *Correlator) publish(ev *HazardEvent) {
	h := c.hz()
	ev.Evidence = dedupEvidence(ev.Evidence)
	if len(ev.Evidence) > maxEvidence {
		ev.Evidence = append(ev.Evidence[:maxEvidence-1], ev.Evidence[len(ev.Evidence)-1])
	}
	if ev.Evidence == nil {
		ev.Evidence = []Evidence{}
	}
	for i := range ev.Evidence {
		ev.Evidence[i].TSMillis = ev.Evidence[i].TS.UnixMilli()
	}
	if ev.Cause != nil {
		ev.Cause.TSMillis = ev.Cause.TS.UnixMilli()
	}
	ev.ID = hazardID(ev)
	h.ranges.add(ev, c.opts.Hazards.MaxHazards)
	h.bySeverity[ev.Severity]++
	if ev.Group != "" {
		if h.counts[ev.Group] == nil {
			h.counts[ev.Group] = make(map[[2]string]int)
		}
		h.counts[ev.Group][[2]string{ev.Kind, ev.Severity}]++
	}
	if len(h.list) < c.opts.Hazards.MaxHazards {
		cp := *ev
		h.list = append(h.list, &cp)
	} else {
		h.dropped++
	}
	c.emit(ev)
}

// dedupEvidence drops repeated exchanges, keeping the order.
func dedupEvidence(evs []Evidence) []Evidence {
	out := evs[:0:0]
	for _, e := range evs {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// episodeOpen reports whether the episode key is open.
func (c *Correlator) episodeOpen(key string) bool {
	ep := c.hz().episodes[key]
	return ep != nil && ep.open
}

// endEpisode closes the episode key: the next occurrence is reported.
func (c *Correlator) endEpisode(key string) {
	if ep := c.hz().episodes[key]; ep != nil {
		ep.open = false
	}
}

// evictEpisodes forgets the least recently touched episodes, down to 90%
// of the cap.
func (c *Correlator) evictEpisodes() {
	h := c.hz()
	// Sorted by last use, then key, with both copied out: a comparison
	// that looked the episodes up cost two map lookups, and a hostile
	// commit refused for 100,000 partitions makes as many episodes.
	type entry struct {
		k    string
		last time.Time
	}
	all := make([]entry, 0, len(h.episodes))
	for k, ep := range h.episodes {
		all = append(all, entry{k, ep.last})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := a.last.Compare(b.last); c != 0 {
			return c
		}
		return strings.Compare(a.k, b.k)
	})
	for _, e := range all {
		if len(h.episodes) < c.opts.Hazards.MaxEpisodes*9/10 {
			break
		}
		delete(h.episodes, e.k)
	}
}

// hazardExchange looks for hazards in e, after the Correlator has taken it
// in (its state already reflects e).
func (c *Correlator) hazardExchange(e *decode.Exchange) {
	c.clientIDSeen(e)
	if e.Req != nil {
		switch req := e.Req.(type) {
		case *kmsg.ProduceRequest:
			c.produceHazards(e, req)
		case *kmsg.FetchRequest:
			c.fetchHazards(e, req)
		case *kmsg.ListOffsetsRequest:
			c.listOffsetsHazards(e, req)
		case *kmsg.OffsetFetchRequest:
			c.offsetFetchHazards(e, req)
		case *kmsg.OffsetCommitRequest:
			c.commitHazards(e, req)
		case *kmsg.JoinGroupRequest:
			c.joinHazards(e, req)
		case *kmsg.SyncGroupRequest:
			c.syncHazards(e, req)
		case *kmsg.HeartbeatRequest:
			c.heartbeatHazards(e, req)
		}
	}
	c.hazardTimers()
}

// hazardTimers judges the commits waiting for their records (settleRecv),
// and once a second of capture time what else waited for time
// (hazardTick).
func (c *Correlator) hazardTimers() {
	c.settleRecv(false)
	if c.now.Sub(c.hz().lastTick) >= sweepEvery {
		c.hz().lastTick = c.now
		c.hazardTick(false)
	}
}

// hazardTick reports what waited for time to pass (rejected commits not
// retried, commits above what was delivered); at the end of the input,
// everything still waiting.
func (c *Correlator) hazardTick(final bool) {
	c.settleRecv(final)
	c.settleBeyond(final)
	c.txnTick(final)
	c.shareTick(final)
	c.churnTick(final)
	c.healthTick(final)
	h := c.hz()
	if c.now.Sub(c.loss.forgotAt) >= time.Minute {
		c.loss.forgotAt = c.now
		c.forgetLoss(false)
	}
	for _, g := range sortedKeys(h.parts) {
		parts := h.parts[g]
		for _, p := range sortedTPs(parts) {
			c.flushRejected(g, p, parts[p], final)
		}
	}
	if final {
		c.flushRegressions()
	}
}

// hazardClose ends the input: see hazardTick.
func (c *Correlator) hazardClose() {
	c.hazardTick(true)
	c.releasePending(true)
}

// Small constructors for the optional numbers.

func i64(v int64) *int64  { return &v }
func i32p(v int32) *int32 { return &v }

// hazardAt fills the fields every hazard of a group partition shares.
func partHazardEvent(kind, sev, group string, p tp, at time.Time) *HazardEvent {
	return &HazardEvent{Kind: kind, Severity: sev, Group: group, Topic: p.topic, Partition: i32p(p.partition), at: at}
}
