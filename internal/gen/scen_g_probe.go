package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probe instruments one kgo group member for the groups truth: its
// balancer reports the plan when it leads and each assignment it syncs,
// its hook reports record batches read, and its
// partition callbacks report what it owns. Reports go to sink: the
// cluster's recorder in process, stdout lines in a child.
type probe struct {
	group, clientID string
	instanceID      *string
	sink            func(groupReport)
	cl              atomic.Pointer[kgo.Client]
	closing         atomic.Bool

	mu       sync.Mutex
	owned    map[string][]int32
	once     sync.Once
	assigned chan struct{} // closed when the member first owns partitions
}

func newProbe(group, clientID, instanceID string, sink func(groupReport)) *probe {
	p := &probe{group: group, clientID: clientID, sink: sink, owned: map[string][]int32{}, assigned: make(chan struct{})}
	if instanceID != "" {
		p.instanceID = &instanceID
	}
	return p
}

var _ kgo.HookFetchBatchRead = (*probe)(nil)

func (p *probe) report(r groupReport) {
	r.Group, r.ClientID, r.InstanceID = p.group, p.clientID, p.instanceID
	if r.Nanos == 0 {
		r.Nanos = time.Now().UnixNano()
	}
	p.sink(r)
}

// member returns the member id and generation (KIP-848: member epoch)
// the client knows now.
func (p *probe) member() (string, int32) {
	if cl := p.cl.Load(); cl != nil {
		return cl.GroupMetadata()
	}
	return "", -1
}

// OnFetchBatchRead reports every record batch read from a Fetch response.
func (p *probe) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, partition int32, m kgo.FetchBatchMetrics) {
	p.report(groupReport{Kind: "fetch", Topic: topic, Partition: partition, Records: int64(m.NumRecords)})
}

// consumed reports the records of a poll the application got, per
// partition (control records, which kgo.KeepControlRecords returns, left
// out).
func (p *probe) consumed(rs []*kgo.Record) {
	type key struct {
		topic     string
		partition int32
	}
	n := map[key]int64{}
	var order []key
	for _, r := range rs {
		if r.Attrs.IsControl() {
			continue
		}
		k := key{r.Topic, r.Partition}
		if _, ok := n[k]; !ok {
			order = append(order, k)
		}
		n[k]++
	}
	for _, k := range order {
		p.report(groupReport{Kind: "consumed", Topic: k.topic, Partition: k.partition, Records: n[k]})
	}
}

// onAssigned, onRevoked and onLost track the owned set (owned = prior -
// revoked + assigned) and report it with the generation it is for.
func (p *probe) onAssigned(a map[string][]int32) {
	p.mu.Lock()
	for t, ps := range a {
		p.owned[t] = append(p.owned[t], ps...)
		slices.Sort(p.owned[t])
	}
	n := 0
	for _, ps := range p.owned {
		n += len(ps)
	}
	p.mu.Unlock()
	p.reportOwned()
	if n > 0 {
		p.once.Do(func() { close(p.assigned) })
	}
}

func (p *probe) onRevoked(r map[string][]int32) {
	p.mu.Lock()
	for t, ps := range r {
		p.owned[t] = slices.DeleteFunc(p.owned[t], func(x int32) bool { return slices.Contains(ps, x) })
		if len(p.owned[t]) == 0 {
			delete(p.owned, t)
		}
	}
	p.mu.Unlock()
	// No report: kgo revokes before it takes on the generation (KIP-848:
	// member epoch) the revocation is for; the next assignment callback
	// reports the owned set with the right one.
}

// commitErr reports a failed commit as a note: a commit the broker
// refused is a hazard kwire may report even where the scenario did not
// mean one.
func (p *probe) commitErr(err error) {
	if err == nil || errors.Is(err, context.Canceled) || p.closing.Load() {
		return
	}
	m, g := p.member()
	p.report(groupReport{Kind: "note", MemberID: m, Generation: g,
		Text: fmt.Sprintf("group %s: member %s (%s) generation %d: a commit failed: %v", p.group, m, p.clientID, g, err)})
}

func (p *probe) reportOwned() {
	m, g := p.member()
	p.mu.Lock()
	own := normAssignment(p.owned)
	p.mu.Unlock()
	p.report(groupReport{Kind: "owned", MemberID: m, Generation: g, Assignment: own})
}

// balancers wraps bs so that the leader's plan and every synced
// assignment are reported.
func (p *probe) balancers(bs ...kgo.GroupBalancer) []kgo.GroupBalancer {
	out := make([]kgo.GroupBalancer, len(bs))
	for i, b := range bs {
		out[i] = &recBalancer{GroupBalancer: b, bal: b.(kgo.ConsumerBalancerBalance), p: p}
	}
	return out
}

// recBalancer is a kgo balancer that reports what it does. It builds the
// ConsumerBalancer itself (kgo.NewConsumerBalancer with itself as the
// balance function) so kgo still sees a *kgo.ConsumerBalancer.
type recBalancer struct {
	kgo.GroupBalancer
	bal kgo.ConsumerBalancerBalance
	p   *probe
}

func (b *recBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	return cb, cb.MemberTopics(), err
}

// Balance runs the wrapped balancer and reports its plan: the member
// running it is the generation's leader (kgo: only the leader balances).
func (b *recBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	into := b.bal.Balance(cb, topics)
	if into == nil {
		return nil
	}
	info := cb.Info()
	plan := map[string]map[string][]int32{}
	inst := map[string]string{}
	for _, m := range cb.Members() {
		plan[m.MemberID] = map[string][]int32{}
		if m.InstanceID != nil {
			inst[m.MemberID] = *m.InstanceID
		}
	}
	for _, a := range into.IntoSyncAssignment() {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			continue
		}
		for _, t := range ma.Topics {
			plan[a.MemberID][t.Topic] = append(plan[a.MemberID][t.Topic], t.Partitions...)
		}
	}
	for m, a := range plan {
		plan[m] = normAssignment(a)
	}
	b.p.report(groupReport{Kind: "plan", MemberID: info.LeaderID, Generation: info.Generation, Protocol: b.ProtocolName(),
		Plan: plan, PlanInstances: inst, Topics: maps.Clone(topics)})
	return into
}

