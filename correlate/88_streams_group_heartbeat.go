package correlate

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// streamsGroupHeartbeat handles StreamsGroupHeartbeat (key 88, KIP-1071):
// a Kafka Streams application's group on the streams protocol. As in
// KIP-848 groups, member epoch 0 joins (with the application's topology),
// -1 leaves, -2 leaves as a static member, any other epoch heartbeats, and
// the member epoch stands for the generation. The broker assigns tasks, not
// partitions: active, standby and warm-up tasks, each a subtopology id and
// partitions. A member's partitions are its active tasks' partitions of
// their subtopologies' source topics (the topology of its join), what its
// main consumer fetches and commits.
func (c *Correlator) streamsGroupHeartbeat(e *decode.Exchange, req *kmsg.StreamsGroupHeartbeatRequest) {
	g := c.streamsGroupOf(req.Group)
	if g == nil {
		return
	}
	resp, _ := e.Resp.(*kmsg.StreamsGroupHeartbeatResponse)
	id := req.MemberID
	if resp != nil && resp.MemberID != "" {
		id = resp.MemberID
	}
	if req.Topology != nil {
		g.streams.topology(req.Topology)
	}
	var code int16
	if resp != nil {
		code = resp.ErrorCode
	}
	c.epochHeartbeat(g, e, "StreamsGroupHeartbeat", id, req.MemberEpoch, resp != nil, code,
		func(m *memberState, note string) { c.consumerLeave(g, m, req.MemberEpoch, e.ReqTime, note) },
		func() { c.streamsBeat(g, e, req, resp, id) })
	c.bind(e, g.name, id, req.InstanceID)
}

// streamsBeat handles an accepted streams group heartbeat or join, as
// consumerBeat does a KIP-848 one: the tasks answered (nil: unchanged)
// are the member's from then on, and its active tasks' source partitions
// its assignment.
func (c *Correlator) streamsBeat(g *groupState, e *decode.Exchange, req *kmsg.StreamsGroupHeartbeatRequest, resp *kmsg.StreamsGroupHeartbeatResponse, id string) {
	m := c.member(g, id, e)
	if m == nil {
		return
	}
	join := req.MemberEpoch == 0
	if join && m.status != statusLive {
		m.status, m.goneAt, m.goneReason, m.announced = statusLive, time.Time{}, "", false // a fenced member rejoining
	}
	m.consumer = true
	if req.InstanceID != nil {
		m.instanceID = strPtr(req.InstanceID)
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceMillis = req.RebalanceTimeoutMillis
	}
	var subscribed []string
	if req.Topology != nil {
		subscribed = g.streams.sources()
	}
	sent := resp.ActiveTasks != nil || resp.StandbyTasks != nil || resp.WarmupTasks != nil
	var assigned []assignedTopic
	if sent {
		m.tasks = &StreamsTasks{Active: taskMap(resp.ActiveTasks), Standby: taskMap(resp.StandbyTasks), Warmup: taskMap(resp.WarmupTasks)}
		assigned = g.streams.partitions(m.tasks.Active)
	}
	c.streamsStatuses(g, resp, e.ReqTime.UTC())
	c.heartbeatBeat(g, m, e, join, resp.HeartbeatIntervalMillis, resp.MemberEpoch, subscribed, sent, assigned)
}

// streamsStatuses counts the statuses of an accepted heartbeat's answer,
// and notes them on the epoch it answered (before the epoch may be
// emitted).
func (c *Correlator) streamsStatuses(g *groupState, resp *kmsg.StreamsGroupHeartbeatResponse, at time.Time) {
	if len(resp.Status) == 0 {
		return
	}
	gen := c.generationFor(g, resp.MemberEpoch, at)
	for _, st := range resp.Status {
		name := streamsStatusName(st.StatusCode)
		g.streams.statuses[name]++
		if gen != nil && !slices.Contains(gen.statuses, name) {
			gen.statuses = append(gen.statuses, name)
		}
	}
}

// streamsGroupOf returns group name as a streams group: nil for an empty
// name, when the group cap bites, or when the group is known as another
// type.
func (c *Correlator) streamsGroupOf(name string) *groupState {
	if name == "" {
		return nil
	}
	g := c.group(name)
	if g == nil {
		return nil
	}
	g.setType(GroupStreams)
	if g.typ != GroupStreams {
		return nil
	}
	g.protocolType = streamsProtocol
	if g.streams == nil {
		g.streams = &streamsState{subtopologies: map[string][]string{}, statuses: map[string]int64{}}
	}
	return g
}

// taskMap reads a heartbeat's tasks: subtopology id -> sorted partitions.
func taskMap(ts []kmsg.TaskIDs) map[string][]int32 {
	out := make(map[string][]int32, len(ts))
	for _, t := range ts {
		out[t.SubtopologyID] = append(out[t.SubtopologyID], t.Partitions...)
	}
	return sortedAssignment(out)
}

// streamsStatusName names a StreamsGroupHeartbeat status code (KIP-1071).
func streamsStatusName(code int8) string {
	names := [...]string{"STALE_TOPOLOGY", "MISSING_SOURCE_TOPICS", "INCORRECTLY_PARTITIONED_TOPICS",
		"MISSING_INTERNAL_TOPICS", "SHUTDOWN_APPLICATION", "ASSIGNMENT_DELAYED"}
	if code >= 0 && int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("STATUS_%d", code)
}

// sources returns the topology's source topics, sorted.
func (s *streamsState) sources() []string {
	var out []string
	for _, ts := range s.subtopologies {
		out = append(out, ts...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
