package correlate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// groupsTruth is the "groups" part of a generator truth file: recorded
// from the clients (balancer plans, assignment callbacks, fetch hooks) and
// the broker (DescribeGroups, OffsetFetch), scripted causes; never kwire.
type groupsTruth struct {
	Case     string `json:"case"`
	Captures []struct {
		File  string `json:"file"`
		Nodes []int  `json:"nodes"`
	} `json:"captures"`
	Groups map[string]struct {
		GroupProtocol string `json:"group_protocol"`
		Generations   []struct {
			Generation  int32  `json:"generation"`
			Protocol    string `json:"protocol"`
			Leader      string `json:"leader"`
			Cause       string `json:"cause"`
			CauseMember string `json:"cause_member"`
			Members     map[string]struct {
				ClientID   string             `json:"client_id"`
				InstanceID *string            `json:"instance_id"`
				Assignment map[string][]int32 `json:"assignment"`
			} `json:"members"`
		} `json:"generations"`
		Fetched map[string]map[string]int64 `json:"fetched"`
	} `json:"groups"`
}

// captureFiles returns the files to analyse together: a combined capture
// if there is one, else every per-broker file.
func (tr *groupsTruth) captureFiles() []string {
	for _, c := range tr.Captures {
		if len(c.Nodes) > 1 {
			return []string{c.File}
		}
	}
	files := make([]string, len(tr.Captures))
	for i, c := range tr.Captures {
		files[i] = c.File
	}
	return files
}

// truthGen is a generation reduced to what the truth records.
type truthGen struct {
	Protocol, Leader, Cause, CauseMember string
	Members                              []string // "id client instance assignment", sorted
}

func memberLine(id, client string, instance *string, a map[string][]int32) string {
	inst := "-"
	if instance != nil {
		inst = *instance
	}
	var topics []string
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		topics = append(topics, fmt.Sprintf("%s%v", t, ps))
	}
	sort.Strings(topics)
	return fmt.Sprintf("%s %s %s %s", id, client, inst, strings.Join(topics, ","))
}

// TestGroupsTruth checks, for every capture whose truth records groups,
// that kwire's generations equal the clients' and broker's: generation
// numbers, protocol, leader, members with client and instance ids,
// assignments and causes; and that each group's fetched records per
// partition equal what its members' clients read.
func TestGroupsTruth(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	n := 0
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var tr groupsTruth
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(tr.Groups) == 0 {
			continue
		}
		n++
		t.Run(tr.Case, func(t *testing.T) {
			c, _ := analyze(t, tr.captureFiles()...)
			s := c.Snapshot()
			for name, g := range tr.Groups {
				got := findGroup(s, name)
				if got == nil {
					t.Errorf("group %s not found", name)
					continue
				}
				want := map[int32]truthGen{}
				for _, tg := range g.Generations {
					v := truthGen{Protocol: tg.Protocol, Leader: tg.Leader, Cause: tg.Cause, CauseMember: tg.CauseMember}
					for id, m := range tg.Members {
						v.Members = append(v.Members, memberLine(id, m.ClientID, m.InstanceID, m.Assignment))
					}
					sort.Strings(v.Members)
					want[tg.Generation] = v
				}
				have := map[int32]truthGen{}
				for _, e := range got.Generations {
					v := truthGen{Protocol: e.Protocol, Leader: e.Leader, Cause: e.Cause.Kind, CauseMember: e.Cause.Member}
					for _, m := range e.Members {
						v.Members = append(v.Members, memberLine(m.MemberID, m.ClientID, m.InstanceID, m.Assignment))
					}
					sort.Strings(v.Members)
					have[e.Generation] = v
				}
				for gen, w := range want {
					h, ok := have[gen]
					switch {
					case !ok:
						t.Errorf("%s generation %d: not found", name, gen)
					case !reflect.DeepEqual(w, h):
						t.Errorf("%s generation %d:\n-want %+v\n+got  %+v", name, gen, w, h)
					}
				}
				for gen := range have {
					if _, ok := want[gen]; !ok {
						t.Errorf("%s generation %d: found, but the clients never saw it", name, gen)
					}
				}
				for topic, parts := range g.Fetched {
					for p, records := range parts {
						pi, _ := strconv.Atoi(p)
						if gp := findPartition(s, name, topic, int32(pi)); gp == nil || gp.Records != records {
							var got int64 = -1
							if gp != nil {
								got = gp.Records
							}
							t.Errorf("%s %s/%s fetched records: got %d, want %d", name, topic, p, got, records)
						}
					}
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no truth file records groups: run 'make captures'")
	}
}
