package realgen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// Streams member states of StreamsGroupCurrentMemberAssignment records
// (org.apache.kafka.coordinator.group.streams.MemberState; not KIP-848's
// numbers): STABLE 1, UNREVOKED_TASKS 2, UNRELEASED_TASKS 3.
const streamsStable = 1

// tasksString is a member's tasks as both sides are compared:
// "active 0:0,1 | standby 0:2 | warmup ".
func tasksString(active, standby, warmup map[string][]int32) string {
	return "active " + assignmentString(active) + " | standby " + assignmentString(standby) + " | warmup " + assignmentString(warmup)
}

// sourcePartitions turns active tasks into the partitions they process
// by the truth's last topology: partition p of each source topic of the
// task's subtopology.
func sourcePartitions(sg *StreamsGroupTruth, active map[string][]int32) map[string][]int32 {
	if len(sg.Topologies) == 0 {
		return nil
	}
	subs := sg.Topologies[len(sg.Topologies)-1].Subtopologies
	out := map[string][]int32{}
	for id, ps := range active {
		for _, t := range subs[id] {
			out[t] = append(out[t], ps...)
		}
	}
	return out
}

// checkStreams compares kwire's streams group (KIP-1071) with the
// coordinator's records, as check848 a KIP-848 group's: every epoch kwire
// tells is a member epoch of a StreamsGroupCurrentMemberAssignment record,
// and in each, every member and its tasks (active, standby, warm-up) are
// the member's last record at that epoch in state STABLE; its partitions
// are its active tasks' partitions of their subtopology's source topics
// (the StreamsGroupTopology record). A streams group's member epochs are
// not all group epochs: a member's first epoch may precede the group's
// first recorded one (the join and the topology's validation bump the
// group epoch twice). The last StreamsGroupDescribe kwire saw must be
// the Admin client's last describe_streams_groups: group epoch, members,
// their epochs and tasks.
func checkStreams(t *testing.T, truth Truth, gt GroupTruth, g *correlate.Group) {
	t.Helper()
	sg := gt.Streams
	if g.GroupType != correlate.GroupStreams {
		t.Errorf("group %s: kwire's type %q, want %q", gt.Group, g.GroupType, correlate.GroupStreams)
	}
	want := map[int32]map[string]string{}
	wantParts := map[int32]map[string]string{}
	var epochs []int32
	for _, a := range sg.Assignments {
		if a.Gone || a.MemberEpoch <= 0 {
			continue
		}
		epochs = append(epochs, a.MemberEpoch)
		if a.State != streamsStable {
			continue
		}
		if want[a.MemberEpoch] == nil {
			want[a.MemberEpoch], wantParts[a.MemberEpoch] = map[string]string{}, map[string]string{}
		}
		want[a.MemberEpoch][a.MemberID] = tasksString(a.Active, a.Standby, a.Warmup)
		wantParts[a.MemberEpoch][a.MemberID] = assignmentString(sourcePartitions(sg, a.Active))
	}
	got := map[int32]map[string]string{}
	gotParts := map[int32]map[string]string{}
	var kgens []int32
	for _, ge := range g.Generations {
		kgens = append(kgens, ge.Generation)
		if !slices.Contains(epochs, ge.Generation) {
			t.Errorf("group %s: kwire's epoch %d is no member epoch of the coordinator's records %v", gt.Group, ge.Generation, epochs)
		}
		got[ge.Generation], gotParts[ge.Generation] = map[string]string{}, map[string]string{}
		for _, m := range ge.Members {
			var s string
			if m.Tasks != nil {
				s = tasksString(m.Tasks.Active, m.Tasks.Standby, m.Tasks.Warmup)
			}
			got[ge.Generation][m.MemberID] = s
			gotParts[ge.Generation][m.MemberID] = assignmentString(m.Assignment)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: members and tasks by epoch, current-assignment records vs kwire (-want +got):\n%s", gt.Group, d)
	}
	if d := realkafka.DiffMaps(wantParts, gotParts); d != "" {
		t.Errorf("group %s: members' partitions by epoch, active tasks' source partitions vs kwire (-want +got):\n%s", gt.Group, d)
	}
	if g.Streams == nil || len(sg.Topologies) == 0 {
		t.Errorf("group %s: kwire told no topology (%v); the coordinator recorded %v", gt.Group, g.Streams, sg.Topologies)
	} else if d := realkafka.DiffMaps(sg.Topologies[len(sg.Topologies)-1].Subtopologies, g.Streams.Subtopologies); d != "" {
		t.Errorf("group %s: subtopologies' source topics, StreamsGroupTopology record vs kwire (-want +got):\n%s", gt.Group, d)
	}
	checkStreamsDescribed(t, truth, gt, g)
	t.Logf("group %s: group epochs %v, member epochs with stable records %d, kwire %v", gt.Group, sg.GroupEpochs, len(want), kgens)
}

// checkStreamsDescribed compares kwire's last StreamsGroupDescribe answer
// with the Admin client's last describe_streams_groups of the group: the
// group epoch ("group" below), and each member's epoch and tasks.
func checkStreamsDescribed(t *testing.T, truth Truth, gt GroupTruth, g *correlate.Group) {
	t.Helper()
	var want map[string]string
	for _, raw := range truth.Reports {
		var r struct {
			Kind, Op string
			Result   map[string]struct {
				GroupEpoch int32 `json:"group_epoch"`
				Members    []struct {
					MemberID    string             `json:"member_id"`
					MemberEpoch int32              `json:"member_epoch"`
					Active      map[string][]int32 `json:"active"`
					Standby     map[string][]int32 `json:"standby"`
					Warmup      map[string][]int32 `json:"warmup"`
				} `json:"members"`
			} `json:"result"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Kind != "admin" || r.Op != "describe_streams_groups" {
			continue
		}
		d, ok := r.Result[gt.Group]
		if !ok {
			continue
		}
		want = map[string]string{"group": fmt.Sprintf("epoch %d", d.GroupEpoch)}
		for _, m := range d.Members {
			want[m.MemberID] = epochTasks(m.MemberEpoch, m.Active, m.Standby, m.Warmup)
		}
	}
	if want == nil {
		return
	}
	got := map[string]string{}
	if d := g.Described; d != nil && d.GroupEpoch != nil {
		got["group"] = fmt.Sprintf("epoch %d", *d.GroupEpoch)
		for _, m := range d.Members {
			var tk correlate.StreamsTasks
			if m.Tasks != nil {
				tk = *m.Tasks
			}
			got[m.MemberID] = epochTasks(*m.MemberEpoch, tk.Active, tk.Standby, tk.Warmup)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: the last describe, the Admin client's describe_streams_groups vs kwire's StreamsGroupDescribe (-want +got):\n%s", gt.Group, d)
	}
	t.Logf("group %s: last described %v", gt.Group, got)
}

func epochTasks(epoch int32, active, standby, warmup map[string][]int32) string {
	return fmt.Sprintf("epoch %d: %s", epoch, tasksString(active, standby, warmup))
}

// isStreamsApp reports whether group is a Kafka Streams application's (its
// reports name it in application_id).
func isStreamsApp(truth Truth, group string) bool {
	for _, raw := range truth.Reports {
		var r struct {
			App string `json:"application_id"`
		}
		if json.Unmarshal(raw, &r) == nil && r.App == group {
			return true
		}
	}
	return false
}

// checkStreamsDepartures compares how kwire says each member of a Kafka
// Streams application's group ended with what the instances did: every
// instance of the scenarios closes with CloseOptions LEAVE_GROUP (a
// streams_state report of PENDING_SHUTDOWN: a LeaveGroup on the classic
// protocol, a heartbeat with epoch -1 on the streams protocol), so each
// member the broker recorded (its client id is the instance's stream
// thread's consumer, <client.id>-StreamThread-N-consumer) left; an
// instance that never closed would have expired. It returns the member
// ids that must have expired.
func checkStreamsDepartures(t *testing.T, truth Truth, gt GroupTruth, g *correlate.Group) map[string]string {
	t.Helper()
	closed := map[string]bool{} // the instances' client.id
	for _, raw := range truth.Reports {
		var r struct {
			Kind, To string
			App      string `json:"application_id"`
			ClientID string `json:"client_id"`
		}
		if json.Unmarshal(raw, &r) == nil && r.App == gt.Group && r.Kind == "streams_state" && r.To == "PENDING_SHUTDOWN" {
			closed[r.ClientID] = true
		}
	}
	members := map[string]string{} // member id -> client id, as the broker recorded them
	for _, gen := range gt.Generations {
		for _, m := range gen.Members {
			members[m.MemberID] = m.ClientID
		}
	}
	if gt.Streams != nil {
		for _, m := range gt.Streams.Members {
			if !m.Gone {
				members[m.MemberID] = m.ClientID
			}
		}
	}
	want := map[string]string{}
	for id, client := range members {
		instance, _, _ := strings.Cut(client, "-StreamThread-")
		want[id] = correlate.MemberExpired
		if closed[instance] {
			want[id] = correlate.MemberLeft
		}
	}
	got := map[string]string{}
	for _, m := range g.Members {
		got[m.MemberID] = m.Status
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: how members ended, the Streams instances vs kwire (-want +got):\n%s", g.Group, d)
	}
	t.Logf("group %s: members ended %v", g.Group, got)
	return want
}
