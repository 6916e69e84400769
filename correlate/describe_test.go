package correlate

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeAndListGroups: a DescribeGroups answer names the client of a
// member whose own requests the capture missed, and is kept; ListGroups
// makes listed groups known.
func TestDescribeAndListGroups(t *testing.T) {
	h := newHarness(t, nil)
	for i, id := range []string{"m1", "m2"} {
		c := h.conn("10.0.0."+string(rune('1'+i))+":5000", "10.0.0.9:9092")
		h.ex(0, c, "", heartbeatReq("g", id, 3), heartbeatResp(0)) // client id not sent
	}
	h.c.groups["g"].members["m2"].clientID, h.c.groups["g"].members["m2"].clientHost = "", ""

	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Version, dreq.Groups = 5, []string{"g"}
	dresp := kmsg.NewPtrDescribeGroupsResponse()
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group, dg.State, dg.ProtocolType, dg.Protocol = "g", "Stable", "consumer", "range"
	for _, m := range []struct{ id, host string }{{"m1", "/10.0.0.1"}, {"m2", "10.0.0.2:5000"}} {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, "c-"+m.id, m.host
		dm.MemberAssignment = consumerAssignment(tps{"t": {int32(len(m.id))}})
		dg.Members = append(dg.Members, dm)
	}
	dresp.Groups = append(dresp.Groups, dg)
	h.ex(ms, h.conn("10.0.0.7:5000", "10.0.0.9:9092"), "admin", dreq, dresp)

	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 5
	lresp := kmsg.NewPtrListGroupsResponse()
	for _, n := range []string{"g", "idle"} {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = n, "consumer", "Empty", "classic"
		lresp.Groups = append(lresp.Groups, lg)
	}
	h.ex(2*ms, h.conn("10.0.0.7:5000", "10.0.0.9:9092"), "admin", lreq, lresp)

	s := h.c.Snapshot()
	g := findGroup(s, "g")
	type who struct{ ID, ClientID, Host string }
	var got []who
	for _, m := range g.Members {
		got = append(got, who{m.MemberID, m.ClientID, m.ClientHost})
	}
	want := []who{{"m1", "c-m1", "10.0.0.1"}, {"m2", "c-m2", "10.0.0.2"}}
	if d := diff(want, got); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}
	if g.Described == nil || g.Described.State != "Stable" || g.Described.Members[1].ClientHost != "10.0.0.2" ||
		g.Described.Members[0].Assignment["t"][0] != 2 {
		t.Errorf("described = %+v", g.Described)
	}
	if idle := findGroup(s, "idle"); idle == nil || idle.ListedState != "Empty" || idle.GroupType != GroupClassic {
		t.Errorf("listed group idle = %+v", idle)
	}
}
