package realgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/realkafka"
)

// realDir holds the committed real captures (make real-captures).
const realDir = "../../testdata/real"

// expectedHazards are, per scenario, the warn/critical hazard kinds the
// clients earned: anything else of those severities is a false alarm.
var expectedHazards = map[string][]string{
	// r_mixed and r_mixed_coop earn none: the broker converting the
	// group to a consumer group and back is no hazard (checkMixed: told
	// on the generations), nor are its classic members answered
	// REBALANCE_IN_PROGRESS meanwhile, nor (cooperative) their keeping
	// partitions at the carried epoch until they give the moved ones up.
	// rk-c2 was SIGKILLed: its session expired, and the partitions it
	// owned waited 10 s for the next generation.
	"r_joins": {"member_expired"},
	// The same on Kafka 3.9 and its clients: rk3-c2 was SIGKILLed.
	"r3_joins": {"member_expired"},
	// rk-s2, static, SIGKILLed the second time and not restarted: its
	// session expired. Its restart inside the session before is no hazard.
	"r_static": {"member_expired"},
	// rk-sh1 was SIGKILLed holding 10 records (share_member_died: they
	// went to rk-sh2) and expired; rk-sh2 released the poison record
	// until its 3rd delivery (share_redelivery); rk-sh3 held its records
	// past their 5 s lock (share_ack_lost).
	"r_share": {"member_expired", "share_member_died", "share_redelivery", "share_ack_lost"},
	// rk-txn-hang's transaction hung past its timeout, holding the last
	// stable offset rk-reader waited at (hanging_transaction, twice);
	// rk-txn-z-zombie kept sending after its successor's InitProducerID
	// (zombie_producer).
	"r_txn": {"hanging_transaction", "zombie_producer"},
	// rk-acks1-loss produced with acks=1 while its partition's leader was
	// SIGKILLed before its followers had fetched its last records: the
	// new leader gave their offsets to new records (acked_records_lost).
	"r_acks": {"acked_records_lost"},
	// DeleteRecords moved partition 0's log start past both groups'
	// committed offset: their next consumers' auto.offset.reset skipped
	// records 20..29 (earliest) and 20..39 (latest), never processed.
	"r_reset": {"offset_reset"},
	// The application made a new producer and consumer, each with a new
	// generated client.id, for every request.
	"r_churn": {"client_id_churn"},
	// rk-w1 committed 32 (record 31 done) with record 30 still in its
	// worker and was SIGKILLed: record 30 was never processed
	// (commit_gap); its session expired (member_expired). rk-w2's worker
	// committed slow even records after their successors: the committed
	// offset went back each time (commit_regression).
	"r_worker": {"commit_gap", "member_expired", "commit_regression"},
	// rk-txe-fenced-zombie committed (EndTxn) after its successor's
	// InitProducerID fenced it (zombie_producer); rk-txe-late's
	// transaction outlived its 15 s timeout, holding the last stable
	// offset rk-reader waited at (hanging_transaction, twice). Neither
	// the busy producer's CONCURRENT_TRANSACTIONS (the partition leader
	// retried them) nor the late producer's refused send after the
	// coordinator's abort (its own epoch, bumped by that abort) is a
	// hazard.
	"r_txnerr": {"hanging_transaction", "zombie_producer"},
}

// expectedInfo are, per scenario, info hazards that must be told: what
// the broker did, named for what it is.
var expectedInfo = map[string][]string{
	// The first rebalance of the empty group lasted the initial delay,
	// extended by the second joiner up to the 4 s rebalance timeout.
	"r_delay": {"rebalance_slow"},
	// The coordinator's broker was SIGKILLed: the members reached no
	// coordinator for about its 9 s fencing, over their 10 s session
	// with the last heartbeat before; the new coordinator started their
	// sessions anew (same generation, no rebalance).
	"r_failover": {"heartbeat_late"},
	// The same failover in the separate layout: the classic members
	// reached no coordinator while the killed one was fenced.
	"r_separate": {"heartbeat_late"},
	// Producers with acks=0 and acks=1: a setting, told once per client
	// and topic (checkAcks: and not for acks=all).
	"r_acks": {"producer_acks_weak"},
	// Each group's first consumers started without a committed offset
	// (auto.offset.reset earliest, from the log start: nothing skipped).
	"r_reset": {"offset_reset"},
}

