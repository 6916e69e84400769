package gen

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Causes of a generation (Generation.Cause). They are scripted truth: the
// scenario knows which member it started, closed, killed or froze.
const (
	CauseMemberJoined   = "member_joined"
	CauseMemberLeft     = "member_left"
	CauseMemberExpired  = "member_expired"
	CauseMetadataChange = "metadata_change"
	CauseUnknown        = "unknown"
)

// GroupTruth is one consumer group as its members and the broker saw it,
// recorded without any kwire code: generations from the members' own
// balancer and sync callbacks (classic) or the broker's group state
// (KIP-848), the final state from a DescribeGroups (or
// ConsumerGroupDescribe) at the end, committed offsets from an OffsetFetch
// at the end, and fetched records from each member's HookFetchBatchRead.
type GroupTruth struct {
	ProtocolType string `json:"protocol_type"`
	// GroupProtocol is Kafka's group.protocol: classic (JoinGroup,
	// SyncGroup) or consumer (KIP-848 ConsumerGroupHeartbeat).
	GroupProtocol string       `json:"group_protocol"`
	Generations   []Generation `json:"generations"`
	Final         *GroupFinal  `json:"final,omitempty"`
	// Committed is topic -> partition -> offset (also in Truth.Committed).
	Committed map[string]map[string]int64 `json:"committed,omitempty"`
	// Fetched is topic -> partition -> records in the record batches the
	// group's members read from Fetch responses (every record of every
	// batch, including records before the fetch offset).
	Fetched map[string]map[string]int64 `json:"fetched,omitempty"`
	// Consumed is topic -> partition -> records the members' polls gave
	// the application (in-process poll loops; control records left out):
	// a read_committed member gets neither transaction markers nor
	// aborted records (KIP-98).
	Consumed map[string]map[string]int64 `json:"consumed,omitempty"`
}

// Generation is one generation of a classic group (or one group epoch of
// a KIP-848 group at which the broker reported the group Stable).
type Generation struct {
	Generation int32 `json:"generation"`
	// Protocol is the assignor the group chose (the KIP-848 server
	// assignor for consumer groups).
	Protocol string `json:"protocol"`
	// Leader is the member whose balancer ran; "" for KIP-848 groups.
	Leader  string               `json:"leader"`
	Members map[string]GenMember `json:"members"`
	// Cause and CauseMember say what started the rebalance that made
	// this generation; CauseMember is "" when the cause is unknown.
	Cause       string `json:"cause"`
	CauseMember string `json:"cause_member"`
	// Topics are the partition counts the leader balanced (the
	// subscribed topics).
	Topics map[string]int32 `json:"topics,omitempty"`
	// Pending are partitions of Topics that this generation left
	// unassigned: a cooperative rebalance holds back partitions that
	// move between members until their owner revoked them and rejoined.
	Pending map[string][]int32 `json:"pending,omitempty"`
	// Completed is true when every member received its assignment
	// (SyncGroup answered without error); NotSynced lists those that did
	// not (e.g. a SyncGroup answered REBALANCE_IN_PROGRESS because a
	// cooperative member already rejoined): their assignment above is
	// the leader's plan, which never reached them.
	Completed bool     `json:"completed"`
	NotSynced []string `json:"not_synced,omitempty"`
	// StaticRejoins lists static members (KIP-345) that restarted
	// during the generation and took over their old assignment under a
	// new member id, with no rebalance.
	StaticRejoins []StaticRejoin `json:"static_rejoins,omitempty"`
}

// GenMember is one member of a generation.
type GenMember struct {
	ClientID   string             `json:"client_id"`
	InstanceID *string            `json:"instance_id"`
	Assignment map[string][]int32 `json:"assignment"`
}

// StaticRejoin is a static member replaced without a rebalance.
type StaticRejoin struct {
	InstanceID  string `json:"instance_id"`
	OldMemberID string `json:"old_member_id"`
	NewMemberID string `json:"new_member_id"`
	ClientID    string `json:"client_id"`
}

// GroupFinal is the group at the end of the scenario: state and members
// from DescribeGroups (or ConsumerGroupDescribe) sent by a truth client
// (in the capture); the classic generation from the broker's state, since
// DescribeGroups carries none.
type GroupFinal struct {
	State      string        `json:"state"`
	Generation int32         `json:"generation"`
	Protocol   string        `json:"protocol"`
	Members    []FinalMember `json:"members"`
}

// FinalMember is one member in GroupFinal.
type FinalMember struct {
	MemberID   string             `json:"member_id"`
	ClientID   string             `json:"client_id"`
	ClientHost string             `json:"client_host"`
	InstanceID *string            `json:"instance_id"`
	Assignment map[string][]int32 `json:"assignment"`
}

