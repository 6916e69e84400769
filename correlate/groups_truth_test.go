package correlate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
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
	Groups  map[string]*groupTruth `json:"groups"`
	Hazards []struct {
		Kind     string `json:"kind"`
		Group    string `json:"group"`
		MemberID string `json:"member_id"`
	} `json:"hazards"`
}

// groupTruth is one group of the truth (internal/gen GroupTruth).
type groupTruth struct {
	GroupProtocol string            `json:"group_protocol"`
	Generations   []truthGeneration `json:"generations"`
	// Final is the group at the end (DescribeGroups): its members had
	// not left.
	Final *struct {
		State   string `json:"state"`
		Members []struct {
			MemberID string `json:"member_id"`
		} `json:"members"`
	} `json:"final"`
	Fetched map[string]map[string]int64 `json:"fetched"`
}

type truthGeneration struct {
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
	// StaticRejoins: static members that restarted during the generation
	// and took over their old member's place under a new member id, with
	// no rebalance; the generation lists the member id it was formed with.
	StaticRejoins []struct {
		InstanceID  string `json:"instance_id"`
		OldMemberID string `json:"old_member_id"`
		NewMemberID string `json:"new_member_id"`
		ClientID    string `json:"client_id"`
	} `json:"static_rejoins"`
}

func loadGroupsTruth(t *testing.T, path string) *groupsTruth {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr groupsTruth
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &tr
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
// assignments and causes; that the generation events kwire emitted say
// the same as its final state; that static members that restarted are
// reported as the truth lists them; and that each group's fetched records
// per partition equal what its members' clients read.
func TestGroupsTruth(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	n := 0
	for _, path := range paths {
		tr := loadGroupsTruth(t, path)
		if len(tr.Groups) == 0 {
			continue
		}
		n++
		t.Run(tr.Case, func(t *testing.T) {
			c, rec := analyze(t, tr.captureFiles()...)
			checkGroupsTruth(t, tr, c, rec)
		})
	}
	if n == 0 {
		t.Fatal("no truth file records groups: run 'make captures'")
	}
}

// TestGroupsTruthTLS is TestGroupsTruth on the TLS captures of kgo groups
// (testdata/tls: kfake over TLS 1.2 and 1.3), decrypted with their key
// logs: the generations, leaders, causes, members and assignments the
// clients saw, the records they fetched, and no hazard above info (issue
// 17: the same story as in clear). (The kcat captures record no
// generations: kcat reports none.)
func TestGroupsTruthTLS(t *testing.T) {
	dir := filepath.Join("..", "testdata", "tls")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.truth.json"))
	n := 0
	for _, path := range paths {
		tr := loadGroupsTruth(t, path)
		gens := 0
		for _, g := range tr.Groups {
			gens += len(g.Generations)
		}
		if gens == 0 {
			continue
		}
		n++
		t.Run(tr.Case, func(t *testing.T) {
			keys, err := capture.LoadTLSKeys([]string{filepath.Join(dir, tr.Case+".keylog")}, false)
			if err != nil {
				t.Fatal(err)
			}
			files := tr.captureFiles()
			for i, f := range files {
				files[i] = filepath.Join(dir, f)
			}
			src, err := capture.OpenFiles(files, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			rec := &recorder{}
			p := &pipeline{c: New(nil, rec)}
			p.dec = decode.New(p, nil)
			tls := capture.DecryptTLS(p, keys)
			if err := src.Run(context.Background(), tls); err != nil {
				t.Fatal(err)
			}
			p.c.Close(p.last)
			if st := tls.Stats(); st.TLSConns == 0 || st.TLSDecrypted != st.TLSConns {
				t.Fatalf("TLS stats %+v: want every connection decrypted", st)
			}
			checkGroupsTruth(t, tr, p.c, rec)
			for _, ev := range hazardEvents(rec) { // a clean run: as in the clear-text captures
				if ev.Severity != SeverityInfo {
					t.Errorf("hazard %s %s: %s", ev.Severity, ev.Kind, ev.Summary)
				}
			}
		})
	}
	if n < 2 {
		t.Fatalf("%d TLS truth files record generations, want 2 (tls12, tls13): run 'make captures'", n)
	}
}

// checkGroupsTruth compares what c found of the truth's groups with it.
func checkGroupsTruth(t *testing.T, tr *groupsTruth, c *Correlator, rec *recorder) {
	s := c.Snapshot()
	for _, name := range slices.Sorted(maps.Keys(tr.Groups)) {
		g := tr.Groups[name]
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
		for i := range got.Generations {
			have[got.Generations[i].Generation] = genOf(&got.Generations[i])
		}
		for _, gen := range slices.Sorted(maps.Keys(want)) {
			w := want[gen]
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
		checkEmitted(t, name, rec, have)
		checkStaticRejoins(t, name, g, got, rec)
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
}

// genOf reduces a kwire generation to what the truth records.
func genOf(e *GenerationEvent) truthGen {
	v := truthGen{Protocol: e.Protocol, Leader: e.Leader, Cause: e.Cause.Kind, CauseMember: e.Cause.Member}
	for _, m := range e.Members {
		v.Members = append(v.Members, memberLine(m.MemberID, m.ClientID, m.InstanceID, m.Assignment))
	}
	sort.Strings(v.Members)
	return v
}

// checkEmitted: the last generation event emitted for each generation of
// group says what the final state says (events are the NDJSON output).
func checkEmitted(t *testing.T, group string, rec *recorder, have map[int32]truthGen) {
	t.Helper()
	emitted := map[int32]truthGen{}
	for _, ev := range rec.events {
		if ge, ok := ev.(*GenerationEvent); ok && ge.Group == group {
			emitted[ge.Generation] = genOf(ge)
		}
	}
	if d := diff(have, emitted); d != "" {
		t.Errorf("%s: generation events differ from the final state (-final +events):\n%s", group, d)
	}
}

// checkStaticRejoins: a static member that restarted during a generation
// (truth static_rejoins) leaves the generation as it was formed (compared
// above) and is reported by member events: the old member id left,
// replaced; the new one joined in that generation with the same instance
// id, and owns the old member's assignment.
func checkStaticRejoins(t *testing.T, group string, g *groupTruth, got *Group, rec *recorder) {
	t.Helper()
	for _, tg := range g.Generations {
		for _, rj := range tg.StaticRejoins {
			var joined, left *MemberEvent
			for _, ev := range rec.events {
				m, ok := ev.(*MemberEvent)
				switch {
				case !ok || m.Group != group:
				case m.MemberID == rj.NewMemberID && m.Action == MemberJoined:
					joined = m
				case m.MemberID == rj.OldMemberID && m.Action != MemberJoined:
					left = m
				}
			}
			switch {
			case joined == nil:
				t.Errorf("%s: no joined event for %s, which replaced %s", group, rj.NewMemberID, rj.OldMemberID)
			case strVal(joined.InstanceID) != rj.InstanceID || joined.ClientID != rj.ClientID || joined.Generation != tg.Generation ||
				!strings.Contains(joined.Reason, rj.OldMemberID):
				t.Errorf("%s: %s joined as %+v, want instance %s, client %s, generation %d, replacing %s",
					group, rj.NewMemberID, *joined, rj.InstanceID, rj.ClientID, tg.Generation, rj.OldMemberID)
			}
			if left == nil || left.Action != MemberLeft || !strings.Contains(left.Reason, rj.NewMemberID) {
				t.Errorf("%s: %s replaced by %s: departure %+v, want left naming its replacement", group, rj.OldMemberID, rj.NewMemberID, left)
			}
			// The replacement owns what the old member was assigned in
			// the latest generation listing either of them.
			var want map[string][]int32
			for _, later := range g.Generations {
				if m, ok := later.Members[rj.NewMemberID]; ok {
					want = m.Assignment
				} else if m, ok := later.Members[rj.OldMemberID]; ok {
					want = m.Assignment
				}
			}
			for _, m := range got.Members {
				if m.MemberID == rj.NewMemberID && diff(sortedAssignment(want), sortedAssignment(m.Assignment)) != "" {
					t.Errorf("%s: %s owns %v, want %v (what %s was assigned)", group, rj.NewMemberID, m.Assignment, want, rj.OldMemberID)
				}
			}
		}
	}
}
