package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Detach makes e, as a decode.Handler got it, usable by Exchange after the
// Handler call has returned, so that decoding and correlating can run on
// two goroutines: it copies into arena every byte slice of e.Req and e.Resp
// that the Correlator reads (record batches of Fetch responses, group
// protocol metadata and assignments) and points them there, and clears the
// byte slices it does not read (Produce records). It returns the grown
// arena, which must stay untouched until Exchange(e) has returned.
//
// The kmsg messages are changed in place; strings in them are already
// copies. e.Conn and e.RecordsNotCopied still point at the decoder's
// memory: the caller copies them.
func Detach(e *decode.Exchange, arena []byte) []byte {
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		n := len(arena)
		arena = append(arena, b...)
		return arena[n:len(arena):len(arena)]
	}
	switch r := e.Req.(type) {
	case *kmsg.ProduceRequest:
		decode.DropRecords(r) // transactional: batch headers kept, copied below
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.Records = keep(p.Records)
			}
		}
	case *kmsg.JoinGroupRequest:
		for i := range r.Protocols {
			r.Protocols[i].Metadata = keep(r.Protocols[i].Metadata)
		}
	case *kmsg.SyncGroupRequest:
		for i := range r.GroupAssignment {
			r.GroupAssignment[i].MemberAssignment = keep(r.GroupAssignment[i].MemberAssignment)
		}
	}
	switch r := e.Resp.(type) {
	case *kmsg.FetchResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				p := &r.Topics[i].Partitions[j]
				p.RecordBatches = keep(p.RecordBatches)
			}
		}
	case *kmsg.JoinGroupResponse:
		for i := range r.Members {
			r.Members[i].ProtocolMetadata = keep(r.Members[i].ProtocolMetadata)
		}
	case *kmsg.SyncGroupResponse:
		r.MemberAssignment = keep(r.MemberAssignment)
	case *kmsg.DescribeGroupsResponse:
		for i := range r.Groups {
			for j := range r.Groups[i].Members {
				m := &r.Groups[i].Members[j]
				m.ProtocolMetadata = keep(m.ProtocolMetadata)
				m.MemberAssignment = keep(m.MemberAssignment)
			}
		}
	}
	return arena
}