// ParseSyncAssignment reports the member's assignment for the generation
// it just synced (kgo stores the generation before syncing).
func (b *recBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	a, err := b.GroupBalancer.ParseSyncAssignment(assignment)
	if err == nil {
		m, g := b.p.member()
		b.p.report(groupReport{Kind: "sync", MemberID: m, Generation: g, Protocol: b.ProtocolName(), Assignment: normAssignment(a)})
	}
	return a, err
}

// GMemberArgs configure a group member for the g_ and h_ scenarios, in
// process (startGMember) or in a child ("gmember").
type GMemberArgs struct {
	ClientID string   `json:"client_id"`
	Group    string   `json:"group"`
	Topics   []string `json:"topics"`
	// InstanceID makes the member static (KIP-345).
	InstanceID string `json:"instance_id,omitempty"`
	// SessionTimeoutMillis defaults to 6000, RebalanceTimeoutMillis to
	// 10000, HeartbeatMillis to 300.
	SessionTimeoutMillis   int `json:"session_timeout_ms,omitempty"`
	RebalanceTimeoutMillis int `json:"rebalance_timeout_ms,omitempty"`
	HeartbeatMillis        int `json:"heartbeat_ms,omitempty"`
	// Balancers, in preference order: cooperative-sticky (default),
	// sticky, range, roundrobin.
	Balancers []string `json:"balancers,omitempty"`
	// ServerSide uses the KIP-848 protocol (server-side uniform assignor).
	ServerSide bool `json:"server_side,omitempty"`
	// Commit is poll (default: commit after every poll that returned
	// records), none, auto (kgo autocommit every AutoCommitMillis), or
	// record (commit each record's offset+1, except SkipCommit offsets).
	Commit           string  `json:"commit,omitempty"`
	AutoCommitMillis int     `json:"auto_commit_ms,omitempty"`
	SkipCommit       []int64 `json:"skip_commit,omitempty"`
	// PollSleepMillis sleeps after each poll that returned records, as
	// slow processing would.
	PollSleepMillis int `json:"poll_sleep_ms,omitempty"`
	// BlockRebalance uses kgo.BlockRebalanceOnPoll: a rebalance waits
	// until the poll loop (and its sleep) is done with the records.
	BlockRebalance bool `json:"block_rebalance,omitempty"`
	// MaxPollRecords bounds each poll (default: unbounded).
	MaxPollRecords int `json:"max_poll_records,omitempty"`
	// ResetLatest starts a group without commits at the end (default:
	// the start).
	ResetLatest bool `json:"reset_latest,omitempty"`
	// Extra are more kgo options, OnRecords gets every poll's records
	// (in process only).
	Extra     []kgo.Opt           `json:"-"`
	OnRecords func([]*kgo.Record) `json:"-"`
}

func (a GMemberArgs) session() time.Duration {
	return time.Duration(cmpOr(a.SessionTimeoutMillis, 6000)) * time.Millisecond
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// opts returns the member's kgo options, instrumented by p.
func (a GMemberArgs) opts(p *probe) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.ClientID(a.ClientID),
		kgo.ConsumerGroup(a.Group),
		kgo.ConsumeTopics(a.Topics...),
		kgo.SessionTimeout(a.session()),
		kgo.HeartbeatInterval(time.Duration(cmpOr(a.HeartbeatMillis, 300)) * time.Millisecond),
		kgo.RebalanceTimeout(time.Duration(cmpOr(a.RebalanceTimeoutMillis, 10000)) * time.Millisecond),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithHooks(p),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.onAssigned(m) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if a.Commit == "" || a.Commit == "poll" {
				p.commitErr(cl.CommitUncommittedOffsets(ctx))
			}
			p.onRevoked(m)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.onRevoked(m) }),
	}
	opts = append(opts, a.Extra...)
	if a.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(a.InstanceID))
	}
	if a.BlockRebalance {
		opts = append(opts, kgo.BlockRebalanceOnPoll())
	}
	if a.ResetLatest {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	}
	switch a.Commit {
	case "", "poll", "none", "record":
		opts = append(opts, kgo.DisableAutoCommit())
	case "auto":
		opts = append(opts, kgo.AutoCommitInterval(time.Duration(cmpOr(a.AutoCommitMillis, 200))*time.Millisecond))
	default:
		return nil, fmt.Errorf("unknown commit mode %q", a.Commit)
	}
	if a.ServerSide {
		// kgo picks the server assignor from its first balancer's type
		// (sticky: uniform), so it must not be wrapped.
		return append(opts, kgo.ServerSideBalancer()), nil
	}
	names := a.Balancers
	if len(names) == 0 {
		names = []string{"cooperative-sticky"}
	}
	var bs []kgo.GroupBalancer
	for _, n := range names {
		switch n {
		case "cooperative-sticky":
			bs = append(bs, kgo.CooperativeStickyBalancer())
		case "sticky":
			bs = append(bs, kgo.StickyBalancer())
		case "range":
			bs = append(bs, kgo.RangeBalancer())
		case "roundrobin":
			bs = append(bs, kgo.RoundRobinBalancer())
		default:
			return nil, fmt.Errorf("unknown balancer %q", n)
		}
	}
	return append(opts, kgo.Balancers(p.balancers(bs...)...)), nil
}
