package correlate

import "time"

// Options tune a Correlator. A nil *Options, or a zero field, means the
// default. The caps bound memory on long live captures; when one bites, the
// matching counter in Limits says how often.
type Options struct {
	// CountsGroup, when set, says whether Stats.ExpiriesRetracted counts
	// the members of group: a shard of route.Shards counts only those of
	// the groups it owns (nil: every group).
	CountsGroup func(group string) bool `json:"-"`
	// MaxGroups caps the groups tracked (default 10000). A full table
	// forgets groups that requests only named (no member, generation or
	// accepted commit seen), least recently used first
	// (Limits.GroupsEvicted); with none of those left, requests for
	// further groups are ignored and counted in Limits.GroupsDropped.
	MaxGroups int
	// MaxMembersPerGroup caps the members remembered per group, live or
	// departed (default 2000). Departed members are forgotten first.
	MaxMembersPerGroup int
	// MaxPartitionsPerGroup caps the topic partitions tracked per group
	// (default 100000), and those of all groups only named (see
	// MaxGroups) together: those partitions are anyone's to name.
	MaxPartitionsPerGroup int
	// MaxClients caps the clients (client host + client id) remembered,
	// with their group bindings and unattributed consumption (default
	// 100000). The least recently seen clients are forgotten first.
	MaxClients int
	// MaxGenerations caps the generations remembered per group (default
	// 200); the oldest emitted ones are forgotten first.
	MaxGenerations int
	// MaxCommitHistory caps the commits remembered per group partition
	// (default 32); the committed offset itself is always kept.
	MaxCommitHistory int
	// HealthWindow is the capture time over which a group partition's
	// health is judged (health.go); 0: 60 s.
	HealthWindow time.Duration
	// MaxFetchSessions caps the fetch sessions (KIP-227) tracked (default
	// 10000); the least recently used are forgotten first.
	MaxFetchSessions int
	// MaxTopicIDs caps the topic ids (KIP-516) remembered with the names
	// Metadata responses gave them, and, apart, the ids used before any
	// response named them (default 100000 each). The least recently seen
	// are forgotten first (Limits.TopicIDsEvicted).
	MaxTopicIDs int
	// ConsumerSessionTimeout is the session timeout assumed for KIP-848
	// groups, whose members do not send it (the broker's
	// group.consumer.session.timeout.ms; default 45s), and for share and
	// streams groups (group.share.session.timeout.ms,
	// group.streams.session.timeout.ms).
	ConsumerSessionTimeout time.Duration
	// Hazards tune hazard detection (see HazardEvent).
	Hazards HazardOptions
}

const (
	defaultMaxGroups         = 10000
	defaultMaxMembers        = 2000
	defaultMaxPartitions     = 100000
	defaultMaxClients        = 100000
	defaultMaxGenerations    = 200
	defaultMaxCommitHistory  = 32
	defaultMaxFetchSessions  = 10000
	defaultMaxTopicIDs       = 100000
	defaultConsumerSessionTO = 45 * time.Second
)

