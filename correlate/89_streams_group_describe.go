package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// streamsGroupDescribe handles StreamsGroupDescribe (key 89, KIP-1071) as
// describeGroups does DescribeGroups: the broker's view of each streams
// group is kept (Group.Described: state, group and assignment epochs,
// members with their epochs and tasks), and it fills in the client id and
// host of members whose own requests were not seen. Its topology stands
// in for the one a member sends when it joins, when no join was seen.
func (c *Correlator) streamsGroupDescribe(e *decode.Exchange) {
	resp, _ := e.Resp.(*kmsg.StreamsGroupDescribeResponse)
	if resp == nil {
		return
	}
	for _, rg := range resp.Groups {
		if rg.ErrorCode != 0 {
			continue
		}
		g := c.streamsGroupOf(rg.Group)
		if g == nil {
			continue
		}
		if t := rg.Topology; t != nil && (len(g.streams.subtopologies) == 0 || t.Epoch > g.streams.topologyEpoch) {
			subs := make(map[string][]string, len(t.Subtopologies))
			for _, st := range t.Subtopologies {
				subs[st.SubtopologyID] = subtopologySources(st.SourceTopics, st.RepartitionSourceTopics)
			}
			g.streams.setTopology(t.Epoch, subs)
		}
		d := &Described{TS: TimeOf(e.RespTime), TSMillis: e.RespTime.UnixMilli(), State: rg.State, ProtocolType: streamsProtocol,
			GroupEpoch: i32p(rg.Epoch), AssignmentEpoch: i32p(rg.AssignmentEpoch)}
		for _, rm := range rg.Members {
			tasks := &StreamsTasks{Active: taskMap(rm.Assignment.ActiveTasks), Standby: taskMap(rm.Assignment.StandbyTasks),
				Warmup: taskMap(rm.Assignment.WarmupTasks)}
			dm := DescribedMember{MemberID: rm.MemberID, InstanceID: strPtr(rm.InstanceID), ClientID: rm.ClientID,
				ClientHost: clientHost(rm.ClientHost), MemberEpoch: i32p(rm.MemberEpoch), Tasks: tasks,
				Assignment: map[string][]int32{}}
			for _, t := range g.streams.partitions(tasks.Active) {
				dm.Assignment[t.name] = append(dm.Assignment[t.name], t.partitions...)
			}
			dm.Assignment = sortedAssignment(dm.Assignment)
			c.describedMember(g, dm)
			d.Members = append(d.Members, dm)
		}
		g.described = d
	}
}