// TestRealCaptures runs kwire analyze on every committed real capture
// (testdata/real/<name>.pcapng, made by kwire-gen -real from a Kafka 4.4.0
// cluster and the Java client) and compares its story with the truth the
// broker recorded (<name>.truth.json): every generation the coordinator
// stored in __consumer_offsets (leader, members, assignments) and logged
// (member count, leader), every accepted commit and the committed offsets
// __consumer_offsets holds at the end, and no warn or critical hazard the
// clients did not earn. It needs neither Java nor Kafka.
func TestRealCaptures(t *testing.T) {
	truths, _ := filepath.Glob(filepath.Join(realDir, "*.truth.json"))
	if len(truths) == 0 {
		t.Fatalf("no real captures in %s: run make real-captures", realDir)
	}
	kwire := realkafka.BuildKwire(t)
	for _, tf := range truths {
		name := strings.TrimSuffix(filepath.Base(tf), ".truth.json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(tf)
			if err != nil {
				t.Fatal(err)
			}
			var truth Truth
			if err := json.Unmarshal(b, &truth); err != nil {
				t.Fatalf("%s: %v", tf, err)
			}
			run := analyze(t, kwire, filepath.Join(realDir, truth.Capture), truth.Ports, truth.KwireArgs...)
			checkTraffic(t, truth, run.snap, run.dec)
			checkTruth(t, name, truth, run)
			// The field reports' own checks (fieldrep2_test.go).
			for _, gt := range truth.Groups {
				g := findGroup(run.snap, gt.Group)
				if g == nil {
					continue
				}
				checkLost(t, truth, gt, run.snap)
				checkRegressions(t, gt, run.snap)
				checkReplayed(t, truth, gt, run.snap)
				if exactConsumption[name] {
					checkConsumption(t, truth, g, run.snap)
				}
				if fcClosed[name] {
					checkFCClosed(t, kwire, truth, g, run.snap)
				}
			}
		})
	}
}

// checkTruth compares kwire's story of scenario name (its summary,
// coordinator and generation events) with the broker's truth: every
// group's generations (or epochs, conversions, streams tasks), commits,
// coordinators and departures, share groups, transactions, acknowledged
// records lost, resets, churn, and the warn/critical hazards the clients
// earned.
func checkTruth(t *testing.T, name string, truth Truth, run kwireRun) {
	t.Helper()
	snap, coords, genEvents := run.snap, run.coords, run.gens
	expired := map[string]bool{}
	for _, gt := range truth.Groups {
		g := findGroup(snap, gt.Group)
		if g == nil {
			t.Errorf("kwire found no group %q", gt.Group)
			continue
		}
		switch {
		case gt.Streams != nil:
			checkStreams(t, truth, gt, g)
		case len(gt.Conversions) > 0:
			checkMixed(t, truth, gt, g)
		case gt.Consumer != nil:
			check848(t, gt, g.Generations, nil)
		default:
			checkGenerations(t, gt, g.Generations, nil)
		}
		checkGenerationEvents(t, g, genEvents)
		checkCommits(t, gt, g)
		checkCoordinators(t, truth, g, coords)
		departures := checkDepartures
		if isStreamsApp(truth, gt.Group) {
			departures = checkStreamsDepartures
		}
		for id, how := range departures(t, truth, gt, g) {
			if how == correlate.MemberExpired {
				expired[id] = true
			}
		}
	}
	for _, st := range truth.Share {
		g := findGroup(snap, st.Group)
		if g == nil {
			t.Errorf("kwire found no share group %q", st.Group)
			continue
		}
		for id := range checkShare(t, truth, st, g, snap) {
			expired[id] = true
		}
	}
	checkTxns(t, truth, snap)
	checkAcks(t, truth, snap)
	checkResets(t, truth, snap)
	checkChurn(t, truth, snap)
	checkHazards(t, name, snap, expired)
}

func findGroup(s *correlate.Snapshot, name string) *correlate.Group {
	for i := range s.Groups {
		if s.Groups[i].Group == name {
			return &s.Groups[i]
		}
	}
	return nil
}

// genView is what both sides say of one generation.
type genView struct {
	Protocol string
	Leader   string
	// Members maps member id -> assignment ("topic:p,p;topic:p").
	Members map[string]string
}

