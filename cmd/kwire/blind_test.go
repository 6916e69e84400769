package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// findCoordinators is a FindCoordinator v4 naming count made-up groups
// from first on, and the broker's answer.
func findCoordinators(first, count int) (*kmsg.FindCoordinatorRequest, *kmsg.FindCoordinatorResponse) {
	req, resp := kmsg.NewPtrFindCoordinatorRequest(), kmsg.NewPtrFindCoordinatorResponse()
	for i := first; i < first+count; i++ {
		name := fmt.Sprintf("junk-%05d", i)
		req.CoordinatorKeys = append(req.CoordinatorKeys, name)
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Host, co.Port = name, 0, "10.0.0.9", 9092
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return req, resp
}

// realConsumer is one consumer of group "real" joining it (KIP-394's two
// JoinGroups), taking t/0 and committing offset 42.
func realConsumer(f *flow) {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "real", "consumer", 45000, 60000
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	first := kmsg.NewPtrJoinGroupResponse()
	first.ErrorCode, first.MemberID, first.Generation = kerr.MemberIDRequired.Code, "m1", -1
	f.exchange(join, 9, 1, "real-client", first)
	join.MemberID = "m1"
	joined := kmsg.NewPtrJoinGroupResponse()
	joined.Generation, joined.Protocol, joined.LeaderID, joined.MemberID = 1, kmsg.StringPtr("range"), "m1", "m1"
	jm := kmsg.NewJoinGroupResponseMember()
	jm.MemberID, jm.ProtocolMetadata = "m1", proto.Metadata
	joined.Members = append(joined.Members, jm)
	f.exchange(join, 9, 2, "real-client", joined)

	asg := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	asg.Topics = append(asg.Topics, at)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "real", "m1", 1
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = "m1", asg.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	synced := kmsg.NewPtrSyncGroupResponse()
	synced.MemberAssignment = sa.MemberAssignment
	f.exchange(sync, 5, 3, "real-client", synced)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "real", "m1", 1
	ct, rt := kmsg.NewOffsetCommitRequestTopic(), kmsg.NewOffsetCommitResponseTopic()
	ct.Topic, rt.Topic = "t", "t"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 42
	ct.Partitions = append(ct.Partitions, cp)
	rp := kmsg.NewOffsetCommitResponseTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, ct)
	committed := kmsg.NewPtrOffsetCommitResponse()
	committed.Topics = append(committed.Topics, rt)
	f.exchange(commit, 8, 4, "real-client", committed)
}

// TestHostileClientCannotBlindAnalyze: in a capture, one client names
// 12,000 made-up groups in a FindCoordinator (more than --max-groups'
// 10,000), a consumer group then forms and commits, and the client names
// 12,000 more. kwire analyze reports the group whole, and says in its
// summary (JSON and text) what the cap forgot.
func TestHostileClientCannotBlindAnalyze(t *testing.T) {
	w := newPcapWriter(t, filepath.Join(t.TempDir(), "hostile.pcap"))
	hostile := w.flow(addr("10.0.0.66:6666"), addr("10.0.0.9:9092"))
	consumer := w.flow(addr("10.0.0.1:5000"), addr("10.0.0.9:9092"))
	hostile.open()
	consumer.open()
	req, resp := findCoordinators(0, 12000)
	hostile.exchange(req, 4, 1, "hostile", resp)
	realConsumer(consumer)
	req, resp = findCoordinators(12000, 12000)
	hostile.exchange(req, 4, 2, "hostile", resp)
	hostile.fin()
	consumer.fin()
	file := w.close()

	for _, shards := range []string{"1", "3"} {
		t.Run("shards="+shards, func(t *testing.T) { checkNotBlind(t, file, shards) })
	}
}

// checkNotBlind checks kwire analyze --shards shards of file: group real
// whole, the cap's work said.
func checkNotBlind(t *testing.T, file, shards string) {
	sum := ndjsonLine(t, runKwireAny(t, "analyze", "--json", "--shards", shards, file), "summary")
	var real map[string]any
	groups, _ := sum["groups"].([]any)
	for _, g := range groups {
		if m, _ := g.(map[string]any); m["group"] == "real" {
			real = m
		}
	}
	if real == nil {
		t.Fatalf("group real not in the summary of %d groups (limits %v)", len(groups), field(sum, "stats.limits.groups_dropped"))
	}
	parts, _ := real["partitions"].([]any)
	var committed float64
	if len(parts) == 1 {
		committed = field(parts[0].(map[string]any), "committed")
	}
	members, _ := real["members"].([]any)
	if field(real, "generation") != 1 || len(members) != 1 || committed != 42 {
		t.Errorf("group real: generation %v, %d members, partitions %v; want 1, 1, t/0 committed 42", real["generation"], len(members), parts)
	}
	if len(groups) > 10000 || field(sum, "stats.limits.groups_evicted") == 0 || field(sum, "stats.limits.groups_dropped") != 0 {
		t.Errorf("%d groups, limits %v; want at most 10000, groups evicted, none dropped", len(groups), sum["stats"].(map[string]any)["limits"])
	}

	text := string(runKwireAny(t, "analyze", "--text", "--shards", shards, file))
	for _, want := range []string{"== group real (classic, consumer/range) state stable, generation 1",
		"groups only named (no member, generation or commit seen) forgotten to make room (--max-groups)"} {
		if !strings.Contains(text, want) {
			t.Errorf("kwire analyze's text lacks %q", want)
		}
	}
}
