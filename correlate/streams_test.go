package correlate

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tasks builds a heartbeat's or describe's task list: subtopology id ->
// partitions.
func tasks(m map[string][]int32) []kmsg.TaskIDs {
	var out []kmsg.TaskIDs
	for _, id := range sortedKeys(m) {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = id, m[id]
		out = append(out, t)
	}
	return out
}

// sgh is one streams group heartbeat of app (KIP-1071): the request's
// epoch (0 sends the topology: subtopology 0 reads orders, 1 reads the
// repartition topic app-rep) and the answer: epoch, error, status, and
// the tasks (nil active: unchanged).
func sgh(h *harness, at time.Duration, member string, epoch, respEpoch int32, code int16, active, standby map[string][]int32, status ...int8) {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "app", member, epoch
	if epoch == 0 {
		topo := kmsg.NewStreamsGroupHeartbeatRequestTopology()
		s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		s0.SubtopologyID, s0.SourceTopics, s0.RepartitionSinkTopics = "0", []string{"orders"}, []string{"app-rep"}
		s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
		rep := kmsg.NewTopicInfo()
		rep.Topic = "app-rep"
		s1.SubtopologyID, s1.RepartitionSourceTopics = "1", []kmsg.TopicInfo{rep}
		topo.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
		req.Topology = &topo
	}
	resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
	resp.ErrorCode, resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = code, member, respEpoch, 5000
	if active != nil {
		resp.ActiveTasks, resp.StandbyTasks, resp.WarmupTasks = tasks(active), tasks(standby), []kmsg.TaskIDs{}
	}
	for _, s := range status {
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode = s
		resp.Status = append(resp.Status, st)
	}
	host := map[string]string{"m1": "10.0.0.1:5000", "m2": "10.0.0.2:5000"}[member]
	h.ex(at, h.conn(host, "10.0.0.9:9092"), member+"-StreamThread-1-consumer", req, resp)
}

// TestStreamsGroup: a streams group's epochs hold each member's tasks once
// it had them all (m2's active task 0_1 came at epoch 2 after m1 gave it
// up), its partitions are its active tasks' source partitions (subtopology
// 1 reads the repartition topic), statuses are noted on the epoch they
// answered, a fenced member is removed with the error named, and a static
// member leaving with epoch -2 left.
func TestStreamsGroup(t *testing.T) {
	h := newHarness(t, nil)
	all := map[string][]int32{"0": {0, 1}, "1": {0, 1}}
	sgh(h, 1*time.Second, "m1", 0, 1, 0, map[string][]int32{}, nil, 3) // MISSING_INTERNAL_TOPICS
	sgh(h, 2*time.Second, "m1", 1, 2, 0, all, nil)
	sgh(h, 3*time.Second, "m2", 0, 3, 0, map[string][]int32{"1": {1}}, map[string][]int32{"0": {0}})
	sgh(h, 4*time.Second, "m1", 2, 2, 0, map[string][]int32{"0": {0}, "1": {0}}, map[string][]int32{"1": {1}}) // revoking 0_1, 1_1
	sgh(h, 5*time.Second, "m1", 2, 3, 0, nil, nil)
	sgh(h, 6*time.Second, "m2", 3, 3, 0, map[string][]int32{"0": {1}, "1": {1}}, map[string][]int32{"0": {0}})
	sgh(h, 7*time.Second, "m1", 3, 3, kerr.FencedMemberEpoch.Code, nil, nil)
	sgh(h, 8*time.Second, "m2", -2, -2, 0, nil, nil)
	h.close(9 * time.Second)

	type gview struct {
		Gen      int32
		Tasks    map[string]string
		Parts    map[string]string
		Statuses []string
	}
	var got []gview
	g := findGroup(h.c.Snapshot(), "app")
	for _, e := range g.Generations { // at the end: later answers of an epoch count
		v := gview{Gen: e.Generation, Tasks: map[string]string{}, Parts: map[string]string{}, Statuses: e.StreamsStatuses}
		for _, m := range e.Members {
			v.Tasks[m.MemberID] = m.Tasks.Text()
			v.Parts[m.MemberID] = AssignmentText(m.Assignment)
		}
		got = append(got, v)
	}
	want := []gview{
		{Gen: 1, Tasks: map[string]string{"m1": "no tasks"}, Parts: map[string]string{"m1": "(none)"},
			Statuses: []string{"MISSING_INTERNAL_TOPICS"}},
		{Gen: 2, Tasks: map[string]string{"m1": "active 0_0 0_1 1_0 1_1"}, Parts: map[string]string{"m1": "app-rep[0,1] orders[0,1]"}},
		{Gen: 3, Tasks: map[string]string{"m1": "active 0_0 1_0, standby 1_1", "m2": "active 0_1 1_1, standby 0_0"},
			Parts: map[string]string{"m1": "app-rep[0] orders[0]", "m2": "app-rep[1] orders[1]"}},
	}
	if d := diff(want, got); d != "" {
		t.Errorf("generations (-want +got):\n%s", d)
	}
	wantMembers := []memberView{
		{MemberJoined, "m1", 1, "", "1s"},
		{MemberJoined, "m2", 3, "", "3s"},
		{MemberExpired, "m1", 3, "StreamsGroupHeartbeat answered FENCED_MEMBER_EPOCH", "7.001s"},
		{MemberLeft, "m2", 3, "static member left, expecting to return (member epoch -2)", "8s"},
	}
	if d := diff(wantMembers, memberViews(h.events("member"))); d != "" {
		t.Errorf("member events (-want +got):\n%s", d)
	}
	wantSummary := &StreamsSummary{Subtopologies: map[string][]string{"0": {"orders"}, "1": {"app-rep"}},
		Statuses: map[string]int64{"MISSING_INTERNAL_TOPICS": 1}}
	if d := diff(wantSummary, g.Streams); d != "" {
		t.Errorf("streams summary (-want +got):\n%s", d)
	}
	if g.GroupType != GroupStreams || g.ProtocolType != streamsProtocol || g.Errors["StreamsGroupHeartbeat:FENCED_MEMBER_EPOCH"] != 1 {
		t.Errorf("group %s/%s errors %v, want streams/streams with one FENCED_MEMBER_EPOCH", g.GroupType, g.ProtocolType, g.Errors)
	}
}

