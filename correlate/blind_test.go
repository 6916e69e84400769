package correlate

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// mention sends, from a hostile client, one kind of request that names
// groups without making any of them real: the broker answers, but no
// member joins, no generation forms, no commit is taken.
type mention func(h *harness, at time.Duration, names []string)

// mentions are the requests a client can name any group in.
var mentions = []struct {
	name string
	send mention
}{
	{"find_coordinator", func(h *harness, at time.Duration, names []string) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = 4, names
		resp := kmsg.NewPtrFindCoordinatorResponse()
		for _, n := range names {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.NodeID, co.Host, co.Port = n, 1, "10.0.0.9", 9092
			resp.Coordinators = append(resp.Coordinators, co)
		}
		h.ex(at, hostileConn(h), "hostile", req, resp)
	}},
	{"describe_groups", func(h *harness, at time.Duration, names []string) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = 5, names
		resp := kmsg.NewPtrDescribeGroupsResponse()
		for _, n := range names {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.State = n, "Dead" // Kafka's answer for a group it does not have
			resp.Groups = append(resp.Groups, g)
		}
		h.ex(at, hostileConn(h), "hostile", req, resp)
	}},
	{"list_groups", func(h *harness, at time.Duration, names []string) {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		resp := kmsg.NewPtrListGroupsResponse()
		for _, n := range names {
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState = n, "consumer", "Empty"
			resp.Groups = append(resp.Groups, g)
		}
		h.ex(at, hostileConn(h), "hostile", req, resp)
	}},
	{"offset_fetch", func(h *harness, at time.Duration, names []string) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		resp := kmsg.NewPtrOffsetFetchResponse()
		for _, n := range names {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = n
			req.Groups = append(req.Groups, rg)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = n // no offsets: the broker has none for it
			resp.Groups = append(resp.Groups, g)
		}
		h.ex(at, hostileConn(h), "hostile", req, resp)
	}},
	{"offset_fetch_with_offsets", func(h *harness, at time.Duration, names []string) {
		// The broker keeps offsets of idle groups, and answers anyone
		// who asks: a name with offsets is no group seen either.
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		resp := kmsg.NewPtrOffsetFetchResponse()
		for _, n := range names {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = n
			req.Groups = append(req.Groups, rg)
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = n
			gt := kmsg.NewOffsetFetchResponseGroupTopic()
			gt.Topic = "idle"
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset = 0, 5
			gt.Partitions = append(gt.Partitions, gp)
			g.Topics = append(g.Topics, gt)
			resp.Groups = append(resp.Groups, g)
		}
		h.ex(at, hostileConn(h), "hostile", req, resp)
	}},
	{"rejected_commit", func(h *harness, at time.Duration, names []string) {
		for i, n := range names {
			req := commitReq(n, "nobody", 7, "junk", map[int32]int64{0: 1, 1: 2})
			h.ex(at+time.Duration(i)*time.Microsecond, hostileConn(h), "hostile", req, commitResp(req, kerr.UnknownMemberID.Code))
		}
	}},
}

func hostileConn(h *harness) *capture.Conn { return h.conn("10.0.0.66:6666", "10.0.0.9:9092") }

func junkNames(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("junk-%05d", from+i)
	}
	return out
}

// realGroup forms group g at at: two members join generation 1 and
// commit.
func realGroup(h *harness, at time.Duration, g string) {
	stableGroup(h, at, g, 1, map[string]tps{g + "-a": {"t": {0}}, g + "-b": {"t": {1}}})
	req := commitReq(g, g+"-a", 1, "t", map[int32]int64{0: 42})
	h.ex(at+50*ms, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "c-"+g+"-a", req, commitResp(req, 0))
}

