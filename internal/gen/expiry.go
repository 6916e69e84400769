package gen

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file records, from the broker's side, when members leave a group
// and why: what the broker received from each member and when (a kfake
// Control function, run as kfake takes each request), the group's members
// as the broker holds them (kfake GroupInfo, polled), and kfake's own
// words when it fences a KIP-848 member (its log).

// brokerGroups holds the broker-side facts of one cluster.
type brokerGroups struct {
	mu      sync.Mutex
	last    map[string][]time.Time           // group/member -> when its Heartbeat, JoinGroup, SyncGroup, ConsumerGroupHeartbeat came
	join    map[string]kmsg.JoinGroupRequest // group/member -> its latest JoinGroup (timeouts)
	left    map[string]bool                  // group/member -> it sent LeaveGroup (KIP-848: epoch -1)
	fenced  []fenced                         // KIP-848 members kfake fenced, from its log
	removed map[string][]removal             // group -> members gone from the broker's member list
}

// fenced is one line of kfake's log about a KIP-848 member it fenced.
type fenced struct {
	group, member, reason string
	epoch                 int32
	at                    time.Time
}

// removal is a member that left the broker's member list.
type removal struct {
	MemberID, ClientID string
	// At is the first poll that no longer listed the member, Listed the
	// last one that did: the broker dropped it in between.
	At, Listed time.Time
	// Epoch and State are the group's at the last poll that listed the
	// member; Since is when the group entered that state.
	Epoch int32
	State string
	Since time.Time
}

func newBrokerGroups() *brokerGroups {
	return &brokerGroups{last: map[string][]time.Time{}, join: map[string]kmsg.JoinGroupRequest{}, left: map[string]bool{},
		removed: map[string][]removal{}}
}

// observe is called by the cluster's Control function for every request.
func (b *brokerGroups) observe(req kmsg.Request) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.HeartbeatRequest:
		b.heard(r.Group+"/"+r.MemberID, now)
	case *kmsg.SyncGroupRequest:
		b.heard(r.Group+"/"+r.MemberID, now)
	case *kmsg.JoinGroupRequest:
		if r.MemberID != "" {
			b.heard(r.Group+"/"+r.MemberID, now)
			b.join[r.Group+"/"+r.MemberID] = *r
		}
	case *kmsg.LeaveGroupRequest:
		b.left[r.Group+"/"+r.MemberID] = true
		for _, m := range r.Members {
			b.left[r.Group+"/"+m.MemberID] = true
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		b.heard(r.Group+"/"+r.MemberID, now)
		if r.MemberEpoch == -1 {
			b.left[r.Group+"/"+r.MemberID] = true
		}
	}
}

func (b *brokerGroups) heard(key string, t time.Time) { b.last[key] = append(b.last[key], t) }

// heardBefore is the last time the broker heard from key before t.
func (b *brokerGroups) heardBefore(key string, t time.Time) (time.Time, bool) {
	ts := b.last[key]
	i, _ := slices.BinarySearchFunc(ts, t, time.Time.Compare)
	if i == 0 {
		return time.Time{}, false
	}
	return ts[i-1], true
}

// kfake logs "consumerSessionTimeout: group=%s member=%s epoch=%d ..."
// and "consumerRebalanceTimeout: ..." when it fences a KIP-848 member.
var fenceLine = regexp.MustCompile(`^consumer(Session|Rebalance)Timeout: group=(\S+) member=(\S+) epoch=(-?\d+)`)

// Logf implements kfake.Logger: it keeps the lines about fenced members.
func (b *brokerGroups) Logf(level kfake.LogLevel, msg string, args ...any) {
	if level != kfake.LogLevelWarn || len(msg) < 9 || msg[:9] != "consumerS" && msg[:9] != "consumerR" {
		return
	}
	m := fenceLine.FindStringSubmatch(fmt.Sprintf(msg, args...))
	if m == nil {
		return
	}
	f := fenced{group: m[2], member: m[3], reason: ReasonSessionTimeout, at: time.Now()}
	if m[1] == "Rebalance" {
		f.reason = ReasonRebalanceTimeout
	}
	e, _ := strconv.Atoi(m[4])
	f.epoch = int32(e)
	b.mu.Lock()
	b.fenced = append(b.fenced, f)
	b.mu.Unlock()
}

