package correlate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hazardTruth is what the hazard tests read of a generator truth file: the
// hazards a scenario drove deliberately, and the members the broker
// expired (a generation caused by member_expired).
type hazardTruth struct {
	Case     string `json:"case"`
	Captures []struct {
		File string `json:"file"`
	} `json:"captures"`
	Hazards []truthHazard `json:"hazards"`
	Groups  map[string]struct {
		Generations []struct {
			Cause       string `json:"cause"`
			CauseMember string `json:"cause_member"`
		} `json:"generations"`
	} `json:"groups"`
}

// truthHazard is one hazard a scenario drove (internal/gen Hazard).
type truthHazard struct {
	Kind       string `json:"kind"`
	Group      string `json:"group"`
	Topic      string `json:"topic"`
	Partition  *int32 `json:"partition"`
	MemberID   string `json:"member_id"`
	ClientID   string `json:"client_id"`
	Generation *int32 `json:"generation"`
	// TransactionalID names a transactional producer's hazards.
	TransactionalID string           `json:"transactional_id"`
	Numbers         map[string]int64 `json:"numbers"`
	// Reason is why the broker removed a member (member_expired); Cause
	// the hazard kind that explains this one.
	Reason string `json:"reason"`
	Cause  string `json:"cause"`
}

func loadHazardTruths(t *testing.T) []*hazardTruth {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	var out []*hazardTruth
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var tr hazardTruth
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, &tr)
	}
	return out
}

func hazardEvents(rec *recorder) []*HazardEvent {
	var out []*HazardEvent
	for _, ev := range rec.events {
		if h, ok := ev.(*HazardEvent); ok {
			out = append(out, h)
		}
	}
	return out
}

// TestHazardsCleanCaptures: captures of correct clients (stable groups,
// graceful churn, cooperative and eager rebalances, autocommit, KIP-848,
// lossy and mid-stream files, per-broker files alone) produce no hazard
// above info, but for the members the scenario killed: member_expired.
// False alarms are bugs.
func TestHazardsCleanCaptures(t *testing.T) {
	ran := false
	for _, tr := range loadHazardTruths(t) {
		if strings.HasPrefix(tr.Case, "h_") {
			continue
		}
		ran = true
		expired := map[string]bool{}
		for _, g := range tr.Groups {
			for _, gen := range g.Generations {
				if gen.Cause == CauseMemberExpired {
					expired[gen.CauseMember] = true
				}
			}
		}
		for _, h := range tr.Hazards {
			if h.Kind == HazardMemberExpired {
				expired[h.MemberID] = true
			}
		}
		var inputs [][]string
		var all []string
		for _, c := range tr.Captures {
			inputs = append(inputs, []string{c.File})
			if strings.Count(c.File, ".") > 1 {
				all = append(all, c.File) // one file per broker
			}
		}
		if len(all) > 1 {
			inputs = append(inputs, all)
		}
		for _, files := range inputs {
			t.Run(strings.Join(files, "+"), func(t *testing.T) {
				_, rec := analyze(t, files...)
				for _, ev := range hazardEvents(rec) {
					if ev.Severity == SeverityInfo || (ev.Kind == HazardMemberExpired && expired[ev.MemberID]) {
						continue
					}
					t.Errorf("false alarm: %s %s: %s", ev.Severity, ev.Kind, ev.Summary)
				}
			})
		}
	}
	if !ran {
		t.Skip("no clean captures in testdata")
	}
}

// TestHazardScenarios: each h_<kind> capture, in which real clients made
// the mistakes deliberately, yields the hazards its truth lists, with their
// group, partition, member and numbers; and no critical hazard it does not
// list.
func TestHazardScenarios(t *testing.T) {
	ran := false
	for _, tr := range loadHazardTruths(t) {
		if !strings.HasPrefix(tr.Case, "h_") {
			continue
		}
		ran = true
		t.Run(tr.Case, func(t *testing.T) {
			_, rec := analyze(t, tr.Captures[0].File)
			evs := hazardEvents(rec)
			matched := map[*HazardEvent]bool{}
			// The most specific truths first: a hazard of a partition is
			// not taken by its kind's hazard of no partition.
			wants := slices.Clone(tr.Hazards)
			slices.SortStableFunc(wants, func(a, b truthHazard) int { return specificity(b) - specificity(a) })
			for _, want := range wants {
				var why []string
				found := false
				for _, ev := range evs {
					if matched[ev] {
						continue // one event answers one hazard of the truth
					}
					if msg := matchHazard(want, ev); msg == "" {
						matched[ev], found = true, true
						break
					} else if ev.Kind == want.Kind {
						why = append(why, msg)
					}
				}
				if !found {
					t.Errorf("%s %s/%s/%v member %q client %q %v not found (%s)", want.Kind, want.Group, want.Topic,
						ptrStr(want.Partition), want.MemberID, want.ClientID, want.Numbers, strings.Join(why, "; "))
				}
			}
			for _, ev := range evs {
				if ev.Severity == SeverityCritical && !matched[ev] {
					t.Errorf("unexpected critical hazard: %s: %s", ev.Kind, ev.Summary)
				}
			}
		})
	}
	if !ran {
		t.Skip("no hazard scenario captures in testdata (go run ./cmd/kwire-gen)")
	}
}

