package correlate

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/kwire/kwire/decode"
)

// Share groups (KIP-932, "queues for Kafka"): members join and heartbeat
// with ShareGroupHeartbeat (the member epoch stands for the generation, as
// in KIP-848 groups, and so do member events and member_expired), and
// consume with ShareFetch: the broker hands each member records it
// acquired for it under an acquisition lock (AcquisitionLockTimeoutMillis),
// each range with its delivery count; the member acknowledges them on its
// next ShareFetch or in a ShareAcknowledge: accept (done), release (back
// to the queue, delivered again with a higher count), reject (archived,
// never delivered again) or renew (KIP-1222: the lock restarts). Records
// not acknowledged when the lock runs out go back to the queue too, and a
// record delivered group.share.delivery.count.limit times is archived.

// GroupShare is the type of a share group (GenerationEvent.GroupType).
const GroupShare = "share"

// Share group actions (ShareGroupEvent.Action).
const (
	ShareAcquired     = "acquired"
	ShareAcknowledged = "acknowledged"
)

// Acknowledge types of ShareFetch and ShareAcknowledge (KIP-932, KIP-1222),
// as ShareAckRange.Type names them.
const (
	shareAckGap     int8 = 0
	shareAckAccept  int8 = 1
	shareAckRelease int8 = 2
	shareAckReject  int8 = 3
	shareAckRenew   int8 = 4
)

// ackTypeName names an acknowledge type: gap, accept, release, reject,
// renew, or unknown_<n>.
func ackTypeName(t int8) string {
	switch t {
	case shareAckGap:
		return "gap"
	case shareAckAccept:
		return "accept"
	case shareAckRelease:
		return "release"
	case shareAckReject:
		return "reject"
	case shareAckRenew:
		return "renew"
	}
	return "unknown_" + strconv.Itoa(int(t))
}

// defaultShareLockMillis stands in for the acquisition lock of ShareFetch
// v0 answers, which do not carry it (Kafka's
// group.share.record.lock.duration.ms default).
const defaultShareLockMillis = 30000

// ShareGroupEvent ("type":"share_group") is what a share group member's
// ShareFetch or ShareAcknowledge did to one partition: records the broker
// acquired for it (acquired: the ranges with their delivery counts, a
// count above 1 being a redelivery), or its acknowledgements (acknowledged:
// accept, release, reject, renew and gap ranges, with the broker's answer).
// Members joining, leaving and expiring are member events, and each epoch
// with the members' assignments a generation event (group_type "share"),
// as for KIP-848 groups.
type ShareGroupEvent struct {
	Action     string `json:"action"` // acquired or acknowledged
	Group      string `json:"group"`
	MemberID   string `json:"member_id"`
	ClientID   string `json:"client_id"`
	ClientHost string `json:"client_host"`
	Conn       Conn   `json:"conn"`
	// API is ShareFetch or ShareAcknowledge (acknowledged).
	API       string `json:"api"`
	Topic     string `json:"topic"` // "id:<hex>" when known only by id
	Partition int32  `json:"partition"`
	// Acquired are the ranges acquired (at most 64 listed); Records
	// counts their records, Redelivered those with a delivery count above
	// 1; LockTimeoutMillis is the acquisition lock the broker gave (0:
	// ShareFetch v0, which does not say).
	Acquired         []ShareRange `json:"acquired,omitempty"`
	Records          int64        `json:"records,omitempty"`
	Redelivered      int64        `json:"redelivered,omitempty"`
	MaxDeliveryCount int16        `json:"max_delivery_count,omitempty"`
	// Cause is why the Redelivered records went back to the queue when
	// their ranges agree (see ShareRange.Cause).
	Cause             string `json:"cause,omitempty"`
	LockTimeoutMillis int32  `json:"acquisition_lock_timeout_ms,omitempty"`
	// Acks are the acknowledgement ranges (at most 64 listed); Accepted,
	// Released, Rejected and Renewed count their records.
	Acks     []ShareAckRange `json:"acks,omitempty"`
	Accepted int64           `json:"accepted,omitempty"`
	Released int64           `json:"released,omitempty"`
	Rejected int64           `json:"rejected,omitempty"`
	Renewed  int64           `json:"renewed,omitempty"`
	// ErrorCode is the broker's answer for the partition (acknowledged:
	// its acknowledge error; -1: no answer seen), Error its name.
	ErrorCode int16  `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`

	at time.Time
}

// Type implements Event.
func (*ShareGroupEvent) Type() string { return "share_group" }

// Time implements Event: the answer's time (acquired), the request's
// (acknowledged).
func (e *ShareGroupEvent) Time() time.Time { return e.at }

// ShareRange is a range of acquired records with their delivery count.
type ShareRange struct {
	FirstOffset   int64 `json:"first_offset"`
	LastOffset    int64 `json:"last_offset"`
	DeliveryCount int16 `json:"delivery_count"`
	// Cause (a delivery count above 1) is why the records went back to
	// the queue before: a ShareCause value.
	Cause string `json:"cause,omitempty"`
}

