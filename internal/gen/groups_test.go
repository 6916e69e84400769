package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGroupTruth runs g_stable (cooperative-sticky: generations with
// partitions held back) and checks that the groups truth is consistent
// with itself: every generation's assignments partition the balanced
// topics' partitions exactly once among its members (with what a
// cooperative generation holds back listed as pending), leaders and
// causes name members, and the counts agree with the rest of the truth.
func TestGroupTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kfake cluster and a consumer group")
	}
	s, ok := Lookup("g_stable")
	if !ok {
		t.Fatal("g_stable not registered")
	}
	truth, err := Run(context.Background(), s, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gt := truth.Groups["gs-group"]
	if gt == nil {
		t.Fatalf("no gs-group in the truth: %v", truth.Groups)
	}
	if len(gt.Generations) < 5 {
		t.Fatalf("%d generations, want at least 5 (3 joins, 2 leaves)", len(gt.Generations))
	}
	for _, err := range checkGroupTruth(gt) {
		t.Error(err)
	}
	if gt.Final == nil || gt.Final.State != "Empty" || len(gt.Final.Members) != 0 {
		t.Errorf("final = %+v, want an Empty group after every member left", gt.Final)
	}
	for p, off := range gt.Committed["gs-orders"] {
		if end := truth.EndOffsets["gs-orders"][p]; off != end {
			t.Errorf("partition %s committed %d, end offset %d", p, off, end)
		}
		if got := gt.Fetched["gs-orders"][p]; got < off {
			t.Errorf("partition %s: fetched %d records, but %d are committed", p, got, off)
		}
	}
	for _, n := range truth.Notes {
		for _, w := range []string{"disagree", "differs", "no leader", "not in the leader's plan", "planned"} {
			if strings.Contains(n, w) {
				t.Errorf("note: %s", n)
			}
		}
	}
}

// TestGroupTruthFiles checks the groups truth of every committed capture
// the same way (no cluster needed).
func TestGroupTruthFiles(t *testing.T) {
	files, err := filepath.Glob("../../testdata/*.truth.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var truth Truth
		if err := json.Unmarshal(b, &truth); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for g, gt := range truth.Groups {
			for _, err := range checkGroupTruth(gt) {
				t.Errorf("%s: group %s: %v", filepath.Base(f), g, err)
			}
		}
	}
}

// checkGroupTruth returns every inconsistency in gt.
func checkGroupTruth(gt *GroupTruth) []error {
	var errs []error
	for i, g := range gt.Generations {
		var prev, next *Generation
		if i > 0 {
			prev = &gt.Generations[i-1]
		}
		if i+1 < len(gt.Generations) {
			next = &gt.Generations[i+1]
		}
		for _, err := range checkGeneration(gt.GroupProtocol, g, prev, next) {
			errs = append(errs, fmt.Errorf("generation %d: %w", g.Generation, err))
		}
	}
	for topic, ps := range gt.Fetched {
		for p, n := range ps {
			if _, err := strconv.Atoi(p); err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("fetched %s/%s = %d", topic, p, n))
			}
		}
	}
	return errs
}

// checkGeneration checks one generation: its assignments and pending
// partitions cover the balanced topics exactly once, its leader and
// cause member are members where they must be.
func checkGeneration(protocol string, g Generation, prev, next *Generation) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if prev != nil && g.Generation <= prev.Generation {
		bad("follows generation %d", prev.Generation)
	}
	if _, ok := g.Members[g.Leader]; !ok && (protocol == "classic" || g.Leader != "") {
		bad("leader %q is not a member", g.Leader)
	}
	if g.Completed != (len(g.NotSynced) == 0) {
		bad("completed %v, but not synced: %v", g.Completed, g.NotSynced)
	}
	if len(g.Topics) == 0 {
		bad("no topics")
	}
	for topic, n := range g.Topics {
		owner := map[int32]string{}
		for m, gm := range g.Members {
			for _, p := range gm.Assignment[topic] {
				if o, dup := owner[p]; dup {
					bad("%s/%d assigned to %s and %s", topic, p, o, m)
				}
				owner[p] = m
			}
		}
		for _, p := range g.Pending[topic] {
			if o, dup := owner[p]; dup {
				bad("%s/%d pending but assigned to %s", topic, p, o)
			}
			owner[p] = "pending"
		}
		for p := range n {
			if _, ok := owner[p]; !ok {
				bad("%s/%d neither assigned nor pending", topic, p)
			}
		}
		if int32(len(owner)) != n {
			bad("%s: %d partitions accounted for, the topic has %d", topic, len(owner), n)
		}
	}
	var before map[string]GenMember
	if prev != nil && prev.Generation+1 == g.Generation {
		before = prev.Members
	}
	_, is := g.Members[g.CauseMember]
	_, was := before[g.CauseMember]
	switch g.Cause {
	case CauseMemberJoined:
		if was || !is {
			bad("cause member %q did not join in it", g.CauseMember)
		}
	case CauseMemberLeft, CauseMemberExpired:
		if is || !was {
			bad("cause member %q did not leave before it", g.CauseMember)
		}
	case CauseMetadataChange:
		if !is || !was {
			bad("metadata change by %q, not a member of both generations", g.CauseMember)
		}
	default:
		bad("cause %q", g.Cause)
	}
	if len(g.Pending) > 0 && (next == nil || next.Cause != CauseMetadataChange) {
		bad("holds back %v but no follow-up rebalance comes", g.Pending)
	}
	return errs
}