// watchGroup polls the broker's view of group every 10ms until the
// cluster closes, recording every member that leaves its member list.
// kfake's group name is cut to 16 bytes in its log lines: keep group
// names of KIP-848 scenarios that short.
func (c *Cluster) watchGroup(group string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.OnClose(func() { cancel(); <-done })
	go func() {
		defer close(done)
		var prev *kfake.GroupInfo
		var since, listed time.Time // when prev's state and epoch began, when prev was polled
		for ctx.Err() == nil {
			gi := c.kf.GroupInfo(group)
			now := time.Now()
			if prev != nil {
				for _, m := range prev.Members {
					if gi == nil || !slices.ContainsFunc(gi.Members, func(n kfake.GroupMember) bool { return n.MemberID == m.MemberID }) {
						c.bgroups.mu.Lock()
						c.bgroups.removed[group] = append(c.bgroups.removed[group], removal{MemberID: m.MemberID, ClientID: m.ClientID,
							At: now, Listed: listed, Epoch: prev.Epoch, State: prev.State, Since: since})
						c.bgroups.mu.Unlock()
					}
				}
			}
			if gi != nil {
				if prev == nil || prev.State != gi.State || prev.Epoch != gi.Epoch {
					since = now
				}
				prev, listed = gi, now
			}
			sleepCtx(ctx, 10*time.Millisecond)
		}
	}()
}

// Expiry is a member the broker removed without a leave, and why.
type Expiry struct {
	MemberID, ClientID string
	// Generation is the member's last generation (KIP-848: its member
	// epoch as kfake fenced it).
	Generation int32
	Reason     string
	// At is when the broker dropped it (classic: the first poll that
	// no longer listed it; KIP-848: kfake's log line); SilentMillis how
	// long the broker had heard nothing from it by then (classic: by
	// the last poll that still listed it).
	At           time.Time
	SilentMillis int64
	// SessionTimeoutMillis and RebalanceTimeoutMillis are from its last
	// JoinGroup (classic only).
	SessionTimeoutMillis, RebalanceTimeoutMillis int32
}

// expiries returns the members the broker removed from group without a
// leave, with the reason from the broker's side: for KIP-848 groups
// kfake's log line; for classic groups the broker's silence (no request
// from the member for its session timeout: session_timeout) or else the
// rebalance the group was in when the member was dropped
// (rebalance_timeout: kfake drops members that did not rejoin when the
// rebalance timeout fires). Call it after the removals happened.
func (c *Cluster) expiries(group string) ([]Expiry, []string) {
	b := c.bgroups
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Expiry
	var notes []string
	for _, f := range b.fenced {
		if f.group != group[:min(16, len(group))] {
			continue
		}
		e := Expiry{MemberID: f.member, Generation: f.epoch, Reason: f.reason, At: f.at}
		if t, ok := b.heardBefore(group+"/"+f.member, f.at); ok {
			e.SilentMillis = f.at.Sub(t).Milliseconds()
		}
		for _, r := range b.removed[group] {
			if r.MemberID == f.member {
				e.ClientID = r.ClientID
			}
		}
		out = append(out, e)
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, r := range b.removed[group] {
		key := group + "/" + r.MemberID
		if b.left[key] {
			continue
		}
		j := b.join[key]
		e := Expiry{MemberID: r.MemberID, ClientID: r.ClientID, Generation: r.Epoch, At: r.At,
			SessionTimeoutMillis: j.SessionTimeoutMillis, RebalanceTimeoutMillis: j.RebalanceTimeoutMillis}
		if t, ok := b.heardBefore(key, r.Listed); ok {
			e.SilentMillis = r.Listed.Sub(t).Milliseconds()
		}
		switch {
		case j.SessionTimeoutMillis > 0 && e.SilentMillis >= int64(j.SessionTimeoutMillis)-100:
			e.Reason = ReasonSessionTimeout
		case r.State == "PreparingRebalance" || r.State == "CompletingRebalance":
			e.Reason = ReasonRebalanceTimeout
			notes = append(notes, fmt.Sprintf("group %s: the broker dropped %s (%s) at generation %d after %dms in %s, "+
				"having heard from it %dms before (session timeout %dms, rebalance timeout %dms)", group, r.MemberID, r.ClientID,
				r.Epoch, r.At.Sub(r.Since).Milliseconds(), r.State, e.SilentMillis, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis))
		default:
			notes = append(notes, fmt.Sprintf("group %s: %s left the broker's member list in state %s without a leave or a known reason", group, r.MemberID, r.State))
			continue
		}
		out = append(out, e)
	}
	return out, notes
}
