package correlate

import (
	"net/netip"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Described is a group as the broker described it (DescribeGroups;
// StreamsGroupDescribe for a streams group).
type Described struct {
	// TS is the answer's time.
	TS           Time   `json:"ts"`
	TSMillis     int64  `json:"ts_ms"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Protocol     string `json:"protocol"`
	// GroupEpoch and AssignmentEpoch are a streams group's (KIP-1071):
	// its epoch and its target assignment's.
	GroupEpoch      *int32            `json:"group_epoch,omitempty"`
	AssignmentEpoch *int32            `json:"assignment_epoch,omitempty"`
	Members         []DescribedMember `json:"members"`
}

// DescribedMember is one member of a DescribeGroups answer.
type DescribedMember struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	// Assignment is decoded for the consumer protocol, else null; a
	// streams group member's is its active tasks' source partitions.
	Assignment map[string][]int32 `json:"assignment"`
	// MemberEpoch and Tasks are a streams group member's (KIP-1071).
	MemberEpoch *int32        `json:"member_epoch,omitempty"`
	Tasks       *StreamsTasks `json:"tasks,omitempty"`
}

// describeGroups handles DescribeGroups (key 15): the broker's view of
// each group is kept, and fills in the client id and host of members
// whose own requests were not seen. It creates no generation: the answer
// has no generation id.
func (c *Correlator) describeGroups(e *decode.Exchange) {
	resp, _ := e.Resp.(*kmsg.DescribeGroupsResponse)
	if resp == nil {
		return
	}
	for _, rg := range resp.Groups {
		if rg.ErrorCode != 0 {
			continue
		}
		g := c.group(rg.Group)
		if g == nil {
			continue
		}
		d := &Described{TS: TimeOf(e.RespTime), TSMillis: e.RespTime.UnixMilli(), State: rg.State, ProtocolType: rg.ProtocolType, Protocol: rg.Protocol}
		for _, rm := range rg.Members {
			dm := DescribedMember{
				MemberID: rm.MemberID, InstanceID: strPtr(rm.InstanceID),
				ClientID: rm.ClientID, ClientHost: clientHost(rm.ClientHost),
			}
			if rg.ProtocolType == consumerProtocol {
				dm.Assignment, _ = decodeAssignment(rm.MemberAssignment)
			}
			c.describedMember(g, dm)
			d.Members = append(d.Members, dm)
		}
		g.described = d
	}
}

// describedMember fills in the client id and host of a described member
// whose own requests were not seen.
func (c *Correlator) describedMember(g *groupState, dm DescribedMember) {
	if m := g.members[dm.MemberID]; m != nil {
		if m.clientID == "" {
			m.clientID = dm.ClientID
		}
		if m.clientHost == "" {
			m.clientHost = dm.ClientHost
		}
	}
}

// clientHost normalises a broker's client host ("/10.0.0.1" from Kafka,
// "10.0.0.1:5000" from kfake) to an address without port.
func clientHost(s string) string {
	s = strings.TrimPrefix(s, "/")
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().String()
	}
	return s
}
