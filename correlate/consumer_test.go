package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cgh is one KIP-848 heartbeat: request epoch and the answer.
func cgh(h *harness, at time.Duration, member string, epoch int32, respMember string, respEpoch int32, assign map[int32]bool, topics ...string) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 0, "g848", member, epoch
	req.SubscribedTopicNames = topics
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.MemberID, resp.MemberEpoch = kmsg.StringPtr(respMember), respEpoch
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

func TestConsumerGroup848(t *testing.T) {
	h := newHarness(t, nil)
	metadataExchange(h, 0)
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
		{Gen: 2, Prev: 1, From: fromHeartbeat, Assigned: map[string]map[string][]int32{"m1": {"orders": {0}}, "m2": {}},
			Cause: Cause{Kind: CauseMemberJoined, Member: "m2"}, Complete: true, Started: "2s", Completed: "3.001s"},
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
