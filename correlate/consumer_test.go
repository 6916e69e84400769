package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cghInterval is the heartbeat interval cgh's answers ask for (0: none).
var cghInterval int32

// cgh is one KIP-848 heartbeat: request epoch and the answer.
func cgh(h *harness, at time.Duration, member string, epoch int32, respMember string, respEpoch int32, assign map[int32]bool, topics ...string) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 0, "g848", member, epoch
	req.SubscribedTopicNames = topics
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(respMember), respEpoch
	resp.HeartbeatIntervalMillis = cghInterval
	if assign != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID = ordersID
		for p := int32(0); p < 8; p++ {
			if assign[p] {
				at.Partitions = append(at.Partitions, p)
			}
		}
		a.Topics = append(a.Topics, at)
		resp.Assignment = &a
	}
	host := map[string]string{"": "10.0.0.1:5000", "m1": "10.0.0.1:5000", "m2": "10.0.0.2:5000"}[member]
	if member == "" {
		host = map[string]string{"m1": "10.0.0.1:5000", "m2": "10.0.0.2:5000"}[respMember]
	}
	h.ex(at, h.conn(host, "10.0.0.9:9092"), "c-"+respMember, req, resp)
}

// ordersPartitions answers a Metadata request with n partitions of orders.
func ordersPartitions(h *harness, at time.Duration, n int32) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	resp := kmsg.NewPtrMetadataResponse()
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr("orders"), ordersID
	for p := range n {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mt.Partitions = append(mt.Partitions, mp)
	}
	resp.Topics = append(resp.Topics, mt)
	h.ex(at, h.conn("10.0.0.1:5009", "10.0.0.8:9092"), "c-m1", req, resp)
}