// TestStreamsGroupDescribe: a StreamsGroupDescribe answer is kept as the
// group's described, its topology standing in for a join not seen.
func TestStreamsGroupDescribe(t *testing.T) {
	h := newHarness(t, nil)
	req := kmsg.NewPtrStreamsGroupDescribeRequest()
	req.Groups = []string{"app"}
	resp := kmsg.NewPtrStreamsGroupDescribeResponse()
	rg := kmsg.NewStreamsGroupDescribeResponseGroup()
	rg.Group, rg.State, rg.Epoch, rg.AssignmentEpoch = "app", "Stable", 7, 7
	topo := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
	st := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
	st.SubtopologyID, st.SourceTopics = "0", []string{"orders"}
	topo.Subtopologies = append(topo.Subtopologies, st)
	rg.Topology = &topo
	rm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
	rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = "m1", 7, "a-StreamThread-1-consumer", "/10.0.0.1"
	rm.Assignment.ActiveTasks = tasks(map[string][]int32{"0": {2, 0}})
	rm.Assignment.StandbyTasks = tasks(map[string][]int32{"0": {1}})
	rg.Members = append(rg.Members, rm)
	resp.Groups = append(resp.Groups, rg)
	h.ex(time.Second, h.conn("10.0.0.5:5000", "10.0.0.9:9092"), "admin", req, resp)

	g := findGroup(h.c.Snapshot(), "app")
	want := []DescribedMember{{MemberID: "m1", ClientID: "a-StreamThread-1-consumer", ClientHost: "10.0.0.1",
		Assignment: map[string][]int32{"orders": {0, 2}}, MemberEpoch: i32p(7),
		Tasks: &StreamsTasks{Active: map[string][]int32{"0": {0, 2}}, Standby: map[string][]int32{"0": {1}}, Warmup: map[string][]int32{}}}}
	if g == nil || g.Described == nil || *g.Described.GroupEpoch != 7 || g.Described.State != "Stable" {
		t.Fatalf("described = %+v, want state Stable, group epoch 7", g)
	}
	if d := diff(want, g.Described.Members); d != "" {
		t.Errorf("described members (-want +got):\n%s", d)
	}
}