func assignmentString(a map[string][]int32) string {
	var ts []string
	for t := range a {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	var parts []string
	for _, t := range ts {
		ps := slices.Clone(a[t])
		slices.Sort(ps)
		var s []string
		for _, p := range ps {
			s = append(s, strconv.Itoa(int(p)))
		}
		if len(s) > 0 {
			parts = append(parts, t+":"+strings.Join(s, ","))
		}
	}
	return strings.Join(parts, ";")
}

// checkGenerations compares kwire's generations with the group metadata
// records (every generation with members: the record the broker writes
// when a group becomes empty, no members, bumps the generation, and
// kwire does not count that as one) and the coordinator's log lines. A
// generation is its first record, the members as it formed; a later
// record of the same generation is a static member restarted (KIP-345),
// which kwire tells as the old member replaced (staticReplacements).
// gens are kwire's generations to compare; the records of generations in
// skip are not theirs (checkMixed).
func checkGenerations(t *testing.T, gt GroupTruth, gens []correlate.GenerationEvent, skip map[int32]bool) {
	t.Helper()
	want := map[int32]genView{}
	for _, r := range gt.Generations {
		if _, ok := want[r.Generation]; ok || len(r.Members) == 0 || skip[r.Generation] {
			continue
		}
		v := genView{Protocol: r.Protocol, Leader: r.Leader, Members: map[string]string{}}
		for _, m := range r.Members {
			v.Members[m.MemberID] = assignmentString(m.Assignment)
		}
		want[r.Generation] = v
	}
	got := map[int32]genView{}
	var kgens []int32
	for _, ge := range gens {
		v := genView{Protocol: ge.Protocol, Leader: ge.Leader, Members: map[string]string{}}
		for _, m := range ge.Members {
			v.Members[m.MemberID] = assignmentString(m.Assignment)
		}
		got[ge.Generation] = v
		kgens = append(kgens, ge.Generation)
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: generations, __consumer_offsets group metadata records vs kwire (-want +got):\n%s", gt.Group, d)
	}
	for gen, l := range gt.Logged {
		v, ok := got[gen]
		if !ok {
			t.Errorf("group %s: generation %d logged by the coordinator (%d members, leader %s), not in kwire's %v", gt.Group, gen, l.Members, l.Leader, kgens)
			continue
		}
		if len(v.Members) != l.Members || (l.Leader != "" && v.Leader != l.Leader) {
			t.Errorf("group %s generation %d: kwire %d members, leader %s; the coordinator logged %d members, leader %s",
				gt.Group, gen, len(v.Members), v.Leader, l.Members, l.Leader)
		}
	}
	t.Logf("group %s: generations truth %d (with members), logged %d, kwire %v", gt.Group, len(want), len(gt.Logged), kgens)
}

// check848 compares kwire's epochs of a KIP-848 group with the
// coordinator's records: every epoch kwire tells is a group epoch of a
// ConsumerGroupMetadata record, and in each, every member and its
// assignment are the last ConsumerGroupCurrentMemberAssignment record of
// that member at that member epoch in state STABLE (0). A member's later
// records at the same epoch in state UNREVOKED_PARTITIONS (1: asked to
// give partitions up for the next epoch, the rest pending revocation) or
// UNRELEASED_PARTITIONS (2: waiting for another member to give them up)
// are the way to the next epoch, not that epoch's assignment.
// gens are kwire's epochs to compare; the records of epochs in skip are
// not theirs (checkMixed).
func check848(t *testing.T, gt GroupTruth, gens []correlate.GenerationEvent, skip map[int32]bool) {
	t.Helper()
	checkEpochs(t, gt.Group, gt.Consumer.GroupEpochs, gt.Consumer.Assignments, gens, skip)
}

// checkEpochs compares kwire's epochs gens of group with the coordinator's
// group epochs and current-assignment records but those of the epochs in
// skip (check848; share groups have the same records) and returns kwire's
// epochs.
func checkEpochs(t *testing.T, group string, epochs []int32, assignments []Assignment848, gens []correlate.GenerationEvent, skip map[int32]bool) []int32 {
	t.Helper()
	want := map[int32]map[string]string{}
	for _, a := range assignments {
		if a.Gone || a.MemberEpoch <= 0 || a.State != 0 || skip[a.MemberEpoch] {
			continue
		}
		if want[a.MemberEpoch] == nil {
			want[a.MemberEpoch] = map[string]string{}
		}
		want[a.MemberEpoch][a.MemberID] = assignmentString(a.Assigned)
	}
	got := map[int32]map[string]string{}
	var kgens []int32
	for _, ge := range gens {
		kgens = append(kgens, ge.Generation)
		if !slices.Contains(epochs, ge.Generation) {
			t.Errorf("group %s: kwire's epoch %d is no group epoch of the coordinator's records %v", group, ge.Generation, epochs)
		}
		got[ge.Generation] = map[string]string{}
		for _, m := range ge.Members {
			got[ge.Generation][m.MemberID] = assignmentString(m.Assignment)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: members and assignments by epoch, current-assignment records vs kwire (-want +got):\n%s", group, d)
	}
	t.Logf("group %s: group epochs %v, member epochs with records %d, kwire %v", group, epochs, len(want), kgens)
	return kgens
}

// staticReplacements reads the group metadata records for static members
// restarted inside their session (KIP-345): a record of a generation
// already recorded, one member id swapped for another of the same group
// instance id. It maps the old member id to the new.
func staticReplacements(gt GroupTruth) map[string]string {
	out := map[string]string{}
	byInstance := map[int32]map[string]string{}
	for _, r := range gt.Generations {
		prev := byInstance[r.Generation]
		cur := map[string]string{}
		for _, m := range r.Members {
			if m.InstanceID == nil {
				continue
			}
			cur[*m.InstanceID] = m.MemberID
			if old, ok := prev[*m.InstanceID]; ok && old != m.MemberID {
				out[old] = m.MemberID
			}
		}
		byInstance[r.Generation] = cur
	}
	return out
}

// checkDepartures compares how kwire says each member ended with what its
// Java client did and the broker recorded, and returns what it wanted: a
// client that reported closing (close(): LeaveGroup, or a KIP-848
// heartbeat with epoch -1) left, unless it was a classic static member,
// which sends no LeaveGroup and stays in the group until its session
// ends, after the capture (live); one that never did was SIGKILLed: the
// broker expired it, or, a static member restarted inside its session,
// replaced it with its successor (left, the reason naming the successor).
// One whose poll loop blocked past max.poll.interval.ms (a slow_poll
// report; every scenario's slow poll is longer) left by itself: the Java
// heartbeat thread sends LeaveGroup with the reason "consumer poll timeout
// has expired." (KIP-800), which kwire must give as the member's reason.
// Member ids are the clients' own (consumer.groupMetadata()).
func checkDepartures(t *testing.T, truth Truth, gt GroupTruth, g *correlate.Group) map[string]string {
	t.Helper()
	replaced := staticReplacements(gt)
	pollTimeout := map[string]bool{}
	want := map[string]string{}
	for _, raw := range truth.Reports {
		var r struct {
			Report
			InstanceID string `json:"instance_id"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Group != g.Group || r.MemberID == "" {
			continue
		}
		switch {
		case r.Kind == "closing" && r.InstanceID != "" && gt.Consumer == nil:
			want[r.MemberID] = "live"
		case r.Kind == "closing":
			want[r.MemberID] = correlate.MemberLeft
		case r.Kind == "slow_poll":
			want[r.MemberID] = correlate.MemberLeft
			pollTimeout[r.MemberID] = true
		case want[r.MemberID] != "":
		case replaced[r.MemberID] != "":
			want[r.MemberID] = correlate.MemberLeft
		default:
			want[r.MemberID] = correlate.MemberExpired
		}
	}
	got := map[string]string{}
	for _, m := range g.Members {
		got[m.MemberID] = m.Status
		if to := replaced[m.MemberID]; to != "" && !strings.Contains(m.Reason, "replaced by "+to) {
			t.Errorf("group %s: the broker replaced static member %s by %s; kwire's reason for its end: %q", g.Group, m.MemberID, to, m.Reason)
		}
		if pollTimeout[m.MemberID] && !strings.Contains(m.Reason, "poll timeout") {
			t.Errorf("group %s: member %s left on its poll timeout (LeaveGroup reason); kwire's reason for its end: %q", g.Group, m.MemberID, m.Reason)
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: how members ended, the Java clients vs kwire (-want +got):\n%s", g.Group, d)
	}
	return want
}

// checkCoordinators compares the brokers kwire says coordinated g, in
// turn (its coordinator events with a node), with those the Admin client's
// DescribeGroups named during the scenario, where it asked: the same
// nodes in the same order, each move once.
func checkCoordinators(t *testing.T, truth Truth, g *correlate.Group, coords []correlate.CoordinatorEvent) {
	t.Helper()
	var want []int32
	for _, raw := range truth.Reports {
		var r struct {
			Kind, Op string
			Result   map[string]struct {
				Coordinator *int32 `json:"coordinator"`
			} `json:"result"`
		}
		if json.Unmarshal(raw, &r) != nil || r.Kind != "admin" || r.Op != "describe_groups" {
			continue
		}
		if d, ok := r.Result[g.Group]; ok && d.Coordinator != nil && (len(want) == 0 || want[len(want)-1] != *d.Coordinator) {
			want = append(want, *d.Coordinator)
		}
	}
	if len(want) == 0 {
		return
	}
	var got []int32
	for _, ev := range coords {
		if ev.Group == g.Group && ev.ErrorCode == 0 && ev.NodeID >= 0 && (len(got) == 0 || got[len(got)-1] != ev.NodeID) {
			got = append(got, ev.NodeID)
		}
	}
	if !slices.Equal(want, got) {
		t.Errorf("group %s: coordinators in turn, the Admin client's DescribeGroups %v, kwire %v", g.Group, want, got)
	}
	t.Logf("group %s: coordinators %v; kwire counted %d NOT_COORDINATOR, %d COORDINATOR_NOT_AVAILABLE; errors %v",
		g.Group, got, g.Coordinator.NotCoordinator, g.Coordinator.NotAvailable, g.Errors)
}

// checkCommits compares kwire's accepted commits and committed offsets
// with the offset commit records.
func checkCommits(t *testing.T, gt GroupTruth, g *correlate.Group) {
	t.Helper()
	wantN := map[string]int{}
	for _, c := range gt.Commits {
		if c.Offset >= 0 {
			wantN[fmt.Sprintf("%s/%d", c.Topic, c.Partition)]++
		}
	}
	gotN := map[string]int{}
	got := map[string]int64{}
	for _, p := range g.Partitions {
		k := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		if p.Committed != nil {
			got[k] = *p.Committed
		}
		n := int(p.CommitsDropped)
		for _, c := range p.Commits {
			if c.ErrorCode == 0 {
				n++
			}
		}
		if n > 0 {
			gotN[k] = n
		}
	}
	if d := realkafka.DiffMaps(gt.Committed, got); d != "" {
		t.Errorf("group %s: committed offsets, __consumer_offsets vs kwire (-want +got):\n%s", gt.Group, d)
	}
	if d := realkafka.DiffMaps(wantN, gotN); d != "" {
		t.Errorf("group %s: accepted commits per partition, offset commit records vs kwire (-want +got):\n%s", gt.Group, d)
	}
	t.Logf("group %s: %d commit records; committed %v", gt.Group, len(gt.Commits), gt.Committed)
}

// checkHazards fails on a warn or critical hazard not expected of the
// scenario, and on an expected one missing.
// A member_expired hazard must name a member the broker expired
// (expired: member ids), and every one of them.
func checkHazards(t *testing.T, scenario string, s *correlate.Snapshot, expired map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	told := map[string]bool{}
	for _, h := range s.Hazards {
		t.Logf("hazard %s %s (group %s member %s): %s", h.Severity, h.Kind, h.Group, h.MemberID, h.Summary)
		if h.Severity == "info" {
			seen["info "+h.Kind] = true
			continue
		}
		seen[h.Kind] = true
		if h.Kind == correlate.HazardMemberExpired {
			told[h.MemberID] = true
			if !expired[h.MemberID] {
				t.Errorf("hazard member_expired for %s, which the broker did not expire: %s", h.MemberID, h.Summary)
			}
		}
		if !slices.Contains(expectedHazards[scenario], h.Kind) {
			t.Errorf("hazard %s %s: the clients did nothing to earn it: %s", h.Severity, h.Kind, h.Summary)
		}
	}
	for _, k := range expectedHazards[scenario] {
		if !seen[k] {
			t.Errorf("no %s hazard; expected of %s", k, scenario)
		}
	}
	for id := range expired {
		if !told[id] {
			t.Errorf("no member_expired hazard for %s, which the broker expired", id)
		}
	}
	for _, k := range expectedInfo[scenario] {
		if !seen["info "+k] {
			t.Errorf("no info %s hazard; expected of %s", k, scenario)
		}
	}
}

// decodeLine is the decode counters of kwire's stats line.
type decodeLine struct {
	decode.Stats
	ByAPI map[string]int64 `json:"exchanges_by_api"`
}

// checkTraffic compares what kwire decoded and counted with the requests
// the recording relays framed (truth.Requests, by listener; captures made
// before they were recorded have none): every request of every API and
// version an exchange, none undecodable; every Fetch either a consumer's
// or a replica's (the brokers' and the quorum's), and every consumer's
// attributed to one group. Where listeners carry only the brokers' own
// requests (the separate layout's BROKER, and CONTROLLER), kwire must
// count exactly their Fetches as replication, exactly the CLIENT
// listener's as consumption, and take none of their clients for a
// client of the groups.
func checkTraffic(t *testing.T, truth Truth, s *correlate.Snapshot, dec *decodeLine) {
	t.Helper()
	if len(truth.Requests) == 0 {
		return
	}
	want := map[string]int64{}
	fetches := map[string]int64{} // by listener
	var versions []string
	for l, byAPI := range truth.Requests {
		for av, n := range byAPI {
			api, _, _ := strings.Cut(av, " v")
			want[api] += int64(n)
			if api == "Fetch" {
				fetches[l] += int64(n)
			}
			if l != realkafka.ListenerController && !slices.Contains(versions, av) {
				versions = append(versions, av)
			}
		}
	}
	slices.Sort(versions)
	t.Logf("Kafka %s, clients %s, %s layout: requests (client and inter-broker listeners) %v; Fetch by listener %v", truth.Kafka, truth.Clients, truth.Layout, versions, fetches)
	if d := realkafka.DiffMaps(want, dec.ByAPI); d != "" {
		t.Errorf("exchanges by API, the relays' requests vs kwire (-want +got):\n%s", d)
	}
	if dec.DecodeErrors != 0 || dec.Unsupported != 0 || dec.UnknownAPI != 0 {
		t.Errorf("kwire: %d decode errors, %d unsupported versions, %d unknown APIs", dec.DecodeErrors, dec.Unsupported, dec.UnknownAPI)
	}
	st := s.Stats
	var all int64
	for _, n := range fetches {
		all += n
	}
	if st.Fetches+st.ReplicaFetches != all {
		t.Errorf("kwire counted %d consumer and %d replica fetches; the relays framed %d Fetch requests", st.Fetches, st.ReplicaFetches, all)
	}
	// Consumers that are no group's member by the broker's records (an
	// assign() consumer with no group: r_churn's, a Streams instance's
	// restore consumers) are unattributed, as they should be; a member's
	// fetches never are.
	members := memberClients(truth)
	var groupless []string
	for _, u := range s.Unattributed {
		if members[u.ClientID] {
			t.Errorf("kwire: consumption of %s, a member of a group by the broker's records, unattributed (%s)", u.ClientID, u.Status)
		}
		groupless = append(groupless, u.ClientID)
	}
	if st.FetchesAmbiguous != 0 || st.FetchesUnknown != 0 && len(groupless) == 0 {
		t.Errorf("kwire: %d unattributed and %d ambiguous consumer fetches", st.FetchesUnknown, st.FetchesAmbiguous)
	}
	if len(groupless) > 0 {
		t.Logf("kwire: %d fetches of consumers in no group (%v), unattributed", st.FetchesUnknown, groupless)
	}
	t.Logf("kwire: %d consumer fetches (%d attributed), %d replica fetches", st.Fetches, st.FetchesAttributed, st.ReplicaFetches)
	if truth.Layout != realkafka.Separate.String() {
		return
	}
	client := realkafka.Separate.ClientListener()
	if got, want := st.ReplicaFetches, all-fetches[client]; got != want {
		t.Errorf("kwire counted %d replica fetches; the %s and %s listeners carried %d Fetch requests",
			got, realkafka.ListenerBroker, realkafka.ListenerController, want)
	}
	if got, want := st.Fetches, fetches[client]; got != want {
		t.Errorf("kwire counted %d consumer fetches; the %s listener carried %d", got, client, want)
	}
	brokers := map[string]bool{}
	for l, ids := range truth.ClientIDs {
		for _, id := range ids {
			if l != client && !slices.Contains(truth.ClientIDs[client], id) {
				brokers[id] = true
			}
		}
	}
	if len(brokers) == 0 {
		t.Errorf("no client ids of the brokers' own listeners in the truth: %v", truth.ClientIDs)
	}
	for _, c := range s.Clients {
		if brokers[c.ClientID] {
			t.Errorf("kwire tells %q, a client only of the brokers' listeners, as a client (attribution %s, group %s)", c.ClientID, c.Attribution, c.Group)
		}
	}
	for _, g := range s.Groups {
		for _, m := range g.Members {
			if brokers[m.ClientID] {
				t.Errorf("kwire tells %q, a client only of the brokers' listeners, as member %s of group %s", m.ClientID, m.MemberID, g.Group)
			}
		}
	}
}

// kwireRun is what TestRealCaptures reads of one kwire analyze --json:
// its summary, coordinator and generation events, and decode counters.
type kwireRun struct {
	snap   *correlate.Snapshot
	coords []correlate.CoordinatorEvent
	gens   []correlate.GenerationEvent
	dec    *decodeLine
}

// analyze runs kwire analyze --json on capture with ports as the brokers'
// (and args, the truth's kwire_args).
func analyze(t *testing.T, kwire, capture string, ports []int, args ...string) kwireRun {
	t.Helper()
	return story(t, "kwire analyze "+capture, runKwire(t, kwire, "analyze", capture, ports, args...))
}

// runKwire runs kwire command (analyze, read) --json on capture with ports
// as the brokers' and returns its NDJSON.
func runKwire(t *testing.T, kwire, command, capture string, ports []int, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(kwire, append(append([]string{command, "--json", "--port", portList(ports)}, args...), capture)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kwire %s %s: %v\n%s", command, capture, err, stderr.String())
	}
	return out
}

// portList is ports as --port takes them.
func portList(ports []int) string {
	var ps []string
	for _, p := range ports {
		ps = append(ps, strconv.Itoa(p))
	}
	return strings.Join(ps, ",")
}

// story reads kwire's NDJSON output (of what, for messages): its summary,
// coordinator and generation events, and the decode counters of the
// stats line after the summary (nil: none).
func story(t *testing.T, what string, out []byte) kwireRun {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	var r kwireRun
	line := func(kind string, v any) {
		if err := json.Unmarshal(sc.Bytes(), v); err != nil {
			t.Fatalf("%s: %s: %v", what, kind, err)
		}
	}
	for sc.Scan() {
		switch {
		case bytes.Contains(sc.Bytes(), []byte(`"type":"generation"`)):
			var ev correlate.GenerationEvent
			line("generation event", &ev)
			r.gens = append(r.gens, ev)
		case bytes.Contains(sc.Bytes(), []byte(`"type":"coordinator"`)):
			var ev correlate.CoordinatorEvent
			line("coordinator event", &ev)
			r.coords = append(r.coords, ev)
		case bytes.Contains(sc.Bytes(), []byte(`"type":"summary"`)):
			r.snap = new(correlate.Snapshot)
			line("summary", r.snap)
		case bytes.Contains(sc.Bytes(), []byte(`"type":"stats"`)) && r.snap != nil:
			var l struct{ Decode decodeLine }
			line("stats", &l)
			r.dec = &l.Decode
			return r
		}
	}
	if r.snap == nil {
		t.Fatalf("%s wrote no summary line", what)
	}
	return r
}

// memberClients are the client ids of every member the broker's records
// name, of every group and share group of the truth.
func memberClients(truth Truth) map[string]bool {
	out := map[string]bool{}
	for _, gt := range truth.Groups {
		for _, r := range gt.Generations {
			for _, m := range r.Members {
				out[m.ClientID] = true
			}
		}
		if gt.Consumer != nil {
			for _, m := range gt.Consumer.Members {
				out[m.ClientID] = true
			}
		}
		if gt.Streams != nil {
			for _, m := range gt.Streams.Members {
				out[m.ClientID] = true
			}
		}
	}
	for _, st := range truth.Share {
		for _, m := range st.Members {
			out[m.ClientID] = true
		}
	}
	delete(out, "")
	return out
}