// ShareAckRange is a range of records acknowledged with one type: accept,
// release, reject, renew or gap (offsets that are no records).
type ShareAckRange struct {
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	Type        string `json:"ack_type"`
}

// maxShareRanges caps the ranges listed in one event.
const maxShareRanges = 64

// shareState is what a share group adds to its groupState.
type shareState struct {
	parts   map[tp]*sharePart
	members map[string]*shareCounts // by member id
}

// shareCounts are a partition's or a member's record counts.
type shareCounts struct {
	acquired, redelivered                 int64
	accepted, released, rejected, renewed int64
	lockExpired                           int64
	maxDelivery                           int16
}

// sharePart is one partition of a share group.
type sharePart struct {
	shareCounts
	lockMillis int32
	// held are acquisitions not yet acknowledged, oldest first, at most
	// maxShareHeld; returns the recent releases, rejects and lock
	// expiries (evidence of a redelivery).
	held    []*shareHeld
	returns []shareReturn
}

// shareHeld is one acquired range not yet wholly acknowledged.
type shareHeld struct {
	member   string
	client   clientKey
	count    int16
	at       time.Time // the ShareFetch answer
	deadline time.Time // when its lock runs out
	ev       Evidence
	pending  []span64 // offsets not acknowledged yet
	// grace is how long after the deadline an acknowledgement sent
	// before it may still arrive (the member's long-poll wait).
	grace time.Duration
}

// shareReturn is records that went back to the queue.
type shareReturn struct {
	first, last int64
	how         string // release, reject, lock_expired, or a ShareCause
	member      string
	ev          Evidence
	at          time.Time // when the broker put them back (zero: at ev)
	// held is the acquisition they were released from (connection
	// closes and expiries: share_member_died), its client and time.
	held *shareHeld
}

// span64 is the offsets first..last.
type span64 struct{ first, last int64 }

// shareProtocol is a share group's protocol type, as ListGroups gives it.
const shareProtocol = "share"

const (
	maxShareHeld    = 1024
	maxShareReturns = 32
)

// share returns g's share state, making g a share group.
func (g *groupState) shareOf() *shareState {
	if g.share == nil {
		g.share = &shareState{parts: make(map[tp]*sharePart), members: make(map[string]*shareCounts)}
	}
	return g.share
}

// part returns partition p of s, nil when the cap bites.
func (c *Correlator) sharePartOf(s *shareState, p tp) *sharePart {
	sp := s.parts[p]
	if sp == nil {
		if len(s.parts) >= c.opts.MaxPartitionsPerGroup {
			c.stats.Limits.PartitionsDropped++
			return nil
		}
		sp = &sharePart{}
		s.parts[p] = sp
	}
	return sp
}

// memberCounts returns member id's counts, nil when the cap bites.
func (c *Correlator) shareMemberOf(s *shareState, id string) *shareCounts {
	mc := s.members[id]
	if mc == nil {
		if len(s.members) >= c.opts.MaxMembersPerGroup {
			c.stats.Limits.MembersDropped++
			return nil
		}
		mc = &shareCounts{}
		s.members[id] = mc
	}
	return mc
}

// shareGroupOf returns group name as a share group: nil for an empty name,
// when the group cap bites, or when the group is known as another type.
func (c *Correlator) shareGroupOf(name *string) *groupState {
	if name == nil || *name == "" {
		return nil
	}
	g := c.group(*name)
	if g == nil {
		return nil
	}
	g.setType(GroupShare)
	if g.typ != GroupShare {
		return nil
	}
	g.protocolType = shareProtocol
	g.shareOf()
	return g
}

// shareEvent fills what the share events of e share.
func (c *Correlator) shareEvent(g *groupState, e *decode.Exchange, action, member string, p tp) *ShareGroupEvent {
	k := c.keyOf(e)
	return &ShareGroupEvent{Action: action, Group: g.name, MemberID: member, ClientID: k.clientID, ClientHost: k.host,
		Conn: c.connOf(e), Topic: p.topic, Partition: p.partition}
}

// records counts the offsets first..last (0 when the range is empty or
// backwards; math.MaxInt64 at most, for ranges no broker sends).
func records(first, last int64) int64 {
	if last < first || first < 0 {
		return 0
	}
	return satAdd(last-first, 1)
}

// satAdd adds non-negative counts without wrapping around.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// subtract removes first..last from spans.
func subtract(spans []span64, first, last int64) []span64 {
	out := spans[:0:0]
	for _, s := range spans {
		if last < s.first || first > s.last {
			out = append(out, s)
			continue
		}
		if s.first < first {
			out = append(out, span64{s.first, first - 1})
		}
		if s.last > last {
			out = append(out, span64{last + 1, s.last})
		}
	}
	return out
}