// specificity counts the fields a truth hazard names.
func specificity(h truthHazard) int {
	n := len(h.Numbers)
	for _, set := range []bool{h.Group != "", h.Topic != "", h.Partition != nil, h.MemberID != "", h.ClientID != "",
		h.Generation != nil, h.TransactionalID != "", h.Reason != "", h.Cause != ""} {
		if set {
			n++
		}
	}
	return n
}

func ptrStr(p *int32) any {
	if p == nil {
		return "-"
	}
	return *p
}

// matchHazard returns "" when ev is the truth's hazard, else what differs.
func matchHazard(want truthHazard, ev *HazardEvent) string {
	switch {
	case ev.Kind != want.Kind:
		return "kind"
	case want.Group != "" && ev.Group != want.Group:
		return "group " + ev.Group
	case want.Topic != "" && ev.Topic != want.Topic:
		return "topic " + ev.Topic
	case want.Partition != nil && (ev.Partition == nil || *ev.Partition != *want.Partition):
		return "partition"
	case want.MemberID != "" && ev.MemberID != want.MemberID:
		return "member " + ev.MemberID
	case want.Generation != nil && (ev.Generation == nil || *ev.Generation != *want.Generation):
		return "generation"
	case want.TransactionalID != "" && ev.TransactionalID != want.TransactionalID:
		return "transactional id " + ev.TransactionalID
	case !clientMatches(want.ClientID, ev):
		return "client " + ev.ClientID
	case want.Reason != "" && ev.Reason != want.Reason:
		return "reason " + ev.Reason
	case want.Cause != "" && (ev.Cause == nil || ev.Cause.Kind != want.Cause):
		return "cause"
	}
	for key, v := range want.Numbers {
		got, ok := hazardNumber(want.Kind, key, ev)
		if !ok {
			continue // a number kwire does not report (the client's view)
		}
		if bound := kind(want.Kind, key) == "non_owner_fetch.records"; got != v && !(bound && got > 0 && got <= v) {
			return key + " " + itoa64(got) + " want " + itoa64(v)
		}
	}
	return ""
}

// clientMatches compares the truth's client id with ev's: "a,b" lists the
// clients of a storm, "x-*" a family of ids.
func clientMatches(want string, ev *HazardEvent) bool {
	switch {
	case want == "":
		return true
	case strings.Contains(want, ","):
		return slices.Equal(strings.Split(want, ","), ev.ClientIDs)
	}
	return ev.ClientID == want
}

// kind names a truth number of a kind.
func kind(k, key string) string { return k + "." + key }

