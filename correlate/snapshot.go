package correlate

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Snapshot is the Correlator's state at one moment, for the final
// "type":"summary" NDJSON object and the text report of kwire analyze. It
// shares nothing the Correlator modifies later. Lists are sorted: groups by name,
// members by id, partitions by topic and partition, clients by host and
// client id.
type Snapshot struct {
	// Time is the latest capture time seen.
	Time         Time          `json:"time"`
	Groups       []Group       `json:"groups"`
	Clients      []Client      `json:"clients"`
	Unattributed []Consumption `json:"unattributed"`
	// Brokers maps node id -> host:port, from Metadata responses.
	Brokers map[string]string `json:"brokers"`
	Stats   Stats             `json:"stats"`
	// Hazards are the hazards reported, most severe first, then by time
	// (judgements still waiting, such as a rejected commit that may be
	// retried, are reported by Close); HazardCounts counts every hazard
	// reported by severity (critical, warn, info), HazardsDropped those
	// not listed, beyond Options.Hazards.MaxHazards.
	Hazards        []HazardEvent  `json:"hazards"`
	HazardCounts   map[string]int `json:"hazard_counts"`
	HazardsDropped int64          `json:"hazards_dropped,omitempty"`
	// Transactions are the transactional ids followed (absent: none).
	Transactions []Transaction `json:"transactions,omitempty"`
	// StablePartitions are the transactional partitions: last stable
	// offset against high watermark (absent: none).
	StablePartitions []StablePartition `json:"stable_partitions,omitempty"`
}

// Group is one group in a Snapshot.
type Group struct {
	Group        string `json:"group"`
	GroupType    string `json:"group_type"` // classic, consumer (KIP-848), share (KIP-932) or "" unknown
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	// State is kwire's view: stable, rebalancing, empty or unknown.
	State string `json:"state"`
	// Generation is the latest seen (KIP-848: epoch), -1 for none.
	Generation  int32       `json:"generation"`
	Leader      string      `json:"leader"`
	Coordinator Coordinator `json:"coordinator"`
	// Members are all remembered members, live and departed (Status).
	Members []Member `json:"members"`
	// Generations is the remembered history, oldest first, in the form
	// of the generation events.
	Generations []GenerationEvent `json:"generations"`
	Partitions  []Partition       `json:"partitions"`
	// Lag and LagSeconds are its partitions' lag summed, and the
	// largest of their lag in seconds (LagSecondsEstimated: that one
	// is estimated); null when no partition's is known.
	Lag                 *int64   `json:"lag"`
	LagSeconds          *float64 `json:"lag_seconds"`
	LagSecondsEstimated bool     `json:"lag_seconds_estimated,omitempty"`
	// Health is its partitions' worst health (Partition.Health).
	Health *Health `json:"health,omitempty"`
	// Errors counts the group's error answers by "API:ERROR_NAME".
	Errors map[string]int64 `json:"errors"`
	// Described is the last DescribeGroups answer; ListedState the state
	// in the last ListGroups answer.
	Described   *Described `json:"described,omitempty"`
	ListedState string     `json:"listed_state,omitempty"`
	// Hazards counts the group's hazards by kind and severity, most
	// severe first.
	Hazards []HazardCount `json:"hazards,omitempty"`
	// Share is a share group's records (KIP-932); absent for other groups.
	Share *ShareSummary `json:"share,omitempty"`
	// Streams is a streams group's topology and heartbeat statuses
	// (KIP-1071); absent for other groups.
	Streams *StreamsSummary `json:"streams,omitempty"`
}

// Coordinator is what the capture says about a group's coordinator.
type Coordinator struct {
	// From the last FindCoordinator answer (NodeID -1 when none).
	NodeID      int32  `json:"node_id"`
	Host        string `json:"host"`
	Port        int32  `json:"port"`
	ErrorCode   int16  `json:"error_code"`
	Error       string `json:"error,omitempty"`
	LearnedFrom string `json:"learned_from"`
	LearnedAt   *Time  `json:"learned_at"`
	// ServedBy is the broker (ip:port) that last answered the group's
	// requests as coordinator.
	ServedBy       string `json:"served_by"`
	ServedAt       *Time  `json:"served_at"`
	NotCoordinator int64  `json:"not_coordinator"`
	NotAvailable   int64  `json:"coordinator_not_available"`
}