// Hazard is a misuse a scenario drove on purpose (issue 4), with the
// numbers that prove it. Numbers keys are documented per kind in the
// scenario that records it.
type Hazard struct {
	Kind       string `json:"kind"`
	Group      string `json:"group,omitempty"`
	Topic      string `json:"topic,omitempty"`
	Partition  *int32 `json:"partition,omitempty"`
	MemberID   string `json:"member_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	Generation *int32 `json:"generation,omitempty"`
	// TransactionalID names a transactional producer's hazards.
	TransactionalID string           `json:"transactional_id,omitempty"`
	Numbers         map[string]int64 `json:"numbers,omitempty"`
	// Reason says why the broker removed a member (member_expired):
	// ReasonSessionTimeout or ReasonRebalanceTimeout.
	Reason string `json:"reason,omitempty"`
	// Cause names the hazard kind that explains this one (e.g. a
	// commit_regression caused by an offset_reset).
	Cause string `json:"cause,omitempty"`
	Note  string `json:"note"`
}

// Reasons of a member_expired hazard, as the broker decided them.
const (
	// ReasonSessionTimeout: no heartbeat within the session timeout.
	ReasonSessionTimeout = "session_timeout"
	// ReasonRebalanceTimeout: during a rebalance the member did not
	// rejoin (classic: JoinGroup; KIP-848: revoke its partitions)
	// within the rebalance timeout.
	ReasonRebalanceTimeout = "rebalance_timeout"
)

// groupReport is one fact a group member (in process, or in a child that
// prints it as a JSON line) reports about itself.
type groupReport struct {
	// Kind is plan (the leader's balance), sync (a member's assignment
	// for a generation), owned (what a member owns after an assignment
	// callback), join (a JoinGroup was written), fetch (a record batch
	// was read), consumed (records a poll gave the application), hazard,
	// note (Text).
	Kind       string  `json:"kind"`
	Group      string  `json:"group"`
	MemberID   string  `json:"member_id,omitempty"`
	Generation int32   `json:"generation,omitempty"`
	ClientID   string  `json:"client_id,omitempty"`
	InstanceID *string `json:"instance_id,omitempty"`
	Protocol   string  `json:"protocol,omitempty"`
	// Plan is member -> topic -> partitions; PlanInstances member ->
	// instance id for static members.
	Plan          map[string]map[string][]int32 `json:"plan,omitempty"`
	PlanInstances map[string]string             `json:"plan_instances,omitempty"`
	Topics        map[string]int32              `json:"topics,omitempty"`
	Assignment    map[string][]int32            `json:"assignment,omitempty"`
	Topic         string                        `json:"topic,omitempty"`
	Partition     int32                         `json:"partition,omitempty"`
	Records       int64                         `json:"records,omitempty"`
	Hazard        *Hazard                       `json:"hazard,omitempty"`
	Text          string                        `json:"text,omitempty"`
	Nanos         int64                         `json:"ns"`
}

// groupScript is something a scenario did to a member.
type groupScript struct {
	group, kind, memberID string
	at                    time.Time // when the effect starts (expiry: kill + session timeout)
}

// groupSnap is the broker's view of a group at a moment the scenario
// chose (kfake GroupInfo: not on the wire).
type groupSnap struct {
	info   *kfake.GroupInfo
	topics map[string]int32 // partition counts of the subscribed topics
	at     time.Time
}

// groupRecorder collects the group facts of one cluster.
type groupRecorder struct {
	mu       sync.Mutex
	reports  []groupReport
	scripts  []groupScript
	snaps    map[string][]groupSnap
	kip848   map[string]string // group -> server assignor, for KIP-848 groups
	finals   map[string]*GroupFinal
	ptypes   map[string]string
	hazards  []Hazard
	notes    []string
	badLines int
}

func newGroupRecorder() *groupRecorder {
	return &groupRecorder{snaps: map[string][]groupSnap{}, kip848: map[string]string{},
		finals: map[string]*GroupFinal{}, ptypes: map[string]string{}}
}

func (r *groupRecorder) add(rep groupReport) {
	if rep.Nanos == 0 {
		rep.Nanos = time.Now().UnixNano()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case rep.Kind == "hazard" && rep.Hazard != nil:
		r.hazards = append(r.hazards, *rep.Hazard)
		return
	case rep.Kind == "note":
		r.notes = append(r.notes, rep.Text)
		return
	}
	r.reports = append(r.reports, rep)
}

// addLine takes a JSON report line printed by a child.
func (r *groupRecorder) addLine(b []byte) {
	var rep groupReport
	if err := json.Unmarshal(b, &rep); err != nil || rep.Kind == "" {
		r.mu.Lock()
		r.badLines++ // e.g. a line cut short by SIGKILL
		r.mu.Unlock()
		return
	}
	r.add(rep)
}

func (r *groupRecorder) script(group, kind, memberID string, at time.Time) {
	r.mu.Lock()
	r.scripts = append(r.scripts, groupScript{group: group, kind: kind, memberID: memberID, at: at})
	r.mu.Unlock()
}

func (r *groupRecorder) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// ownedMismatch lists the members of gi whose last owned report differs
// from what the broker says they own (or who reported nothing).
func (r *groupRecorder) ownedMismatch(gi *kfake.GroupInfo) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := map[string]map[string][]int32{}
	for _, rep := range r.reports {
		if rep.Group == gi.Group && rep.Kind == "owned" {
			last[rep.MemberID] = rep.Assignment
		}
	}
	var bad []string
	for _, m := range gi.Members {
		if a, ok := last[m.MemberID]; !ok || !sameAssignment(a, m.Assignment) {
			bad = append(bad, fmt.Sprintf("%s owns %v by its callbacks, %v by the broker", m.MemberID, a, normAssignment(m.Assignment)))
		}
	}
	return bad
}

// planRange returns the first and last generation whose plan was made
// between from and to, and how many there were.
func (r *groupRecorder) planRange(group string, from, to time.Time) (first, last int32, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[int32]bool{}
	for _, rep := range r.reports {
		if rep.Group != group || rep.Kind != "plan" || rep.Nanos < from.UnixNano() || rep.Nanos > to.UnixNano() || seen[rep.Generation] {
			continue
		}
		seen[rep.Generation] = true
		if n == 0 || rep.Generation < first {
			first = rep.Generation
		}
		last = max(last, rep.Generation)
		n++
	}
	return first, last, n
}

// lastGeneration returns the generation (member epoch) of the latest
// sync or owned report of memberID in group, or -1.
func (r *groupRecorder) lastGeneration(group, memberID string) (string, int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reports) - 1; i >= 0; i-- {
		rep := r.reports[i]
		if rep.Group == group && rep.MemberID == memberID && (rep.Kind == "sync" || rep.Kind == "owned") {
			return memberID, rep.Generation
		}
	}
	return memberID, -1
}

// lastMember returns the member id the latest sync or owned report of
// clientID in group named, or "".
func (r *groupRecorder) lastMember(group, clientID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reports) - 1; i >= 0; i-- {
		rep := r.reports[i]
		if rep.Group == group && rep.ClientID == clientID && rep.MemberID != "" && (rep.Kind == "sync" || rep.Kind == "owned") {
			return rep.MemberID
		}
	}
	return ""
}

// build assembles the groups section. committed comes from
// RecordCommitted.
func (r *groupRecorder) build(committed map[string]map[string]map[string]int64) (map[string]*GroupTruth, []Hazard, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, rep := range r.reports {
		if rep.Group != "" {
			names[rep.Group] = true
		}
	}
	for g := range r.snaps {
		names[g] = true
	}
	for g := range r.finals {
		names[g] = true
	}
	notes := slices.Clone(r.notes)
	if r.badLines > 0 {
		notes = append(notes, fmt.Sprintf("groups: %d report lines from children could not be read (cut short by SIGKILL?)", r.badLines))
	}
	if len(names) == 0 {
		return nil, r.hazards, notes
	}
	notes = append(notes, "groups: classic generations come from the members' own callbacks: the leader's balancer reports "+
		"its plan (the leader is the member whose balancer ran), every member's balancer (sarama: Setup) reports the "+
		"assignment it synced; KIP-848 generations are the group epochs at which the broker (kfake GroupInfo) "+
		"reported the group Stable; causes are scripted by the scenario (a new member's first JoinGroup, timed as the broker read it off its tap, the "+
		"scenario's LeaveGroup, kill or SIGSTOP; metadata_change is the first existing member to rejoin, e.g. "+
		"after a cooperative generation held partitions back); a generation number missing from the list was an "+
		"empty group's bump",
		"groups.*.fetched counts every record of every batch the members read from Fetch responses (kgo "+
			"HookFetchBatchRead, records before the fetch offset included); members in child processes report each "+
			"batch as they read it, so a SIGKILLed child's count covers what it read before it died")
	out := map[string]*GroupTruth{}
	for _, g := range slices.Sorted(maps.Keys(names)) {
		gt := &GroupTruth{ProtocolType: "consumer", GroupProtocol: "classic", Final: r.finals[g], Committed: committed[g]}
		if pt := r.ptypes[g]; pt != "" {
			gt.ProtocolType = pt
		}
		var gnotes []string
		if _, ok := r.kip848[g]; ok {
			gt.GroupProtocol = "consumer"
			gt.Generations, gnotes = r.gens848(g)
		} else {
			gt.Generations, gnotes = r.gensClassic(g)
		}
		notes = append(notes, gnotes...)
		gt.Fetched, gt.Consumed = r.fetched(g, "fetch"), r.fetched(g, "consumed")
		out[g] = gt
	}
	return out, r.hazards, notes
}
