package correlate

import (
	"time"

	"github.com/kwire/kwire/decode"
)

// Event is something the Correlator learned. Concrete types: *GenerationEvent,
// *MemberEvent, *CommitEvent, *CoordinatorEvent, *TransactionEvent,
// *ShareGroupEvent, *HazardEvent. Events are
// marshalled with encoding/json; the writer adds "v", "type" (Type) and "ts"
// (Time), so no event has fields of those names. Field names are part of the
// NDJSON schema.
type Event interface {
	// Type is the NDJSON "type": "generation", "member", "commit",
	// "coordinator", "transaction", "share_group" or "hazard".
	Type() string
	// Time is the capture time the event happened at (the NDJSON "ts").
	Time() time.Time
}

// Sink receives events, synchronously, from the goroutine that calls the
// Correlator. An event is never modified after it is passed: a Sink may keep it.
type Sink interface {
	Event(ev Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ev Event)

// Event calls f(ev).
func (f SinkFunc) Event(ev Event) { f(ev) }

// Conn is how a connection appears in events: the same fields as a
// jsonout exchange line's "conn".
type Conn struct {
	ID     uint64 `json:"id"`     // connection id within the run
	Client string `json:"client"` // client ip:port
	Broker string `json:"broker"` // broker ip:port
	// PID and Comm are the process on the client side, when the source
	// knows it (eBPF).
	PID  uint32 `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
}

func (c *Correlator) connOf(e *decode.Exchange) Conn {
	if e.Conn == nil {
		return Conn{}
	}
	out := c.names.of(e.Conn).conn
	if p := e.Conn.Process; p != nil {
		out.PID, out.Comm = p.PID, p.Comm
	}
	return out
}

// Cause kinds of a generation (the "kind" of GenerationEvent.Cause).
const (
	CauseMemberJoined   = "member_joined"
	CauseMemberLeft     = "member_left"
	CauseMemberExpired  = "member_expired"
	CauseMetadataChange = "metadata_change"
	CauseUnknown        = "unknown"
)

// Cause says why a generation began.
type Cause struct {
	// Kind is member_joined, member_left, member_expired,
	// metadata_change (the same members rejoined: a subscription change, a
	// leader rejoin, a cooperative follow-up rebalance) or unknown (the
	// capture does not show it: it began mid-way or lost the JoinGroups).
	Kind string `json:"kind"`
	// Member is the member whose join, leave or expiry came first; for
	// metadata_change, the member whose JoinGroup started the rebalance
	// (its first JoinGroup), or (KIP-848) whose subscription changed.
	// Empty when the capture does not show it.
	Member string `json:"member,omitempty"`
	// Reason is the LeaveGroup (v5+) or JoinGroup (v8+) reason the client
	// gave, or kwire's explanation (subscription diff, silence, what is
	// missing from the capture).
	Reason string `json:"reason,omitempty"`
}

// GenerationEvent ("type":"generation") is one generation of a group: emitted
// when every member's SyncGroup response was seen, or when the next
// generation begins, or at the end of the input. Its members are those it
// was formed with: a static member (KIP-345) that restarts under a new
// member id without a rebalance is reported by member events (the old id
// left, the new one joined, naming it) and keeps its generation.
//
// For KIP-848 groups the generation is an epoch the members reached, each
// member's assignment the one it held at that epoch once reconciled (what
// the broker reports when the group is Stable): the broker adds partitions
// within an epoch as other members release them, and takes partitions away
// only for a later epoch (the member then stays at its epoch until it has
// revoked them; that smaller assignment is the next epoch's). It is emitted
// once every live member reached the epoch and their assignments cover
// every partition of the topics they subscribe to (partition counts from
// Metadata responses); without the counts, when a later epoch begins or at
// the end of the input. Completed is the answer that last changed it. A
// consumer group's classic members (Conversion) reach its epochs through
// JoinGroup, answered with their member epoch as generation and no
// leader, and get their assignment of it in their SyncGroup response.
type GenerationEvent struct {
	Group string `json:"group"`
	// GroupType is "classic" (JoinGroup/SyncGroup), "consumer" (KIP-848)
	// or "share" (KIP-932 share groups, whose epochs are followed as
	// KIP-848 ones): the group's type as the generation began (the broker
	// may convert a group, Converted).
	GroupType  string `json:"group_type"`
	Generation int32  `json:"generation"`
	// PreviousGeneration is the generation seen before this one, -1 if none.
	PreviousGeneration int32 `json:"previous_generation"`
	// Missed counts generations between the previous one and this one
	// that the capture does not show. The broker's bump when the last
	// member leaves (the group becomes empty) is not counted: after an
	// empty group the next generation seen skips one number normally.
	// Always 0 for KIP-848 and share groups, whose members may skip epochs.
	Missed       int32  `json:"missed"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	Leader       string `json:"leader"`
	// Members are sorted by member id.
	Members []GenerationMember `json:"members"`
	// MembersFrom says how the member list is known: "join" (the leader's
	// JoinGroup response), "sync" (the leader's SyncGroup request),
	// "heartbeat" (KIP-848 heartbeats) or "observed" (only the members
	// seen sending requests of this generation: maybe incomplete).
	MembersFrom string `json:"members_from"`
	// OpaqueProtocol is set when the protocol type is not "consumer"
	// (connect...): assignments are not decoded, only their sizes kept.
	OpaqueProtocol bool  `json:"opaque_protocol,omitempty"`
	Cause          Cause `json:"cause"`
	// Started is the first JoinGroup request of the rebalance; Completed
	// the last SyncGroup response. Null when the capture does not show them.
	Started        *Time  `json:"started"`
	Completed      *Time  `json:"completed"`
	DurationMillis *int64 `json:"duration_ms"`
	// Complete says every member's SyncGroup response (KIP-848: epoch) was seen.
	Complete bool `json:"complete"`
	// StreamsStatuses are the statuses a streams group's heartbeats of
	// this epoch were answered with (KIP-1071: MISSING_INTERNAL_TOPICS
	// while the broker creates the application's internal topics,
	// ASSIGNMENT_DELAYED while it holds the assignment back...), distinct,
	// in order.
	StreamsStatuses []string `json:"streams_statuses,omitempty"`
	// Converted is set on the first generation after the broker
	// converted the group between the classic and the consumer type
	// (KIP-848 online migration, Conversion); GroupType is the new type.
	Converted *Conversion `json:"converted,omitempty"`
	// Evidence are the exchanges it rests on, oldest first (the first
	// JoinGroups or heartbeats of it, and the SyncGroup or heartbeat that
	// last completed it), for the HTML report to link to; not in the
	// NDJSON (the schema has no such field for generations).
	Evidence []Evidence `json:"-"`

	at time.Time
}

// Type implements Event.
func (*GenerationEvent) Type() string { return "generation" }

// Time implements Event: completed, else started, else when first seen.
func (e *GenerationEvent) Time() time.Time { return e.at }

// GenerationMember is one member of a generation.
type GenerationMember struct {
	MemberID   string  `json:"member_id"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	InstanceID *string `json:"instance_id"` // null for dynamic members
	// Subscription is the topics the member subscribed to (consumer protocol).
	Subscription []string `json:"subscription,omitempty"`
	// Assignment maps topic -> sorted partitions; null when not seen or
	// the protocol is opaque. A topic known only by id is "id:<hex>".
	Assignment map[string][]int32 `json:"assignment"`
	// AssignmentBytes is the raw assignment size of an opaque protocol.
	AssignmentBytes int `json:"assignment_bytes,omitempty"`
	// Tasks are a streams group member's tasks (KIP-1071); Assignment is
	// then its active tasks' source partitions.
	Tasks *StreamsTasks `json:"tasks,omitempty"`
}

// Member actions (MemberEvent.Action).
const (
	MemberJoined  = "joined"
	MemberLeft    = "left"
	MemberExpired = "expired"
)

// MemberEvent ("type":"member") is a member joining, leaving or expiring.
//
// An expiry's time is when the member's session timeout ran out after its
// last request; it is emitted once the capture confirms it (the member is
// missing from a later generation, the broker answers it UNKNOWN_MEMBER_ID,
// it stays silent past its rebalance timeout too, or the input ends), so it
// may follow events with later times.
type MemberEvent struct {
	Action     string  `json:"action"` // joined, left or expired
	Group      string  `json:"group"`
	MemberID   string  `json:"member_id"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	InstanceID *string `json:"instance_id"`
	// Generation is the generation (KIP-848: member epoch) the member
	// joined, or the last one it was part of.
	Generation int32 `json:"generation"`
	// Reason is the client's LeaveGroup reason or kwire's explanation.
	Reason string `json:"reason,omitempty"`
	// SessionTimeoutMillis is the member's session timeout (0: unknown).
	SessionTimeoutMillis int32 `json:"session_timeout_ms,omitempty"`
	// PID and Comm are the process behind the member's requests, when the
	// source knows it (eBPF).
	PID  uint32 `json:"pid,omitempty"`
	Comm string `json:"comm,omitempty"`
	// LastSeen (expired only) is the member's last request to the
	// coordinator; SilentMillis how long it was silent until expiry.
	LastSeen     *Time `json:"last_seen,omitempty"`
	SilentMillis int64 `json:"silent_ms,omitempty"`

	at time.Time
}

// Type implements Event.
func (*MemberEvent) Type() string { return "member" }

// Time implements Event.
func (e *MemberEvent) Time() time.Time { return e.at }

// Commit outcomes (CommitEvent.Outcome).
const (
	CommitAccepted = "accepted" // error code 0
	CommitRejected = "rejected" // a partition error code
	CommitUnknown  = "unknown"  // no response seen
)

// commitOutcome is the Outcome of a commit the broker answered with code
// (-1: no answer seen).
func commitOutcome(code int16) string {
	switch {
	case code < 0:
		return CommitUnknown
	case code > 0:
		return CommitRejected
	}
	return CommitAccepted
}

// CommitEvent ("type":"commit") is one partition of an OffsetCommit request
// with the broker's answer for it. Its time is the request's.
type CommitEvent struct {
	Group      string `json:"group"`
	MemberID   string `json:"member_id"`
	Generation int32  `json:"generation"` // -1: no generation (admin commit, v0)
	Topic      string `json:"topic"`      // "id:<hex>" when known only by id
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	// Metadata is the commit's metadata string (null when null).
	Metadata *string `json:"metadata"`
	// ErrorCode is the broker's code for the partition; -1 when no
	// response was seen. Error is its name when not 0.
	ErrorCode  int16  `json:"error_code"`
	Error      string `json:"error,omitempty"`
	Outcome    string `json:"outcome"` // accepted, rejected or unknown
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	Conn       Conn   `json:"conn"`

	at time.Time
}

// Type implements Event.
func (*CommitEvent) Type() string { return "commit" }

// Time implements Event.
func (e *CommitEvent) Time() time.Time { return e.at }

// CoordinatorEvent ("type":"coordinator") is a group's coordinator learned
// or changed: from a FindCoordinator answer (source "find_coordinator"), or,
// when none was seen, from the broker that answers the group's requests
// (source "group_requests").
type CoordinatorEvent struct {
	Group  string `json:"group"`
	NodeID int32  `json:"node_id"` // -1 when unknown
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	// LearnedFrom is the broker (ip:port) whose answer taught it.
	LearnedFrom string `json:"learned_from"`
	Source      string `json:"source"`
	// ErrorCode is FindCoordinator's error for the group (0: found).
	ErrorCode int16  `json:"error_code"`
	Error     string `json:"error,omitempty"`

	at time.Time
}

// Type implements Event.
func (*CoordinatorEvent) Type() string { return "coordinator" }

// Time implements Event.
func (e *CoordinatorEvent) Time() time.Time { return e.at }