// Member is one member in a Snapshot.
type Member struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	// PID, Comm and CgroupID are the process behind its last request,
	// when the source knows it (eBPF).
	PID      uint32 `json:"pid,omitempty"`
	Comm     string `json:"comm,omitempty"`
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	// Status is live, left or expired.
	Status     string `json:"status"`
	Generation int32  `json:"generation"`
	JoinedAt   *Time  `json:"joined_at"` // null when its join was not seen
	FirstSeen  Time   `json:"first_seen"`
	LastSeen   *Time  `json:"last_seen"`
	GoneAt     *Time  `json:"gone_at,omitempty"`
	Reason     string `json:"reason,omitempty"`

	SessionTimeoutMillis   int32              `json:"session_timeout_ms"`
	RebalanceTimeoutMillis int32              `json:"rebalance_timeout_ms"`
	Protocols              []string           `json:"protocols,omitempty"`
	Subscription           []string           `json:"subscription,omitempty"`
	Assignment             map[string][]int32 `json:"assignment"`
	// Tasks are a streams group member's tasks (KIP-1071); Assignment is
	// then its active tasks' source partitions.
	Tasks *StreamsTasks `json:"tasks,omitempty"`

	Heartbeats            int64 `json:"heartbeats"`
	MaxHeartbeatGapMillis int64 `json:"max_heartbeat_gap_ms"`
	RebalanceInProgress   int64 `json:"rebalance_in_progress"`
	// Fetched is what Fetches attributed to this member got.
	Fetched []PartitionFetch `json:"fetched,omitempty"`
}