// hazardNumber returns ev's value for a truth number of kind; false when
// kwire has no such number. Records a zombie fetched are counted by the
// clients over the whole scenario; kwire reports the first fetch: a lower
// bound.
func hazardNumber(kind, key string, ev *HazardEvent) (int64, bool) {
	v := func(p *int64) (int64, bool) {
		if p == nil {
			return -1, true
		}
		return *p, true
	}
	switch kind + "." + key {
	case "commit_regression.committed", "commit_gap.committed", "commit_beyond_fetch.committed",
		"commit_rejected.offset", "non_owner_commit.offset", "txn_offset_commit_rejected.offset", "txn_offsets_aborted.offset":
		return v(ev.Offset)
	case "share_redelivery.offset":
		return v(ev.Offset)
	case "share_ack_lost.first_offset":
		return v(ev.FromOffset)
	case "share_ack_lost.acquisition_lock_timeout_ms":
		return ev.LockTimeoutMillis, true
	case "commit_regression.previous", "commit_gap.committed_before", "commit_rejected.committed", "non_owner_commit.previous",
		"txn_offsets_aborted.committed":
		return v(ev.PreviousOffset)
	case "hanging_transaction.last_stable_offset":
		return v(ev.LastStableOffset)
	case "hanging_transaction.high_watermark":
		return v(ev.HighWatermark)
	case "commit_gap.never_committed":
		if len(ev.MissingOffsets) != 1 {
			return -1, true
		}
		return ev.MissingOffsets[0], true
	case "commit_beyond_fetch.max_delivered_offset":
		n, _ := v(ev.DeliveredTo)
		return n - 1, true
	case "commit_beyond_fetch.high_watermark":
		return v(ev.HighWatermark)
	case "hanging_transaction.transaction_timeout_ms":
		return int64(ev.TransactionTimeoutMillis), true
	case "commit_rejected.error_code", "inconsistent_group_protocol.error_code", "zombie_producer.error_code",
		"txn_offset_commit_rejected.error_code":
		return int64(ev.ErrorCode), true
	case "non_owner_fetch.owner_generation":
		if ev.OwnerGeneration == nil {
			return -1, true
		}
		return int64(*ev.OwnerGeneration), true
	case "non_owner_fetch.records":
		return v(ev.Records)
	case "txn_offsets_aborted.replayed":
		return v(ev.Replayed)
	case "txn_offsets_aborted.from":
		return v(ev.FromOffset)
	case "txn_offsets_aborted.to":
		return v(ev.ToOffset)
	case "offset_reset.from":
		return v(ev.FromOffset)
	case "offset_reset.to":
		return v(ev.ToOffset)
	case "offset_reset.skipped":
		return v(ev.Skipped)
	case "offset_reset.log_start_offset":
		return v(ev.LogStartOffset)
	case "member_expired.session_timeout_ms", "heartbeat_late.session_timeout_ms":
		// A KIP-848 group's session timeout is the broker's config, not
		// on the wire: kwire does not report it.
		return int64(ev.SessionTimeoutMillis), ev.SessionTimeoutMillis > 0
	case "member_expired.rebalance_timeout_ms":
		return int64(ev.RebalanceTimeoutMillis), true
	case "rebalance_storm.rebalance_timeout_ms", "rebalance_slow.rebalance_timeout_ms":
		return int64(ev.RebalanceTimeoutMillis), true
	case "producer_acks_weak.acks":
		if ev.Acks == nil {
			return -1, true
		}
		return int64(*ev.Acks), true
	}
	return 0, false
}

// TestHazardSnapshot: the Snapshot lists the hazards most severe first and
// counts them by severity and, per group, by kind; two runs over the same
// capture give the same hazards (offline determinism).
func TestHazardSnapshot(t *testing.T) {
	const file = "h_commit_gap.pcapng"
	if _, err := os.Stat(filepath.Join("..", "testdata", file)); err != nil {
		t.Skip("no " + file + " in testdata")
	}
	c, rec := analyze(t, file)
	s := c.Snapshot()
	evs := hazardEvents(rec)
	if len(s.Hazards) != len(evs) || len(evs) == 0 {
		t.Fatalf("snapshot lists %d hazards, %d were emitted", len(s.Hazards), len(evs))
	}
	counts := map[string]int{SeverityCritical: 0, SeverityWarn: 0, SeverityInfo: 0}
	for i, h := range s.Hazards {
		counts[h.Severity]++
		if i > 0 && SeverityRank(h.Severity) > SeverityRank(s.Hazards[i-1].Severity) {
			t.Errorf("hazard %d (%s) after a less severe one", i, h.Severity)
		}
	}
	if d := diff(counts, s.HazardCounts); d != "" {
		t.Errorf("hazard counts (-want +got):\n%s", d)
	}
	if s.Hazards[0].Kind != HazardCommitGap || counts[SeverityCritical] != 1 {
		t.Errorf("first hazard %s, %d critical: want the one commit_gap first", s.Hazards[0].Kind, counts[SeverityCritical])
	}
	g := findGroup(s, "hcg-group")
	n := 0
	for _, hc := range g.Hazards {
		n += hc.Count
	}
	if n != len(s.Hazards) || len(g.Hazards) == 0 || g.Hazards[0].Kind != HazardCommitGap {
		t.Errorf("group hazard counts %+v, want %d hazards, commit_gap first", g.Hazards, len(s.Hazards))
	}
	_, rec2 := analyze(t, file)
	if d := diff(evs, hazardEvents(rec2)); d != "" {
		t.Errorf("a second run differs (-first +second):\n%s", d)
	}
}
