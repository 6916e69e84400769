package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/captest"
)

// schemaDoc is docs/schema.md.
func schemaDoc(t *testing.T) string {
	t.Helper()
	return string(readFile(t, filepath.Join("..", "..", "docs", "schema.md")))
}

// recipe is one jq one-liner of docs/schema.md's Recipes: the jq
// arguments before the program, and the program.
type recipe struct {
	title   string
	args    []string
	program string
}

var recipeBlock = regexp.MustCompile("(?s)\n### ([^\n]+)\n.*?```sh\nkwire analyze --json capture.pcapng \\| jq ([^']*)'(.*?)'\n```")

// recipes reads the Recipes section: a ### heading per recipe, and under
// it one sh block `kwire analyze --json capture.pcapng | jq ARGS 'PROGRAM'`.
func recipes(t *testing.T) map[string]recipe {
	t.Helper()
	doc := schemaDoc(t)
	_, sec, ok := strings.Cut(doc, "\n## Recipes\n")
	if !ok {
		t.Fatal("docs/schema.md has no Recipes section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	out := map[string]recipe{}
	for _, m := range recipeBlock.FindAllStringSubmatch("\n"+sec, -1) {
		out[m[1]] = recipe{title: m[1], args: strings.Fields(m[2]), program: m[3]}
	}
	if n := strings.Count(sec, "\n### "); n != len(out) {
		t.Fatalf("docs/schema.md's Recipes have %d headings but %d blocks read as `kwire analyze --json capture.pcapng | jq ARGS 'PROGRAM'`", n, len(out))
	}
	return out
}

// run runs the recipe's jq on input, its --arg and --argjson values
// replaced by those in set (every one the recipe takes must be set).
func (r recipe) run(t *testing.T, jq string, input []byte, set map[string]string) []byte {
	t.Helper()
	args := slices.Clone(r.args)
	for i := 0; i < len(args); i++ {
		if args[i] != "--arg" && args[i] != "--argjson" {
			continue
		}
		if i+2 >= len(args) {
			t.Fatalf("%s: %s without a name and a value", r.title, args[i])
		}
		v, ok := set[args[i+1]]
		if !ok {
			t.Fatalf("%s: the test gives no value for $%s", r.title, args[i+1])
		}
		args[i+2] = v
		i += 2
	}
	cmd := exec.Command(jq, append(args, r.program)...)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: jq %s: %v: %s", r.title, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// TestRecipes runs every jq one-liner of docs/schema.md's Recipes, as
// written there, with the real jq on kwire analyze --json of committed
// captures, and checks each answer against kwire's own: the owner of a
// partition against the summary of the capture cut at that time, the
// rejected commits against the summary's count, the records counted
// once against the union of the hazards' ranges, the lag and health
// against h_lag's truth; and the Times section's jq def of milliseconds
// against ts_ms.
func TestRecipes(t *testing.T) {
	jq := needTool(t, "jq", "the docs' jq recipes are run with it")
	rs := recipes(t)
	checks := map[string]func(*testing.T, string, recipe){
		"Owner of a partition at a time":                checkOwnerRecipe,
		"Rejected commits":                              checkRejectedRecipe,
		"Records lost or processed again, counted once": checkOnceRecipe,
		"Lag now, in records and seconds, and health":   checkLagRecipe,
	}
	for title, r := range rs {
		check := checks[title]
		if check == nil {
			t.Errorf("docs/schema.md has a recipe %q that TestRecipes does not check", title)
			continue
		}
		t.Run(title, func(t *testing.T) { check(t, jq, r) })
	}
	for title := range checks {
		if _, ok := rs[title]; !ok {
			t.Errorf("docs/schema.md has no recipe %q", title)
		}
	}
	t.Run("Times: ms", func(t *testing.T) { checkMillisDef(t, jq) })
}

// checkMillisDef runs the jq def of docs/schema.md's Times on every ts
// of an analyze run: it must give each line's ts_ms.
func checkMillisDef(t *testing.T, jq string) {
	_, sec, _ := strings.Cut(schemaDoc(t), "\n## Times\n")
	_, def, ok := strings.Cut(sec, "```jq\n")
	def, _, ok2 := strings.Cut(def, "```")
	if !ok || !ok2 || !strings.Contains(def, "def ms:") {
		t.Fatal("docs/schema.md's Times has no ```jq block with def ms")
	}
	out := runKwire(t, "analyze", "--json", filepath.Join(testdataDir(), "g_848.pcapng"))
	r := recipe{title: "def ms", args: []string{"-c"}, program: def + `[(.ts | ms), .ts_ms]`}
	lines := nonEmptyLines(r.run(t, jq, out, nil))
	for _, l := range lines {
		var v [2]int64
		if err := json.Unmarshal([]byte(l), &v); err != nil || v[0] != v[1] {
			t.Errorf("def ms gives %s, want ts_ms twice (%v)", l, err)
		}
	}
	if len(lines) < 10 {
		t.Errorf("only %d lines", len(lines))
	}
}

// ownerView is what the summary says of owners.
type ownerView struct {
	TS     string `json:"ts"`
	Groups []struct {
		Group      string `json:"group"`
		State      string `json:"state"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Owner     string `json:"owner"`
		} `json:"partitions"`
	} `json:"groups"`
}

// checkOwnerRecipe asks the recipe, on the whole capture, who owned each
// partition at the end of copies of it cut at several times, and
// compares with those copies' summaries (the owner, at their end, of
// every partition of a group that is stable then).
func checkOwnerRecipe(t *testing.T, jq string, r recipe) {
	compared := 0
	for _, name := range []string{"group", "g_848", "g_churn", "h_member_expired"} {
		src := filepath.Join(testdataDir(), name+".pcapng")
		whole := runKwire(t, "analyze", "--json", src)
		for _, frac := range []float64{0.2, 0.35, 0.5, 0.65, 0.8} {
			b, err := captest.Window(readFile(t, src), 0, frac)
			if err != nil {
				t.Fatal(err)
			}
			cut := filepath.Join(t.TempDir(), fmt.Sprintf("%s.%g.pcapng", name, frac))
			if err := os.WriteFile(cut, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var s ownerView
			summaryLine(t, runKwire(t, "analyze", "--json", cut), &s)
			for _, g := range s.Groups {
				if g.State != "stable" {
					continue // mid-rebalance: the owner is not settled
				}
				for _, p := range g.Partitions {
					want := cmp.Or(p.Owner, "none")
					got := strings.TrimSpace(string(r.run(t, jq, whole, map[string]string{
						"group": g.Group, "topic": p.Topic, "partition": strconv.Itoa(int(p.Partition)), "at": s.TS})))
					if got != want {
						t.Errorf("%s cut at %g (%s): %s %s/%d: the recipe says %s, the summary %s", name, frac, s.TS, g.Group, p.Topic, p.Partition, got, want)
					}
					compared++
				}
			}
		}
	}
	if compared < 50 {
		t.Errorf("only %d owners compared: the captures' groups were rarely stable where they were cut", compared)
	}
	t.Logf("%d owners compared", compared)
}

// checkRejectedRecipe: the recipe lists as many commits as the summary
// counts rejected, each with its error.
func checkRejectedRecipe(t *testing.T, jq string, r recipe) {
	total := 0
	for _, name := range []string{"h_commit_rejected", "h_848_rejected_commit", "group", "h_txn_offset_commit_rejected"} {
		out := runKwire(t, "analyze", "--json", filepath.Join(testdataDir(), name+".pcapng"))
		var s struct {
			Stats struct {
				CommitsRejected int `json:"commits_rejected"`
			} `json:"stats"`
		}
		summaryLine(t, out, &s)
		lines := nonEmptyLines(r.run(t, jq, out, nil))
		if len(lines) != s.Stats.CommitsRejected {
			t.Errorf("%s: the recipe lists %d rejected commits, the summary counts %d", name, len(lines), s.Stats.CommitsRejected)
		}
		for _, l := range lines {
			var c struct {
				Error string `json:"error"`
				TS    string `json:"ts"`
			}
			if err := json.Unmarshal([]byte(l), &c); err != nil || c.Error == "" || c.TS == "" {
				t.Errorf("%s: %s: want a commit with its ts and error (%v)", name, l, err)
			}
		}
		total += len(lines)
	}
	if total == 0 {
		t.Error("no rejected commit in captures made to have them")
	}
}

// checkOnceRecipe: per group and what, the recipe's count is the union
// of the offsets the summary's hazards' ranges name, by partition; on
// captures where hazards name the same records, fewer than their sum.
func checkOnceRecipe(t *testing.T, jq string, r recipe) {
	overlapping := 0
	for _, name := range []string{"h_commit_rejected", "h_non_owner_commit", "h_reset_regression", "h_member_expired",
		"h_txn_offsets_aborted", "h_share_redelivery", "h_commit_gap", "h_offset_reset"} {
		out := runKwire(t, "analyze", "--json", filepath.Join(testdataDir(), name+".pcapng"))
		var s struct {
			Hazards []correlate.HazardEvent `json:"hazards"`
		}
		summaryLine(t, out, &s)
		type key struct{ group, what string }
		union, sum := map[key]int64{}, map[key]int64{}
		spans := map[string]*correlate.Spans{}
		for _, h := range s.Hazards {
			if h.Range == nil {
				continue
			}
			k := key{h.Group, h.Range.What}
			sk := fmt.Sprint(h.Group, "\x00", h.Range.What, "\x00", h.Topic, "\x00", *h.Partition)
			if spans[sk] == nil {
				spans[sk] = &correlate.Spans{}
			}
			before := spans[sk].Count()
			spans[sk].Add(correlate.Span{First: h.Range.FirstOffset, Last: h.Range.LastOffset})
			union[k] += spans[sk].Count() - before
			sum[k] += h.Range.LastOffset - h.Range.FirstOffset + 1
		}
		got := map[key]int64{}
		for _, l := range nonEmptyLines(r.run(t, jq, out, nil)) {
			var x struct {
				Group, What string
				Records     int64
			}
			if err := json.Unmarshal([]byte(l), &x); err != nil {
				t.Fatalf("%s: %s: %v", name, l, err)
			}
			got[key{x.Group, x.What}] = x.Records
		}
		if fmt.Sprint(got) != fmt.Sprint(union) {
			t.Errorf("%s: the recipe counts %v, the hazards' ranges merged %v", name, got, union)
		}
		for k := range union {
			if sum[k] > union[k] {
				overlapping++
			}
		}
	}
	if overlapping == 0 {
		t.Error("no capture has hazards naming the same records: the recipe's counting once is not tested")
	}
}

// checkLagRecipe: on h_lag, each partition's lag is its truth's end
// minus committed offset, its lag in seconds the age of the record at
// the committed offset (within 0.1 s, the producer's pace), and each
// group's worst health the state its consumer was driven into.
func checkLagRecipe(t *testing.T, jq string, r recipe) {
	var tr lagTruth
	if err := json.Unmarshal(readFile(t, filepath.Join(testdataDir(), "h_lag.truth.json")), &tr); err != nil {
		t.Fatal(err)
	}
	var ends struct {
		EndOffsets map[string]map[string]int64 `json:"end_offsets"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(testdataDir(), "h_lag.truth.json")), &ends); err != nil {
		t.Fatal(err)
	}
	out := runKwire(t, "analyze", "--json", "--health-window", "4s", filepath.Join(testdataDir(), "h_lag.pcapng"))
	var s struct {
		TSMillis int64 `json:"ts_ms"`
	}
	summaryLine(t, out, &s)
	rank := map[string]int{"ok": 1, "lagging": 2, "rewind": 3, "stalled": 4, "stopped": 5}
	worst := map[string]string{}
	rows := 0
	for _, l := range nonEmptyLines(r.run(t, jq, out, nil)) {
		f := strings.Split(l, "\t")
		if len(f) != 8 {
			t.Fatalf("%q: want 8 columns", l)
		}
		group, topic, part := f[0], f[1], f[2]
		committed, ok := tr.Committed[group][topic][part]
		end, ok2 := ends.EndOffsets[topic][part]
		if !ok || !ok2 {
			t.Errorf("%s %s/%s: not in the truth", group, topic, part)
			continue
		}
		if want := fmt.Sprint(end - committed); f[5] != want {
			t.Errorf("%s %s/%s: lag %s, truth %s (end %d, committed %d)", group, topic, part, f[5], want, end, committed)
		}
		secs, err := strconv.ParseFloat(f[6], 64)
		if err != nil {
			t.Errorf("%s %s/%s: lag_seconds %q", group, topic, part, f[6])
		}
		wantSecs := 0.0
		if end > committed {
			wantSecs = float64(s.TSMillis-tr.Lag[group].RecordTimes[topic][part]) / 1000
		}
		if d := secs - wantSecs; d > 0.1 || d < -0.1 {
			t.Errorf("%s %s/%s: lag_seconds %.3f, truth %.3f", group, topic, part, secs, wantSecs)
		}
		if rank[f[7]] > rank[worst[group]] {
			worst[group] = f[7]
		}
		rows++
	}
	for g, l := range tr.Lag {
		if worst[g] != l.State {
			t.Errorf("%s: health %q, its consumer was driven %q", g, worst[g], l.State)
		}
	}
	if rows == 0 {
		t.Error("no partition listed")
	}
}

func nonEmptyLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
