package jsonout

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// topic builds a summary topic from a name and/or id.
func topic(name string, id [16]byte, names *decode.Topics) Topic {
	t := Topic{Topic: name, TopicID: topicID(id)}
	if t.Topic == "" && t.TopicID != "" {
		t.Topic, _ = names.Name(id)
	}
	return t
}

func partitions(ps []int32) []Partition {
	out := make([]Partition, len(ps))
	for i, p := range ps {
		out[i].Partition = p
	}
	return out
}

func summarizeRequest(req kmsg.Request, names *decode.Topics, pre *scanned) *Summary {
	s := &Summary{}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		s.Acks = &r.Acks
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				sp := Partition{Partition: p.Partition}
				withBatches(&sp, pre.next(p.Records))
				st.Partitions = append(st.Partitions, sp)
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, Offset: i64(p.FetchOffset)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			st := Topic{Topic: t.Topic}
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, Offset: i64(p.Timestamp)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.OffsetCommitRequest:
		s.Group, s.MemberID, s.InstanceID, s.Generation = r.Group, r.MemberID, r.InstanceID, &r.Generation
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, Offset: i64(p.Offset)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.TxnOffsetCommitRequest:
		s.Group, s.MemberID, s.InstanceID, s.Generation = r.Group, r.MemberID, r.InstanceID, &r.Generation
		for _, t := range r.Topics {
			st := Topic{Topic: t.Topic}
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, Offset: i64(p.Offset)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.OffsetFetchRequest:
		s.Group = r.Group
		for _, t := range r.Topics {
			s.Topics = append(s.Topics, Topic{Topic: t.Topic, Partitions: partitions(t.Partitions)})
		}
		for _, g := range r.Groups {
			s.Groups = append(s.Groups, g.Group)
			for _, t := range g.Topics {
				st := topic(t.Topic, t.TopicID, names)
				st.Partitions = partitions(t.Partitions)
				s.Topics = append(s.Topics, st)
			}
		}
	default:
		summarizeGroupRequest(s, req, names)
	}
	return s
}

// summarizeGroupRequest handles the group membership requests.
func summarizeGroupRequest(s *Summary, req kmsg.Request, names *decode.Topics) {
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		s.KeyType = &r.CoordinatorType
		if r.Version < 4 {
			s.CoordinatorKey = []string{r.CoordinatorKey}
		} else {
			s.CoordinatorKey = r.CoordinatorKeys
		}
	case *kmsg.JoinGroupRequest:
		s.Group, s.MemberID, s.InstanceID = r.Group, r.MemberID, r.InstanceID
		s.ProtocolType, s.SessionTimeout = r.ProtocolType, &r.SessionTimeoutMillis
		if r.Version >= 1 {
			s.RebalanceTO = &r.RebalanceTimeoutMillis
		}
		for _, p := range r.Protocols {
			s.Protocols = append(s.Protocols, p.Name)
		}
		if r.Reason != nil {
			s.Reason = *r.Reason
		}
	case *kmsg.SyncGroupRequest:
		s.Group, s.MemberID, s.InstanceID, s.Generation = r.Group, r.MemberID, r.InstanceID, &r.Generation
		if r.Protocol != nil {
			s.Protocol = *r.Protocol
		}
		for _, a := range r.GroupAssignment {
			s.Members = append(s.Members, a.MemberID)
		}
	case *kmsg.HeartbeatRequest:
		s.Group, s.MemberID, s.InstanceID, s.Generation = r.Group, r.MemberID, r.InstanceID, &r.Generation
	case *kmsg.LeaveGroupRequest:
		s.Group, s.MemberID = r.Group, r.MemberID
		for _, m := range r.Members {
			s.Members = append(s.Members, m.MemberID)
			if m.Reason != nil && s.Reason == "" {
				s.Reason = *m.Reason
			}
		}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		s.Group, s.MemberID, s.InstanceID, s.MemberEpoch = r.Group, r.MemberID, r.InstanceID, &r.MemberEpoch
		if r.RebalanceTimeoutMillis >= 0 {
			s.RebalanceTO = &r.RebalanceTimeoutMillis
		}
		for _, t := range r.Topics {
			st := topic("", t.TopicID, names)
			st.Partitions = partitions(t.Partitions)
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.DescribeGroupsRequest:
		s.Groups = r.Groups
	case *kmsg.ConsumerGroupDescribeRequest:
		s.Groups = r.Groups
	case *kmsg.SASLHandshakeRequest:
		s.Mechanism = r.Mechanism
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			st := Topic{Topic: t.Topic}
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, Offset: i64(p.Offset)})
			}
			s.Topics = append(s.Topics, st)
		}
	}
}
