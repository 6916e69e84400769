package jsonout

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

func summarizeResponse(resp kmsg.Response, names *decode.Topics) *Summary {
	s := &Summary{}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, Offset: i64(p.BaseOffset)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.FetchResponse:
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				sp := Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, HighWatermark: i64(p.HighWatermark)}
				if r.Version >= 4 {
					sp.LastStable = i64(p.LastStableOffset)
				}
				if r.Version >= 5 {
					sp.LogStart = i64(p.LogStartOffset)
				}
				withBatches(&sp, decode.ScanBatches(p.RecordBatches))
				st.Partitions = append(st.Partitions, sp)
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			st := Topic{Topic: t.Topic}
			for _, p := range t.Partitions {
				off := p.Offset
				if r.Version == 0 && len(p.OldStyleOffsets) > 0 {
					off = p.OldStyleOffsets[0]
				}
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, Offset: i64(off)})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			st := topic(t.Topic, t.TopicID, names)
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, ErrorCode: p.ErrorCode})
			}
			s.Topics = append(s.Topics, st)
		}
	case *kmsg.OffsetFetchResponse:
		for _, t := range r.Topics {
			st := Topic{Topic: t.Topic}
			for _, p := range t.Partitions {
				st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, Offset: i64(p.Offset)})
			}
			s.Topics = append(s.Topics, st)
		}
		for _, g := range r.Groups {
			s.Groups = append(s.Groups, g.Group)
			for _, t := range g.Topics {
				st := topic(t.Topic, t.TopicID, names)
				for _, p := range t.Partitions {
					st.Partitions = append(st.Partitions, Partition{Partition: p.Partition, ErrorCode: p.ErrorCode, Offset: i64(p.Offset)})
				}
				s.Topics = append(s.Topics, st)
			}
		}
	default:
		summarizeGroupResponse(s, resp, names)
	}
	return s
}

func summarizeGroupResponse(s *Summary, resp kmsg.Response, names *decode.Topics) {
	switch r := resp.(type) {
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			s.Coordinators = []Node{{NodeID: r.NodeID, Host: r.Host, Port: r.Port, ErrorCode: r.ErrorCode}}
		}
		for _, c := range r.Coordinators {
			s.Coordinators = append(s.Coordinators, Node{Key: c.Key, NodeID: c.NodeID, Host: c.Host, Port: c.Port, ErrorCode: c.ErrorCode})
		}
	case *kmsg.JoinGroupResponse:
		s.MemberID, s.Leader, s.Generation = r.MemberID, r.LeaderID, &r.Generation
		if r.Protocol != nil {
			s.Protocol = *r.Protocol
		}
		for _, m := range r.Members {
			s.Members = append(s.Members, m.MemberID)
		}
	case *kmsg.SyncGroupResponse:
		if r.Protocol != nil {
			s.Protocol = *r.Protocol
		}
	case *kmsg.LeaveGroupResponse:
		for _, m := range r.Members {
			s.Members = append(s.Members, m.MemberID)
		}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if r.MemberID != nil {
			s.MemberID = *r.MemberID
		}
		s.MemberEpoch = &r.MemberEpoch
		if r.Assignment != nil {
			for _, t := range r.Assignment.Topics {
				st := topic("", t.TopicID, names)
				st.Partitions = partitions(t.Partitions)
				s.Topics = append(s.Topics, st)
			}
		}
	case *kmsg.SASLHandshakeResponse:
		// Mechanisms offered are not secret but add nothing here.
	}
}