// overlapsSpan reports whether any of spans holds an offset of first..last.
func overlapsSpan(spans []span64, first, last int64) bool {
	for _, s := range spans {
		if first <= s.last && last >= s.first {
			return true
		}
	}
	return false
}

// pendingRecords counts the offsets of spans.
func pendingRecords(spans []span64) int64 {
	var n int64
	for _, s := range spans {
		n = satAdd(n, records(s.first, s.last))
	}
	return n
}

// addReturn remembers records that went back to the queue.
func (sp *sharePart) addReturn(r shareReturn) {
	if r.at.IsZero() {
		r.at = r.ev.TS.Time
	}
	if len(sp.returns) == maxShareReturns {
		copy(sp.returns, sp.returns[1:])
		sp.returns = sp.returns[:maxShareReturns-1]
	}
	sp.returns = append(sp.returns, r)
}

// mergeSharePart merges src into dst (a topic id named by Metadata).
func mergeSharePart(dst, src *sharePart) *sharePart {
	dst.add(&src.shareCounts)
	dst.lockMillis = max(dst.lockMillis, src.lockMillis)
	dst.held = append(dst.held, src.held...)
	sort.SliceStable(dst.held, func(i, j int) bool { return dst.held[i].at.Before(dst.held[j].at) })
	dst.returns = append(dst.returns, src.returns...)
	if n := len(dst.returns); n > maxShareReturns {
		dst.returns = dst.returns[n-maxShareReturns:]
	}
	return dst
}

func (a *shareCounts) add(b *shareCounts) {
	a.acquired = satAdd(a.acquired, b.acquired)
	a.redelivered = satAdd(a.redelivered, b.redelivered)
	a.accepted = satAdd(a.accepted, b.accepted)
	a.released = satAdd(a.released, b.released)
	a.rejected = satAdd(a.rejected, b.rejected)
	a.renewed = satAdd(a.renewed, b.renewed)
	a.lockExpired = satAdd(a.lockExpired, b.lockExpired)
	a.maxDelivery = max(a.maxDelivery, b.maxDelivery)
}

// ShareSummary is a share group's records in a Snapshot (Group.Share).
type ShareSummary struct {
	// Partitions are sorted by topic and partition; Members by member id.
	Partitions []SharePartition `json:"partitions"`
	Members    []ShareMember    `json:"members"`
}

// ShareCounts count a share group's records: Acquired every delivery
// (Redelivered those with a delivery count above 1), Accepted, Released,
// Rejected and Renewed the acknowledgements the broker took,
// LockExpired the records whose acquisition lock ran out unacknowledged
// (share_ack_lost), and MaxDeliveryCount the highest delivery count.
type ShareCounts struct {
	Acquired         int64 `json:"acquired"`
	Redelivered      int64 `json:"redelivered"`
	Accepted         int64 `json:"accepted"`
	Released         int64 `json:"released"`
	Rejected         int64 `json:"rejected"`
	Renewed          int64 `json:"renewed,omitempty"`
	LockExpired      int64 `json:"lock_expired"`
	MaxDeliveryCount int16 `json:"max_delivery_count"`
}

// SharePartition is one partition of a share group.
type SharePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	ShareCounts
	// Held counts the records acquired and not acknowledged at the time
	// of the Snapshot, their locks not run out yet.
	Held int64 `json:"held"`
	// LockTimeoutMillis is the acquisition lock the broker last gave (0:
	// not on the wire).
	LockTimeoutMillis int32 `json:"acquisition_lock_timeout_ms"`
}

// ShareMember is one member's records in a share group.
type ShareMember struct {
	MemberID string `json:"member_id"`
	ShareCounts
}

func (a *shareCounts) snapshot() ShareCounts {
	return ShareCounts{Acquired: a.acquired, Redelivered: a.redelivered, Accepted: a.accepted, Released: a.released,
		Rejected: a.rejected, Renewed: a.renewed, LockExpired: a.lockExpired, MaxDeliveryCount: a.maxDelivery}
}

// snapshot returns the output form of s.
func (s *shareState) snapshot() *ShareSummary {
	out := &ShareSummary{Partitions: make([]SharePartition, 0, len(s.parts)), Members: make([]ShareMember, 0, len(s.members))}
	for _, p := range sortedTPs(s.parts) {
		sp := s.parts[p]
		o := SharePartition{Topic: p.topic, Partition: p.partition, ShareCounts: sp.snapshot(), LockTimeoutMillis: sp.lockMillis}
		for _, h := range sp.held {
			o.Held += pendingRecords(h.pending)
		}
		out.Partitions = append(out.Partitions, o)
	}
	for _, id := range sortedKeys(s.members) {
		out.Members = append(out.Members, ShareMember{MemberID: id, ShareCounts: s.members[id].snapshot()})
	}
	return out
}
