package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// story is what clock skew must not change of an aggregator's output: the
// warn and critical hazards (kind, group, member, partition, severity)
// and the generation, member and commit events, times aside; sorted.
// info is the info hazards, which skew may change (docs/aggregate.md).
func story(t *testing.T, out []byte) (s, info []string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v struct {
			Type, Group, Action, Kind, Severity, Topic, Outcome, Leader, Protocol string
			MemberID                                                              string `json:"member_id"`
			Generation, Partition, Offset                                         *int64
			Members                                                               []struct {
				MemberID   string `json:"member_id"`
				Assignment map[string][]int32
			}
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		switch v.Type {
		case "hazard", "generation", "member", "commit":
		default:
			continue
		}
		b, _ := json.Marshal(v)
		if v.Type == "hazard" && v.Severity == "info" {
			info = append(info, string(b))
			continue
		}
		s = append(s, string(b))
	}
	slices.Sort(s)
	slices.Sort(info)
	return s, info
}

// TestAggregateSkew: one agent's clock off by up to --max-skew (+40ms,
// -40ms: every time it publishes shifted) creates and hides no warn or
// critical hazard and changes no generation, member or commit event of
// the aggregator's output: the same story as with the clocks in step.
// Each broker's agent is shifted in turn (the coordinator's against the
// leaders', and back). Info hazards that compare times across hosts may
// differ; the differences are logged.
func TestAggregateSkew(t *testing.T) {
	for _, set := range []string{"g_xbroker", "altport"} {
		t.Run(set, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(testdataDir(), set+".b?.pcapng"))
			if len(files) != 3 {
				t.Fatalf("want 3 per-broker captures of %s, have %v", set, files)
			}
			type run struct {
				topic   string
				shifted int
				skew    time.Duration
			}
			runs := []run{{topic: "base", shifted: -1}}
			for b := range files {
				for _, skew := range []time.Duration{40 * time.Millisecond, -40 * time.Millisecond} {
					runs = append(runs, run{fmt.Sprintf("b%d%+d", b, skew.Milliseconds()), b, skew})
				}
			}
			var topics []string
			for _, r := range runs {
				topics = append(topics, r.topic)
			}
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var want, wantInfo []string
			for _, r := range runs {
				var specs []agentSpec
				for j, f := range files {
					a := agentSpec{host: fmt.Sprintf("b%d", j), files: []string{f}}
					if j == r.shifted {
						a.skew = r.skew
					}
					specs = append(specs, a)
				}
				url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/" + r.topic
				publishAgents(t, url, specs)
				got, info := story(t, runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s"))
				if r.shifted < 0 {
					want, wantInfo = got, info
					t.Logf("%d generation, member, commit and warn or critical hazard lines; %d info hazards", len(want), len(info))
					continue
				}
				if !slices.Equal(want, got) {
					t.Errorf("agent b%d's clock %+v: the story differs", r.shifted, r.skew)
					diffStory(t, want, got)
				}
				if !slices.Equal(wantInfo, info) {
					t.Logf("agent b%d's clock %+v: info hazards differ (%d, %d with the clocks in step)", r.shifted, r.skew, len(info), len(wantInfo))
				}
			}
		})
	}
}

// diffStory logs the lines only one of want and got has.
func diffStory(t *testing.T, want, got []string) {
	t.Helper()
	n := 0
	for _, w := range want {
		if !slices.Contains(got, w) && n < 10 {
			t.Logf("-%s", w)
			n++
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) && n < 20 {
			t.Logf("+%s", g)
			n++
		}
	}
}