// TestMentionsDoNotBlind: a hostile client names more groups than the
// table holds (MaxGroups 20), once before and once after a real group
// forms. The group there before it and the one forming after it are
// both followed to the end: members, generation, committed offset and
// events. Names merely mentioned make room for each other and for real
// groups, least recently mentioned first (groups_evicted); the table and
// the hostile client's bindings stay within the cap.
func TestMentionsDoNotBlind(t *testing.T) {
	for _, m := range mentions {
		t.Run(m.name, func(t *testing.T) {
			h := newHarness(t, &Options{MaxGroups: 20})
			realGroup(h, 0, "early")
			m.send(h, time.Second, junkNames(0, 30))
			realGroup(h, 2*time.Second, "late")
			m.send(h, 3*time.Second, junkNames(30, 30))
			if err := h.c.checkGroupTable(); err != nil {
				t.Error(err)
			}
			if cs := h.c.clients[clientKey{"10.0.0.66", "hostile"}]; cs != nil && len(cs.bindings) > 20 {
				t.Errorf("the hostile client keeps %d bindings; want at most 20", len(cs.bindings))
			}
			s := h.c.Snapshot()
			for _, name := range []string{"early", "late"} {
				g := findGroup(s, name)
				if g == nil {
					t.Errorf("group %q not in the snapshot (limits %+v)", name, s.Stats.Limits)
					continue
				}
				p := findPartition(s, name, "t", 0)
				if live := liveMembers(g); g.Generation != 1 || live != 2 || p == nil || p.Committed == nil || *p.Committed != 42 {
					t.Errorf("group %q: generation %d, %d live members, partition t/0 %+v; want 1, 2, committed 42", name, g.Generation, live, p)
				}
				if n := countGenerations(h, name); n != 1 {
					t.Errorf("group %q: %d generation events; want 1", name, n)
				}
			}
			if l := s.Stats.Limits; l.GroupsDropped != 0 || l.GroupsEvicted == 0 {
				t.Errorf("limits %+v; want groups evicted, none dropped", l)
			}
		})
	}
}

// TestMentionsEvictNoRealGroup: a table full of real groups (MaxGroups
// 5) loses none of them to names mentioned: those are dropped, and
// counted.
func TestMentionsEvictNoRealGroup(t *testing.T) {
	for _, m := range mentions {
		t.Run(m.name, func(t *testing.T) {
			h := newHarness(t, &Options{MaxGroups: 5})
			var real []string
			for i := range 5 {
				real = append(real, fmt.Sprintf("real-%d", i))
				realGroup(h, time.Duration(i)*time.Second, real[i])
			}
			m.send(h, 10*time.Second, junkNames(0, 30))
			s := h.c.Snapshot()
			var got []string
			for _, g := range s.Groups {
				if g.Generation == 1 && liveMembers(&g) == 2 {
					got = append(got, g.Group)
				}
			}
			if d := diff(real, got); d != "" {
				t.Errorf("groups with their members (-want +got):\n%s", d)
			}
			if l := s.Stats.Limits; l.GroupsDropped == 0 || l.GroupsEvicted != 0 {
				t.Errorf("limits %+v; want groups dropped, none evicted", l)
			}
		})
	}
}

func liveMembers(g *Group) int {
	n := 0
	for _, m := range g.Members {
		if m.Status == "live" {
			n++
		}
	}
	return n
}

func countGenerations(h *harness, group string) int {
	n := 0
	for _, ev := range h.events("generation") {
		if ev.(*GenerationEvent).Group == group {
			n++
		}
	}
	return n
}

// TestLoosePartitionsBounded: the partitions of groups only named are
// anyone's to name too (a commit the broker refuses). Together they get
// MaxPartitionsPerGroup (50): two refused commits of 40 made-up
// partitions each keep 50, hazard bookkeeping included; a real group's
// partitions do not count against them.
func TestLoosePartitionsBounded(t *testing.T) {
	h := newHarness(t, &Options{MaxPartitionsPerGroup: 50})
	offs := map[int32]int64{}
	for p := range int32(40) {
		offs[p] = 7
	}
	for i, g := range []string{"junk-a", "junk-b"} {
		req := commitReq(g, "nobody", 7, "junk", offs)
		h.ex(time.Duration(i)*ms, hostileConn(h), "hostile", req, commitResp(req, kerr.UnknownMemberID.Code))
	}
	realGroup(h, time.Second, "late")
	if err := h.c.checkGroupTable(); err != nil {
		t.Error(err)
	}
	h.close(time.Minute)
	s := h.c.Snapshot()
	got := map[string]int{}
	for _, g := range s.Groups {
		got[g.Group] = len(g.Partitions)
	}
	want := map[string]int{"junk-a": 40, "junk-b": 10, "late": 1}
	if d := diff(want, got); d != "" {
		t.Errorf("partitions per group (-want +got):\n%s", d)
	}
	if n := len(h.c.hazards.parts["junk-b"]); n > 10 {
		t.Errorf("hazard bookkeeping of %d partitions of junk-b; want at most 10", n)
	}
	if d := s.Stats.Limits.PartitionsDropped; d != 30 {
		t.Errorf("partitions dropped %d, want 30", d)
	}
	if p := findPartition(s, "late", "t", 0); p == nil || p.Committed == nil || *p.Committed != 42 {
		t.Errorf("late t/0 = %+v, want committed 42", p)
	}
}