func TestConsumerGroup848(t *testing.T) {
	h := newHarness(t, nil)
	metadataExchange(h, 0)
	ordersPartitions(h, 0, 2)
	cgh(h, 1*time.Second, "", 0, "m1", 1, map[int32]bool{0: true, 1: true}, "orders")
	cgh(h, 2*time.Second, "", 0, "m2", 2, map[int32]bool{}, "orders")
	cgh(h, 3*time.Second, "m1", 1, "m1", 2, map[int32]bool{0: true})
	cgh(h, 4*time.Second, "m2", 2, "m2", 2, map[int32]bool{1: true})
	cgh(h, 5*time.Second, "m2", -1, "m2", -1, nil)
	cgh(h, 6*time.Second, "m1", 2, "m1", 3, map[int32]bool{0: true, 1: true})

	wantMembers := []memberView{
		{MemberJoined, "m1", 1, "", "1s"},
		{MemberJoined, "m2", 2, "", "2s"},
		{MemberLeft, "m2", 2, "left (member epoch -1)", "5s"},
	}
	if d := diff(wantMembers, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	wantGens := []genView{
		{Gen: 1, Prev: -1, From: fromHeartbeat, Assigned: map[string]map[string][]int32{"m1": {"orders": {0, 1}}},
			Cause: Cause{Kind: CauseMemberJoined, Member: "m1"}, Complete: true, Started: "1s", Completed: "1.001s"},
		// m2 reached epoch 2 with nothing, and got partition 1 once m1
		// released it (m1 reached epoch 2 with partition 0 alone): the
		// epoch settled then.
		{Gen: 2, Prev: 1, From: fromHeartbeat, Assigned: map[string]map[string][]int32{"m1": {"orders": {0}}, "m2": {"orders": {1}}},
			Cause: Cause{Kind: CauseMemberJoined, Member: "m2"}, Complete: true, Started: "2s", Completed: "4.001s"},
		{Gen: 3, Prev: 2, From: fromHeartbeat, Assigned: map[string]map[string][]int32{"m1": {"orders": {0, 1}}},
			Cause: Cause{Kind: CauseMemberLeft, Member: "m2", Reason: "left (member epoch -1)"}, Complete: true, Started: "6s", Completed: "6.001s"},
	}
	if d := diff(wantGens, genViews(h.events("generation"))); d != "" {
		t.Errorf("generation events (-want +got):\n%s", d)
	}
	g := findGroup(h.c.Snapshot(), "g848")
	if g.GroupType != GroupConsumer || g.Generation != 3 || g.State != "stable" {
		t.Errorf("group = %s generation %d %s, want consumer generation 3 stable", g.GroupType, g.Generation, g.State)
	}
}

// TestConsumerGroup848Revocation: a member told to give up partitions
// stays at its epoch until it confirms; that shrink belongs to the next
// epoch, not to the one it is at. Without partition counts, an epoch is
// emitted only once a later one begins (or at the end): a member may still
// be waiting for released partitions.
func TestConsumerGroup848Revocation(t *testing.T) {
	h := newHarness(t, nil)
	metadataExchange(h, 0) // names orders, no partition counts
	cgh(h, 1*time.Second, "", 0, "m1", 1, map[int32]bool{0: true, 1: true}, "orders")
	cgh(h, 2*time.Second, "", 0, "m2", 2, map[int32]bool{}, "orders")
	cgh(h, 3*time.Second, "m1", 1, "m1", 1, map[int32]bool{0: true}) // revoke 1, still epoch 1
	cgh(h, 4*time.Second, "m1", 1, "m1", 2, nil)                     // confirmed: epoch 2, unchanged
	if n := len(h.events("generation")); n != 1 {
		t.Errorf("%d generation events before m2 got its partition, want 1 (epoch 1)", n)
	}
	cgh(h, 5*time.Second, "m2", 2, "m2", 2, map[int32]bool{1: true}) // released to m2
	h.c.Close(base.Add(6 * time.Second))
	gens := genViews(h.events("generation"))
	want := []map[string]map[string][]int32{
		{"m1": {"orders": {0, 1}}},
		{"m1": {"orders": {0}}, "m2": {"orders": {1}}},
	}
	if len(gens) != 2 {
		t.Fatalf("generations = %+v, want epochs 1 and 2", gens)
	}
	for i, g := range gens {
		if d := diff(want[i], g.Assigned); d != "" {
			t.Errorf("epoch %d assignments (-want +got):\n%s", g.Gen, d)
		}
	}
	if gens[1].Completed != "5.001s" {
		t.Errorf("epoch 2 completed %s, want 5.001s (when m2 got partition 1)", gens[1].Completed)
	}
	m1 := findGroup(h.c.Snapshot(), "g848").Members[0]
	if d := diff(map[string][]int32{"orders": {0}}, m1.Assignment); d != "" {
		t.Errorf("m1 owns (-want +got):\n%s", d)
	}
}

// TestConsumerLateAndFenced: a KIP-848 member silent for five of the
// heartbeat intervals the broker asked for, then accepted, is
// heartbeat_late; one silent for three and whose partitions a new epoch
// gives to another member was fenced: member_expired for its session
// timeout, the cause of that epoch (issue 15).
func TestConsumerLateAndFenced(t *testing.T) {
	cghInterval = 1000
	t.Cleanup(func() { cghInterval = 0 })
	h := newHarness(t, nil)
	metadataExchange(h, 0)
	ordersPartitions(h, 0, 2)
	cgh(h, 1*time.Second, "", 0, "m1", 1, map[int32]bool{0: true, 1: true}, "orders")
	cgh(h, 2*time.Second, "", 0, "m2", 2, map[int32]bool{}, "orders")
	cgh(h, 2500*ms, "m1", 1, "m1", 2, map[int32]bool{0: true})
	cgh(h, 3*time.Second, "m2", 2, "m2", 2, map[int32]bool{1: true})
	for s := 4; s <= 14; s++ {
		cgh(h, time.Duration(s)*time.Second, "m1", 2, "m1", 2, nil)
	}
	cgh(h, 4*time.Second, "m2", 2, "m2", 2, nil)
	cgh(h, 10*time.Second, "m2", 2, "m2", 2, nil) // 6s: late, not fenced
	cgh(h, 11*time.Second, "m2", 2, "m2", 2, nil) // then killed
	cgh(h, 15*time.Second, "m1", 2, "m1", 3, map[int32]bool{0: true, 1: true})
	h.close(30 * time.Second)
	type view struct {
		Kind, Severity, Member, Reason string
		Gen                            int32
		Gap                            int64
		Interval                       int32
	}
	var got []view
	for _, ev := range h.hazards(HazardHeartbeatLate, HazardMemberExpired) {
		got = append(got, view{ev.Kind, ev.Severity, ev.MemberID, ev.Reason, *ev.Generation, ev.HeartbeatGapMillis, ev.HeartbeatIntervalMillis})
	}
	want := []view{
		{HazardHeartbeatLate, SeverityWarn, "m2", "", 2, 6000, 1000},
		{HazardMemberExpired, SeverityWarn, "m2", "session_timeout", 2, 0, 0},
	}
	if d := diff(want, got); d != "" {
		t.Errorf("hazards (-want +got):\n%s", d)
	}
	for _, ev := range h.events("generation") {
		if g := ev.(*GenerationEvent); g.Generation == 3 && (g.Cause.Kind != CauseMemberExpired || g.Cause.Member != "m2") {
			t.Errorf("epoch 3 cause %+v, want m2 expired", g.Cause)
		}
	}
}