// Fetch is what Fetches asked for and got for one partition. Pointers are
// null when unknown.
type Fetch struct {
	// Position is the consumer's position after its last answered Fetch:
	// the offset after the records it delivered, its fetch offset if it
	// delivered none. An unanswered Fetch does not move it.
	Position *int64 `json:"position"`
	// HighWatermark, LastStable and LogStart are what the last Fetch
	// response with the partition said.
	HighWatermark *int64 `json:"high_watermark"`
	LastStable    *int64 `json:"last_stable_offset"`
	LogStart      *int64 `json:"log_start_offset"`
	// PositionLag is the end (HighWatermark; for a read_committed
	// consumer, LastStable: it reads no further until the open
	// transactions there end, KIP-98) minus Position: what the consumer
	// has still to fetch. A group's Partition measures it against the
	// partition's EndOffset.
	PositionLag *int64 `json:"position_lag"`
	// ReadCommitted: the last Fetch was read_committed (isolation level
	// 1).
	ReadCommitted bool `json:"read_committed,omitempty"`
	// DeliveredTo is the offset after the last complete batch delivered.
	DeliveredTo *int64 `json:"delivered_to"`
	// Records, Bytes and Batches count record batches delivered, from
	// their headers, whole (a batch starting before the fetch offset
	// counts whole; control batches count).
	Records int64 `json:"records"`
	// ControlRecords are, of Records, transaction markers (each takes an
	// offset; no application sees them); AbortedRecords those of aborted
	// transactions, which a read_committed consumer drops (KIP-98).
	// Records - ControlRecords - AbortedRecords reached the application.
	ControlRecords int64 `json:"control_records,omitempty"`
	AbortedRecords int64 `json:"aborted_records,omitempty"`
	Bytes          int64 `json:"bytes"`
	Batches        int64 `json:"batches"`
	Fetches        int64 `json:"fetches"`
	// NotCopied counts responses whose record bytes the source did not
	// copy (eBPF --snap): Records, Bytes, Batches and DeliveredTo leave
	// them out.
	NotCopied int64  `json:"records_not_copied,omitempty"`
	LastFetch *Time  `json:"last_fetch"`
	FetchedBy string `json:"fetched_by,omitempty"`
	// LastErrorCode is the last partition error (OFFSET_OUT_OF_RANGE...).
	LastErrorCode int16  `json:"last_error_code,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	LastErrorAt   *Time  `json:"last_error_at,omitempty"`
}

// PartitionFetch is a Fetch of one topic partition.
type PartitionFetch struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Fetch
}

// Partition is one group's partition in a Snapshot.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Owner is the live member assigned the partition, "" if none known.
	Owner string `json:"owner"`
	// EndOffset is where the partition ends by the newest evidence on
	// the wire, any client's: a Fetch response's high watermark (last
	// stable offset for a read_committed group), the offset after a
	// Produce response's records, a ListOffsets answer for the latest
	// offset. EndOffsetFrom says which (fetch, produce, list_offsets).
	EndOffset     *int64 `json:"end_offset"`
	EndOffsetAt   *Time  `json:"end_offset_at"`
	EndOffsetFrom string `json:"end_offset_from,omitempty"`
	// Lag is EndOffset - Committed, as kafka-consumer-groups.sh prints
	// it: what the group would read again from its committed offset;
	// null when either is unknown.
	Lag *int64 `json:"lag"`
	// LagSeconds is how long before the snapshot the record at the
	// committed offset was made (0 when Lag is 0): from the header of a
	// batch holding it seen on the wire, or, with LagSecondsEstimated,
	// estimated from the offsets and times seen around it. TimestampType
	// says whose clock: create_time (the producer's) or log_append_time
	// (the broker's).
	LagSeconds          *float64 `json:"lag_seconds"`
	LagSecondsEstimated bool     `json:"lag_seconds_estimated,omitempty"`
	TimestampType       string   `json:"timestamp_type,omitempty"`
	// Health is the partition's consumer health over the last
	// Options.HealthWindow (health.go); absent without a committed
	// offset and an end.
	Health *Health `json:"health,omitempty"`
	// Committed is the committed offset now: the last accepted commit,
	// or a later OffsetFetch answer (CommittedSource "offset_fetch").
	Committed           *int64 `json:"committed"`
	CommittedAt         *Time  `json:"committed_at"`
	CommittedBy         string `json:"committed_by"`
	CommittedGeneration int32  `json:"committed_generation"`
	CommittedSource     string `json:"committed_source,omitempty"`
	// Commits are the last commits (Options.MaxCommitHistory), oldest
	// first; CommitsDropped counts older ones forgotten.
	Commits        []Commit `json:"commits"`
	CommitsDropped int64    `json:"commits_dropped"`
	Fetch
	ListOffsets *ListOffsets `json:"list_offsets,omitempty"`
}

// Commit is one remembered commit of a partition, with the names and
// meanings of the commit event's fields: TS (and TSMillis) the request's
// time, ErrorCode the broker's answer (-1: none seen), Error its name
// when not 0, Outcome accepted, rejected or unknown.
type Commit struct {
	TS         Time    `json:"ts"`
	TSMillis   int64   `json:"ts_ms"`
	MemberID   string  `json:"member_id"`
	Generation int32   `json:"generation"`
	Offset     int64   `json:"offset"`
	Metadata   *string `json:"metadata"`
	ErrorCode  int16   `json:"error_code"`
	Error      string  `json:"error,omitempty"`
	Outcome    string  `json:"outcome"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	Conn       Conn    `json:"conn"`
}

// ListOffsets is the last ListOffsets answer for a partition: TS is the
// request's time, ErrorCode and Error the partition's answer.
type ListOffsets struct {
	TS        Time   `json:"ts"`
	TSMillis  int64  `json:"ts_ms"`
	Timestamp int64  `json:"timestamp"` // -1 latest, -2 earliest
	Offset    int64  `json:"offset"`
	ErrorCode int16  `json:"error_code"`
	Error     string `json:"error,omitempty"`
}