// checkGroupTable checks the group table's bounds and books: at most
// MaxGroups groups; the loose ones exactly those not anchored, their
// partitions counted right; a client bound to a loose group is in its
// boundBy (or forgetting the group would leave the binding behind).
func (c *Correlator) checkGroupTable() error {
	if len(c.groups) > c.opts.MaxGroups {
		return fmt.Errorf("%d groups, cap %d", len(c.groups), c.opts.MaxGroups)
	}
	parts := 0
	for name, g := range c.groups {
		if _, loose := c.loose[name]; loose == g.anchored {
			return fmt.Errorf("group %q: anchored %v, in loose %v", name, g.anchored, loose)
		}
		if !g.anchored {
			parts += len(g.parts)
		}
	}
	if len(c.loose) > len(c.groups) || parts != c.loosePartitions {
		return fmt.Errorf("%d loose of %d groups; %d loose partitions, counted %d", len(c.loose), len(c.groups), parts, c.loosePartitions)
	}
	for k, cs := range c.clients {
		for name := range cs.bindings {
			if g := c.groups[name]; g != nil && !g.anchored {
				if _, ok := g.boundBy[k]; !ok {
					return fmt.Errorf("client %v bound to loose group %q, not in its boundBy", k, name)
				}
			}
		}
	}
	return nil
}

// TestTxnNamesDoNotEvictProducers: a FindCoordinator for transactional
// ids (key type 1) names 1,200 made-up ids, past MaxClients (100), after
// a transactional producer began. The names are forgotten first, the
// producer's id stays, and the names past the cap are forgotten a tenth
// of the cap at a time (one at a time, each forgetting sorted every id:
// 12,000 names past a cap of 10,000 took 24 s).
func TestTxnNamesDoNotEvictProducers(t *testing.T) {
	h := newHarness(t, &Options{MaxClients: 100})
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.TransactionalID, init.TransactionTimeoutMillis = 4, kmsg.StringPtr("real-txn"), 60000
	initResp := kmsg.NewPtrInitProducerIDResponse()
	initResp.ProducerID, initResp.ProducerEpoch = 7, 0
	h.ex(0, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "producer", init, initResp)

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorType = 4, 1
	resp := kmsg.NewPtrFindCoordinatorResponse()
	for _, n := range junkNames(0, 1200) {
		req.CoordinatorKeys = append(req.CoordinatorKeys, n)
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Host, co.Port = n, 1, "10.0.0.9", 9092
		resp.Coordinators = append(resp.Coordinators, co)
	}
	h.ex(time.Second, hostileConn(h), "hostile", req, resp)

	s := h.c.Snapshot()
	var real *Transaction
	for i := range s.Transactions {
		if s.Transactions[i].TransactionalID == "real-txn" {
			real = &s.Transactions[i]
		}
	}
	if real == nil || real.ProducerID != 7 {
		t.Errorf("real-txn = %+v, want producer id 7", real)
	}
	// 1,201 ids: at 100, 11 forgotten (fewer than 90 left), then 11
	// more every 11 names.
	if n, ev := len(h.c.txns), s.Stats.Limits.TxnsEvicted; n > 100 || ev != 1111 {
		t.Errorf("%d transactional ids kept, %d forgotten; want at most 100, 1111", n, ev)
	}
}
