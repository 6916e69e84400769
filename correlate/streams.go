package correlate

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Streams groups (KIP-1071): a Kafka Streams application with
// group.protocol=streams joins and heartbeats with StreamsGroupHeartbeat
// (88), sending its topology (subtopologies and their source topics) when
// it joins, and the broker assigns it tasks: active tasks (it processes
// the task's partitions of its subtopology's source topics), standby tasks
// (it keeps a copy of the task's state) and warm-up tasks (standbys being
// caught up before the task moves). Members, member epochs, leaves and
// fencing are those of KIP-848 groups; StreamsGroupDescribe (89) is the
// broker's account, kept as DescribeGroups answers are. A Streams
// application on the classic protocol is a classic group (protocol
// "stream", consumer protocol type): its assignments decode as the
// consumer protocol, Streams' own user data in them aside.

// GroupStreams is the type of a streams group (GenerationEvent.GroupType),
// as ListGroups gives it.
const GroupStreams = "streams"

// streamsProtocol is a streams group's protocol type, as ListGroups and
// StreamsGroupDescribe give it.
const streamsProtocol = "streams"

// StreamsTasks are a streams group member's tasks: subtopology id ->
// sorted partitions, by kind.
type StreamsTasks struct {
	Active  map[string][]int32 `json:"active"`
	Standby map[string][]int32 `json:"standby,omitempty"`
	Warmup  map[string][]int32 `json:"warmup,omitempty"`
}

// clone copies t (nil stays nil).
func (t *StreamsTasks) clone() *StreamsTasks {
	if t == nil {
		return nil
	}
	return &StreamsTasks{Active: cloneTasks(t.Active), Standby: cloneTasks(t.Standby), Warmup: cloneTasks(t.Warmup)}
}

func cloneTasks(m map[string][]int32) map[string][]int32 {
	if m == nil {
		return nil
	}
	out := make(map[string][]int32, len(m))
	for id, ps := range m {
		out[id] = slices.Clone(ps)
	}
	return out
}

// covers reports whether t holds every task of o, each of the same kind
// (nil holds none).
func (t *StreamsTasks) covers(o *StreamsTasks) bool {
	if o == nil {
		return true
	}
	if t == nil {
		t = &StreamsTasks{}
	}
	return covers(t.Active, o.Active) && covers(t.Standby, o.Standby) && covers(t.Warmup, o.Warmup)
}

// streamsState is what a streams group's heartbeats and describes said
// beyond its members: its topology and the statuses the broker gave.
type streamsState struct {
	topologyEpoch int32
	// subtopologies maps a subtopology id to its source topics (input and
	// repartition topics).
	subtopologies map[string][]string
	// statuses counts the heartbeat answers' statuses by name
	// (MISSING_INTERNAL_TOPICS...).
	statuses map[string]int64
}

// StreamsSummary is a streams group's topology and the statuses its
// heartbeats were answered with (KIP-1071).
type StreamsSummary struct {
	TopologyEpoch int32 `json:"topology_epoch"`
	// Subtopologies maps each subtopology id to its source topics.
	Subtopologies map[string][]string `json:"subtopologies"`
	// Statuses counts heartbeat answers by status (STALE_TOPOLOGY,
	// MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS,
	// MISSING_INTERNAL_TOPICS, SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED).
	Statuses map[string]int64 `json:"statuses,omitempty"`
}

// summary copies s for a Snapshot.
func (s *streamsState) summary() *StreamsSummary {
	if s == nil {
		return nil
	}
	out := &StreamsSummary{TopologyEpoch: s.topologyEpoch, Subtopologies: map[string][]string{}}
	for id, ts := range s.subtopologies {
		out.Subtopologies[id] = slices.Clone(ts)
	}
	if len(s.statuses) > 0 {
		out.Statuses = maps.Clone(s.statuses)
	}
	return out
}

// topology records a joining member's topology.
func (s *streamsState) topology(t *kmsg.StreamsGroupHeartbeatRequestTopology) {
	subs := make(map[string][]string, len(t.Subtopologies))
	for _, st := range t.Subtopologies {
		subs[st.SubtopologyID] = subtopologySources(st.SourceTopics, st.RepartitionSourceTopics)
	}
	s.setTopology(t.Epoch, subs)
}

// subtopologySources is a subtopology's source topics: its input topics
// and the repartition topics it reads.
func subtopologySources(src []string, repartition []kmsg.TopicInfo) []string {
	out := slices.Clone(src)
	for _, r := range repartition {
		out = append(out, r.Topic)
	}
	return out
}

// setTopology keeps topology epoch's subtopologies, unless a newer epoch's
// are known.
func (s *streamsState) setTopology(epoch int32, subs map[string][]string) {
	if len(s.subtopologies) > 0 && epoch < s.topologyEpoch {
		return
	}
	s.topologyEpoch = epoch
	s.subtopologies = make(map[string][]string, len(subs))
	for id, src := range subs {
		src = slices.Clone(src)
		slices.Sort(src)
		s.subtopologies[id] = slices.Compact(src)
	}
}

// partitions turns active tasks into the partitions they process: a task
// (subtopology, partition p) processes partition p of each source topic of
// the subtopology. A subtopology not in the known topology gives none.
func (s *streamsState) partitions(active map[string][]int32) []assignedTopic {
	byTopic := map[string][]int32{}
	for _, id := range sortedKeys(active) {
		for _, t := range s.subtopologies[id] {
			byTopic[t] = append(byTopic[t], active[id]...)
		}
	}
	out := make([]assignedTopic, 0, len(byTopic))
	for _, t := range sortedKeys(byTopic) {
		out = append(out, assignedTopic{name: t, partitions: byTopic[t]})
	}
	return out
}

// Text tells the tasks as Kafka Streams names them (<subtopology>_<partition>):
// "active 0_0 0_1, standby 0_2"; "" for nil, "no tasks" for none.
func (t *StreamsTasks) Text() string {
	if t == nil {
		return ""
	}
	var parts []string
	for _, k := range []struct {
		name  string
		tasks map[string][]int32
	}{{"active", t.Active}, {"standby", t.Standby}, {"warmup", t.Warmup}} {
		var ids []string
		for _, sub := range sortedKeys(k.tasks) {
			for _, p := range k.tasks[sub] {
				ids = append(ids, sub+"_"+strconv.Itoa(int(p)))
			}
		}
		if len(ids) > 0 {
			parts = append(parts, k.name+" "+strings.Join(ids, " "))
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, ", ")
}

// MemberAssignmentText is AssignmentText of a member's assignment, its
// tasks after it for a streams group member: "t[0,1] (tasks active 0_0 0_1)".
func MemberAssignmentText(a map[string][]int32, t *StreamsTasks) string {
	if t == nil {
		return AssignmentText(a)
	}
	return AssignmentText(a) + " (tasks " + t.Text() + ")"
}
