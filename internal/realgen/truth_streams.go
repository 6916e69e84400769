package realgen

import (
	"encoding/json"
	"fmt"
	"slices"
)

// StreamsGroupTruth is a streams group's (KIP-1071) records in
// __consumer_offsets (GroupRecords.java), in log order.
type StreamsGroupTruth struct {
	// GroupEpochs are the StreamsGroupMetadata records' epochs.
	GroupEpochs []int32 `json:"group_epochs"`
	// TargetEpochs are the StreamsGroupTargetAssignmentMetadata records'
	// assignment epochs.
	TargetEpochs []int32 `json:"target_epochs"`
	// Topologies are the StreamsGroupTopology records.
	Topologies []StreamsTopologyTruth `json:"topologies"`
	// Members are the StreamsGroupMemberMetadata records (a tombstone: the
	// member left or was fenced, Gone).
	Members []MemberStreams `json:"members"`
	// Assignments are the StreamsGroupCurrentMemberAssignment records:
	// each member's epoch and tasks as the coordinator stored them.
	Assignments []TasksTruth `json:"assignments"`
	// Targets are the StreamsGroupTargetAssignmentMember records.
	Targets []TasksTruth `json:"targets"`
}

// StreamsTopologyTruth is one StreamsGroupTopology record: each
// subtopology's source topics (repartition ones too).
type StreamsTopologyTruth struct {
	Epoch         int32               `json:"epoch"`
	Subtopologies map[string][]string `json:"subtopologies"`
}

// MemberStreams is one StreamsGroupMemberMetadata record.
type MemberStreams struct {
	MemberID      string `json:"member_id"`
	ClientID      string `json:"client_id,omitempty"`
	ProcessID     string `json:"process_id,omitempty"`
	TopologyEpoch int32  `json:"topology_epoch,omitempty"`
	Gone          bool   `json:"gone,omitempty"`
}

// TasksTruth is one member's current (or target) assignment record:
// tasks as subtopology id -> partitions.
type TasksTruth struct {
	MemberID      string             `json:"member_id"`
	MemberEpoch   int32              `json:"member_epoch"`
	PreviousEpoch int32              `json:"previous_member_epoch"`
	State         int8               `json:"state"`
	Active        map[string][]int32 `json:"active,omitempty"`
	Standby       map[string][]int32 `json:"standby,omitempty"`
	Warmup        map[string][]int32 `json:"warmup,omitempty"`
	// Revoking are the tasks pending revocation (active, standby and
	// warm-up alike).
	Revoking map[string][]int32 `json:"pending_revocation,omitempty"`
	Gone     bool               `json:"gone,omitempty"`
}

// Streams group record types (CoordinatorRecordType, Kafka 4.4).
const (
	recStreamsGroupMetadata          = 17
	recStreamsGroupMemberMetadata    = 19
	recStreamsGroupTargetMetadata    = 20
	recStreamsGroupTargetMember      = 21
	recStreamsGroupCurrentAssignment = 22
	recStreamsGroupTopology          = 23
)

// taskIDs is the records' TaskIds.
type taskIDs struct {
	SubtopologyID string  `json:"subtopologyId"`
	Partitions    []int32 `json:"partitions"`
}

func tasksOf(ts ...[]taskIDs) map[string][]int32 {
	out := map[string][]int32{}
	for _, l := range ts {
		for _, t := range l {
			out[t.SubtopologyID] = append(out[t.SubtopologyID], t.Partitions...)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// streamsGroup collects group's streams group records from fs (every
// group record type); nil when there are none.
func streamsGroup(group string, fs []formatted) (*StreamsGroupTruth, error) {
	var sg StreamsGroupTruth
	found := false
	for _, f := range fs {
		var k struct {
			GroupID  string `json:"groupId"`
			MemberID string `json:"memberId"`
		}
		if f.Key.Type < recStreamsGroupMetadata || f.Key.Type > recStreamsGroupTopology ||
			json.Unmarshal(f.Key.Data, &k) != nil || k.GroupID != group {
			continue
		}
		found = true
		var v struct {
			Epoch                         int32
			AssignmentEpoch               int32
			ClientID                      string `json:"clientId"`
			ProcessID                     string `json:"processId"`
			TopologyEpoch                 int32
			MemberEpoch                   int32
			PreviousMemberEpoch           int32
			State                         int8
			ActiveTasks                   []taskIDs
			StandbyTasks                  []taskIDs
			WarmupTasks                   []taskIDs
			ActiveTasksPendingRevocation  []taskIDs
			StandbyTasksPendingRevocation []taskIDs
			WarmupTasksPendingRevocation  []taskIDs
			Subtopologies                 []struct {
				SubtopologyID           string   `json:"subtopologyId"`
				SourceTopics            []string `json:"sourceTopics"`
				RepartitionSourceTopics []struct {
					Name string `json:"name"`
				} `json:"repartitionSourceTopics"`
			}
		}
		if f.Value != nil {
			if err := json.Unmarshal(f.Value.Data, &v); err != nil {
				return nil, fmt.Errorf("record type %d %s: %w", f.Key.Type, f.Value.Data, err)
			}
		}
		gone := f.Value == nil
		switch f.Key.Type {
		case recStreamsGroupMetadata:
			if !gone {
				sg.GroupEpochs = append(sg.GroupEpochs, v.Epoch)
			}
		case recStreamsGroupTargetMetadata:
			if !gone {
				sg.TargetEpochs = append(sg.TargetEpochs, v.AssignmentEpoch)
			}
		case recStreamsGroupTopology:
			if !gone {
				t := StreamsTopologyTruth{Epoch: v.Epoch, Subtopologies: map[string][]string{}}
				for _, s := range v.Subtopologies {
					src := slices.Clone(s.SourceTopics)
					for _, r := range s.RepartitionSourceTopics {
						src = append(src, r.Name)
					}
					slices.Sort(src)
					t.Subtopologies[s.SubtopologyID] = src
				}
				sg.Topologies = append(sg.Topologies, t)
			}
		case recStreamsGroupMemberMetadata:
			sg.Members = append(sg.Members, MemberStreams{MemberID: k.MemberID, ClientID: v.ClientID, ProcessID: v.ProcessID,
				TopologyEpoch: v.TopologyEpoch, Gone: gone})
		case recStreamsGroupCurrentAssignment:
			sg.Assignments = append(sg.Assignments, TasksTruth{MemberID: k.MemberID, MemberEpoch: v.MemberEpoch,
				PreviousEpoch: v.PreviousMemberEpoch, State: v.State, Active: tasksOf(v.ActiveTasks),
				Standby: tasksOf(v.StandbyTasks), Warmup: tasksOf(v.WarmupTasks),
				Revoking: tasksOf(v.ActiveTasksPendingRevocation, v.StandbyTasksPendingRevocation, v.WarmupTasksPendingRevocation),
				Gone:     gone})
		case recStreamsGroupTargetMember:
			sg.Targets = append(sg.Targets, TasksTruth{MemberID: k.MemberID, Active: tasksOf(v.ActiveTasks),
				Standby: tasksOf(v.StandbyTasks), Warmup: tasksOf(v.WarmupTasks), Gone: gone})
		}
	}
	if !found {
		return nil, nil
	}
	return &sg, nil
}