// Client is one client (host + client id) and its group bindings.
type Client struct {
	ClientHost string `json:"client_host"`
	ClientID   string `json:"client_id"`
	// PID, Comm and CgroupID are the process behind its last group
	// request, when the source knows it (eBPF).
	PID      uint32 `json:"pid,omitempty"`
	Comm     string `json:"comm,omitempty"`
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	// Attribution is how its Fetches are attributed now: group,
	// former_member, ambiguous or unknown; Group the group, if one.
	Attribution string    `json:"attribution"`
	Group       string    `json:"group"`
	Candidates  []string  `json:"candidates,omitempty"`
	Bindings    []Binding `json:"bindings"`
}

// Binding ties a client to a group.
type Binding struct {
	Group string `json:"group"`
	// Members are its live members; EndedMembers those that left or expired.
	Members       []string `json:"members"`
	EndedMembers  []string `json:"ended_members,omitempty"`
	WithoutMember bool     `json:"without_member"`
	InstanceID    string   `json:"instance_id,omitempty"`
	// LearnedFrom is the API of the request that created the binding,
	// LearnedOnConn its connection (the binding outlives it).
	LearnedFrom   string `json:"learned_from"`
	LearnedOnConn uint64 `json:"learned_on_conn"`
	First         Time   `json:"first"`
	Last          Time   `json:"last"`
}

// Consumption is what a client's Fetches got while they could not be
// attributed to one group.
type Consumption struct {
	ClientHost string           `json:"client_host"`
	ClientID   string           `json:"client_id"`
	Status     string           `json:"status"` // ambiguous or unknown
	Candidates []string         `json:"candidates,omitempty"`
	Partitions []PartitionFetch `json:"partitions"`
}

// Snapshot returns the state now.
func (c *Correlator) Snapshot() *Snapshot {
	s := &Snapshot{Time: TimeOf(c.now), Brokers: map[string]string{}, Stats: c.Stats()}
	for id, addr := range c.brokers {
		s.Brokers[strconv.Itoa(int(id))] = addr
	}
	s.Groups = make([]Group, 0, len(c.groups))
	for _, g := range c.sortedGroups() {
		s.Groups = append(s.Groups, c.groupSnapshot(g))
	}
	s.Clients, s.Unattributed = c.clientSnapshots()
	s.Hazards, s.HazardCounts, s.HazardsDropped = c.hazardSnapshot()
	s.Transactions = c.txnSnapshots()
	s.StablePartitions = c.stableSnapshots()
	return s
}

func i64p(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

// snapshot returns the output form of f.
func (f *fetchState) snapshot() Fetch {
	o := Fetch{
		Position: i64p(f.position), HighWatermark: i64p(f.hwm), LastStable: i64p(f.lso),
		LogStart: i64p(f.logStart), DeliveredTo: i64p(f.delivered),
		Records: f.records, ControlRecords: f.control, AbortedRecords: f.aborted, Bytes: f.bytes, Batches: f.batches,
		Fetches: f.fetches, NotCopied: f.notCopied, LastFetch: timePtr(f.lastFetch), FetchedBy: f.fetchedBy,
		ReadCommitted: f.readCommitted,
	}
	if end := f.end(); end >= 0 && f.position >= 0 {
		o.PositionLag = i64(end - f.position)
	}
	if f.errCode != 0 {
		o.LastErrorCode, o.LastError, o.LastErrorAt = f.errCode, errName(f.errCode), timePtr(f.errAt)
	}
	return o
}

// partitionFetches returns the output form of a fetch-state map.
func partitionFetches(m map[tp]*fetchState) []PartitionFetch {
	out := make([]PartitionFetch, 0, len(m))
	for _, p := range sortedTPs(m) {
		out = append(out, PartitionFetch{Topic: p.topic, Partition: p.partition, Fetch: m[p].snapshot()})
	}
	return out
}

// AssignmentText is an assignment as people read it, topics in order:
// "orders[0,1,2] payments[3]"; "-" when unknown, "(none)" when empty.
func AssignmentText(a map[string][]int32) string {
	if a == nil {
		return "-"
	}
	parts := make([]string, 0, len(a))
	for _, t := range slices.Sorted(maps.Keys(a)) {
		ps := make([]string, len(a[t]))
		for i, p := range a[t] {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t+"["+strings.Join(ps, ",")+"]")
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}
