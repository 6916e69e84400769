package realgen

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// checkMixed compares a group the broker converted between the classic
// and the consumer type (KIP-848's online migration) with its records:
// kwire's classic generations with the GroupMetadata records
// (checkGenerations), its consumer epochs with the consumer group's
// records (check848), and the conversions kwire told (the generation
// after each, Converted) with those the coordinator wrote and logged.
//
// A conversion carries the group's generation over: an upgrade writes
// the consumer group's records at the classic generation (the members
// as that classic rebalance formed them, so it is judged by its
// GroupMetadata record), a downgrade a GroupMetadata record at the
// consumer group's epoch (the classic members as they held it, no
// rebalance: judged by the consumer group's records).
func checkMixed(t *testing.T, truth Truth, gt GroupTruth, g *correlate.Group) {
	t.Helper()
	carried := map[int32]bool{}
	for _, c := range gt.Conversions {
		if c.To == correlate.GroupClassic {
			carried[c.Epoch] = true
		}
	}
	classic := map[int32]bool{}
	for _, r := range gt.Generations {
		if len(r.Members) > 0 && !carried[r.Generation] {
			classic[r.Generation] = true
		}
	}
	var cl, co []correlate.GenerationEvent
	for _, ge := range g.Generations {
		if ge.GroupType == correlate.GroupConsumer {
			co = append(co, ge)
		} else {
			cl = append(cl, ge)
		}
	}
	checkGenerations(t, gt, cl, carried)
	check848(t, gt, co, classic)

	var want, got []string
	for _, c := range gt.Conversions {
		want = append(want, fmt.Sprintf("to %s at generation %d", c.To, c.Epoch))
		if c.Logged == "" {
			t.Errorf("group %s: no coordinator log line for the conversion to %s at %d", gt.Group, c.To, c.Epoch)
		}
	}
	for _, ge := range g.Generations {
		if cv := ge.Converted; cv != nil {
			got = append(got, fmt.Sprintf("to %s at generation %d", cv.To, cv.Generation))
			t.Logf("group %s generation %d: converted %s -> %s at %d (%s): %s", g.Group, ge.Generation, cv.From, cv.To, cv.Generation, cv.Member, cv.Reason)
		}
	}
	if !slices.Equal(want, got) {
		t.Errorf("group %s: conversions, the coordinator's records %q, kwire %q", gt.Group, want, got)
	}
	checkProtocols(t, gt, g)
	checkDescribedEpochs(t, truth, g)
}

// checkProtocols compares the protocol each member of a mixed group used,
// as the coordinator's member records say (ClassicMemberMetadata: the
// classic protocol), with kwire's: a member that sent JoinGroup has its
// protocols (assignors), one on ConsumerGroupHeartbeat none.
func checkProtocols(t *testing.T, gt GroupTruth, g *correlate.Group) {
	t.Helper()
	want := map[string]bool{}
	for _, m := range gt.Consumer.Members {
		if !m.Gone {
			want[m.MemberID] = m.Classic
		}
	}
	got := map[string]bool{}
	for _, m := range g.Members {
		if _, ok := want[m.MemberID]; ok {
			got[m.MemberID] = len(m.Protocols) > 0
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: members on the classic protocol, the consumer group's member records vs kwire (-want +got):\n%s", gt.Group, d)
	}
}

// checkDescribedEpochs compares each Admin describe of g while it was a
// consumer group (ConsumerGroupDescribe: group epoch, each member's epoch
// and assignment, upgraded: on the consumer protocol) with kwire's epoch
// of that group epoch: the same members, assignments and protocols.
func checkDescribedEpochs(t *testing.T, truth Truth, g *correlate.Group) {
	t.Helper()
	n := 0
	for _, raw := range truth.Reports {
		var r struct {
			Kind, Op string
			Result   map[string]struct {
				Type       string `json:"type"`
				GroupEpoch *int32 `json:"group_epoch"`
				Members    []struct {
					MemberID string             `json:"member_id"`
					Epoch    int32              `json:"member_epoch"`
					Upgraded bool               `json:"upgraded"`
					Assigned map[string][]int32 `json:"assignment"`
				} `json:"members"`
			} `json:"result"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Kind != "admin" || r.Op != "describe_groups" {
			continue
		}
		d, ok := r.Result[g.Group]
		if !ok || d.Type != "Consumer" || d.GroupEpoch == nil {
			continue
		}
		n++
		want, got := map[string]string{}, map[string]string{}
		for _, m := range d.Members {
			want[m.MemberID] = fmt.Sprintf("epoch %d %s classic=%v", m.Epoch, assignmentString(m.Assigned), !m.Upgraded)
		}
		for _, ge := range g.Generations {
			if ge.Generation != *d.GroupEpoch || ge.GroupType != correlate.GroupConsumer {
				continue
			}
			for _, m := range ge.Members {
				classic := false
				for _, km := range g.Members {
					if km.MemberID == m.MemberID {
						classic = len(km.Protocols) > 0
					}
				}
				got[m.MemberID] = fmt.Sprintf("epoch %d %s classic=%v", ge.Generation, assignmentString(m.Assignment), classic)
			}
		}
		if diff := realkafka.DiffMaps(want, got); diff != "" {
			t.Errorf("group %s: the Admin client's describe at group epoch %d vs kwire's epoch (-want +got):\n%s", g.Group, *d.GroupEpoch, diff)
		}
		t.Logf("group %s: described as a consumer group at epoch %d: %v", g.Group, *d.GroupEpoch, want)
	}
	if n == 0 {
		t.Errorf("group %s: no Admin describe of it as a consumer group in the reports", g.Group)
	}
}

// checkGenerationEvents compares each generation of g's summary with its
// last generation event: what a reader of the stream was told of it is
// what kwire knows at the end (type, members, assignments, conversion).
func checkGenerationEvents(t *testing.T, g *correlate.Group, evs []correlate.GenerationEvent) {
	t.Helper()
	last := map[int32]correlate.GenerationEvent{}
	for _, ev := range evs {
		if ev.Group == g.Group {
			last[ev.Generation] = ev
		}
	}
	type view struct {
		Type, Converted string
		Members         map[string]string
	}
	of := func(ge correlate.GenerationEvent) view {
		v := view{Type: ge.GroupType, Members: map[string]string{}}
		if ge.Converted != nil {
			v.Converted = fmt.Sprintf("%s -> %s at %d", ge.Converted.From, ge.Converted.To, ge.Converted.Generation)
		}
		for _, m := range ge.Members {
			v.Members[m.MemberID] = assignmentString(m.Assignment)
		}
		return v
	}
	want, got := map[int32]view{}, map[int32]view{}
	for _, ge := range g.Generations {
		want[ge.Generation] = of(ge)
		if ev, ok := last[ge.Generation]; ok {
			got[ge.Generation] = of(ev)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: generations, kwire's summary vs its last generation events (-want +got):\n%s", g.Group, d)
	}
}
