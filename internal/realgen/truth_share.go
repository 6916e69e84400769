package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// ShareTruth is one share group (KIP-932) as the brokers recorded it.
type ShareTruth struct {
	Group string `json:"group"`
	// Epochs are the ShareGroupMetadata records' group epochs, in log
	// order (__consumer_offsets, GroupRecords.java).
	Epochs []int32 `json:"epochs"`
	// Members are the ShareGroupMemberMetadata records (a tombstone: the
	// member left or was fenced, Gone), in log order.
	Members []Member848 `json:"members"`
	// Assignments are the ShareGroupCurrentMemberAssignment records.
	Assignments []Assignment848 `json:"assignments"`
	// State is the share coordinator's log (__share_group_state, Kafka's
	// ShareGroupStateMessageFormatter): every ShareSnapshot and
	// ShareUpdate of the group's partitions, in log order.
	State []ShareStateTruth `json:"state"`
}

// ShareStateTruth is one ShareSnapshot or ShareUpdate record: a share
// partition's start offset (-1: not updated) and the state of the
// records from there that are not simply available at delivery count 0.
type ShareStateTruth struct {
	Record      string            `json:"record"` // snapshot or update
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	StartOffset int64             `json:"start_offset"`
	Batches     []ShareBatchTruth `json:"batches"`
}

// ShareBatchTruth is a StateBatch: offsets first..last in one delivery
// state (0 available, 2 acknowledged, 4 archived) with a delivery count.
type ShareBatchTruth struct {
	FirstOffset   int64 `json:"first_offset"`
	LastOffset    int64 `json:"last_offset"`
	State         int8  `json:"delivery_state"`
	DeliveryCount int16 `json:"delivery_count"`
}

// Share group record types of __consumer_offsets and the share
// coordinator's (CoordinatorRecordType, Kafka 4.4).
const (
	recShareGroupMemberMetadata    = 10
	recShareGroupMetadata          = 11
	recShareGroupCurrentAssignment = 14
	recShareSnapshot               = 0
	recShareUpdate                 = 1
)

// shareGroups reads the share groups' truth from the group records of
// __consumer_offsets (all: GroupRecords.java) and __share_group_state.
func (e *Env) shareGroups(ctx context.Context, groups []string, all []formatted) ([]ShareTruth, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	names, err := e.topicNames(ctx)
	if err != nil {
		return nil, err
	}
	state, err := e.consumeTopic(ctx, "__share_group_state", "org.apache.kafka.tools.consumer.group.share.ShareGroupStateMessageFormatter")
	if err != nil {
		return nil, err
	}
	e.Logf("__share_group_state: %d records", len(state))
	var out []ShareTruth
	for _, g := range groups {
		st := ShareTruth{Group: g}
		for _, f := range all {
			var k struct {
				GroupID  string `json:"groupId"`
				MemberID string `json:"memberId"`
			}
			if json.Unmarshal(f.Key.Data, &k) != nil || k.GroupID != g {
				continue
			}
			var v struct {
				Epoch               int32
				ClientID            string `json:"clientId"`
				MemberEpoch         int32
				PreviousMemberEpoch int32
				State               int8
				AssignedPartitions  []topicPartitions
			}
			if f.Value != nil {
				if err := json.Unmarshal(f.Value.Data, &v); err != nil {
					return nil, fmt.Errorf("record type %d %s: %w", f.Key.Type, f.Value.Data, err)
				}
			}
			switch f.Key.Type {
			case recShareGroupMetadata:
				if f.Value != nil {
					st.Epochs = append(st.Epochs, v.Epoch)
				}
			case recShareGroupMemberMetadata:
				st.Members = append(st.Members, Member848{MemberID: k.MemberID, ClientID: v.ClientID, Gone: f.Value == nil})
			case recShareGroupCurrentAssignment:
				st.Assignments = append(st.Assignments, Assignment848{MemberID: k.MemberID, MemberEpoch: v.MemberEpoch,
					PreviousEpoch: v.PreviousMemberEpoch, State: v.State, Assigned: named(v.AssignedPartitions, names), Gone: f.Value == nil})
			}
		}
		for _, f := range state {
			var k struct {
				GroupID   string `json:"groupId"`
				TopicID   string `json:"topicId"`
				Partition int32  `json:"partition"`
			}
			if (f.Key.Type != recShareSnapshot && f.Key.Type != recShareUpdate) || json.Unmarshal(f.Key.Data, &k) != nil ||
				k.GroupID != g || f.Value == nil {
				continue
			}
			var v struct {
				StartOffset  int64 `json:"startOffset"`
				StateBatches []struct {
					FirstOffset   int64 `json:"firstOffset"`
					LastOffset    int64 `json:"lastOffset"`
					DeliveryState int8  `json:"deliveryState"`
					DeliveryCount int16 `json:"deliveryCount"`
				} `json:"stateBatches"`
			}
			if err := json.Unmarshal(f.Value.Data, &v); err != nil {
				return nil, fmt.Errorf("share state record %s: %w", f.Value.Data, err)
			}
			s := ShareStateTruth{Record: "update", Topic: names[k.TopicID], Partition: k.Partition, StartOffset: v.StartOffset}
			if s.Topic == "" {
				s.Topic = "id:" + k.TopicID
			}
			if f.Key.Type == recShareSnapshot {
				s.Record = "snapshot"
			}
			for _, b := range v.StateBatches {
				s.Batches = append(s.Batches, ShareBatchTruth{b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount})
			}
			sort.Slice(s.Batches, func(i, j int) bool { return s.Batches[i].FirstOffset < s.Batches[j].FirstOffset })
			st.State = append(st.State, s)
		}
		out = append(out, st)
	}
	return out, nil
}