// WithDefaults returns o (nil: none) with every option left zero set to
// its default, as New uses it.
func (o *Options) WithDefaults() Options { return o.withDefaults() }

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	setDefault(&r.MaxGroups, defaultMaxGroups)
	setDefault(&r.MaxMembersPerGroup, defaultMaxMembers)
	setDefault(&r.MaxPartitionsPerGroup, defaultMaxPartitions)
	setDefault(&r.MaxClients, defaultMaxClients)
	setDefault(&r.MaxGenerations, defaultMaxGenerations)
	setDefault(&r.MaxCommitHistory, defaultMaxCommitHistory)
	if r.HealthWindow <= 0 {
		r.HealthWindow = 60 * time.Second
	}
	setDefault(&r.MaxFetchSessions, defaultMaxFetchSessions)
	setDefault(&r.MaxTopicIDs, defaultMaxTopicIDs)
	setDefault(&r.ConsumerSessionTimeout, defaultConsumerSessionTO)
	r.Hazards = r.Hazards.withDefaults()
	return r
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Limits count how often the caps of Options bit: each counter counts the
// requests (or items) refused or the entries forgotten.
type Limits struct {
	GroupsDropped int64 `json:"groups_dropped"`
	// GroupsEvicted counts groups forgotten to make room in a full table
	// (MaxGroups): groups that requests only named (FindCoordinator,
	// DescribeGroups, ListGroups, OffsetFetch, rejected commits), never
	// one with a member, a generation or an accepted commit. Omitted
	// while zero.
	GroupsEvicted      int64 `json:"groups_evicted,omitempty"`
	MembersDropped     int64 `json:"members_dropped"`
	PartitionsDropped  int64 `json:"partitions_dropped"`
	ClientsEvicted     int64 `json:"clients_evicted"`
	GenerationsDropped int64 `json:"generations_dropped"`
	CommitsDropped     int64 `json:"commits_dropped"`
	SessionsEvicted    int64 `json:"fetch_sessions_evicted"`
	// TopicIDsEvicted counts topic ids forgotten (MaxTopicIDs), with their
	// name or unresolved. Omitted while zero.
	TopicIDsEvicted int64 `json:"topic_ids_evicted,omitempty"`
	// TxnsEvicted counts transactional ids forgotten (MaxClients), those
	// only named in FindCoordinator answers first. Omitted while zero.
	TxnsEvicted int64 `json:"transactional_ids_evicted,omitempty"`
	// ShareHeldDropped counts share group acquisitions forgotten unjudged
	// (share_ack_lost) because a partition held maxShareHeld (1024) not
	// yet acknowledged. Omitted while zero.
	ShareHeldDropped int64 `json:"share_held_dropped,omitempty"`
	// EndsDropped counts partition ends not learned because
	// MaxPartitionsPerGroup partitions' ends were known already: those
	// groups' lag is measured against their own Fetches. Omitted while
	// zero.
	EndsDropped int64 `json:"ends_dropped,omitempty"`
}

// Stats are a Correlator's counters.
type Stats struct {
	// Exchanges counts exchanges handed to the Correlator.
	Exchanges int64 `json:"exchanges"`
	// Fetches counts consumer Fetch requests (replica fetches excluded),
	// split by how they were attributed to a group.
	Fetches           int64 `json:"fetches"`
	FetchesAttributed int64 `json:"fetches_attributed"`
	FetchesAmbiguous  int64 `json:"fetches_ambiguous"`
	FetchesUnknown    int64 `json:"fetches_unattributed"`
	// ReplicaFetches counts Fetch requests from brokers (replica id >= 0),
	// which are not consumption.
	ReplicaFetches int64 `json:"replica_fetches"`
	// UnknownFetchSessions counts incremental fetches (KIP-227) of a
	// session whose full fetch was not seen: the positions of the
	// partitions they omit are unknown.
	UnknownFetchSessions int64 `json:"unknown_fetch_sessions"`
	// Commits counts committed partitions, split by outcome.
	Commits           int64 `json:"commits"`
	CommitsAccepted   int64 `json:"commits_accepted"`
	CommitsRejected   int64 `json:"commits_rejected"`
	CommitsUnanswered int64 `json:"commits_unanswered"`
	// ExpiriesRetracted counts members judged expired that the broker
	// later answered as members: the judgement was wrong (a capture that
	// misses traffic), the member is live again.
	ExpiriesRetracted int64 `json:"expiries_retracted"`
	// HazardsIncomplete counts hazards resting on something not seen that
	// were made info because the capture lost data where the evidence
	// would have been (evidence_complete false).
	HazardsIncomplete int64 `json:"hazards_incomplete"`
	// UnresolvedTopicIDs counts topic ids still without a name (no
	// Metadata response named them); they appear as "id:<hex>".
	UnresolvedTopicIDs int `json:"unresolved_topic_ids"`

	Limits Limits `json:"limits"`
}
