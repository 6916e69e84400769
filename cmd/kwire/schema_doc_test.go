package main

import (
	"cmp"
	"encoding/json"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/correlate"
)

// docSection is one heading of docs/schema.md and the text under it up
// to the next heading (body), and up to the next heading of its level or
// higher (tree: its subsections included).
type docSection struct {
	heading, anchor string
	paths           []string // the jq paths (`.groups[]`) its heading names
	body, tree      string
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	docLink    = regexp.MustCompile(`\]\(#([^)]+)\)`)
)

// slug is GitHub's anchor of a heading.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func docSections(doc string) []docSection {
	lines := strings.Split(doc, "\n")
	var secs []docSection
	var levels, starts []int
	inCode := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		h := strings.TrimSpace(l[level:])
		s := docSection{heading: h, anchor: slug(h)}
		for _, m := range backticked.FindAllStringSubmatch(h, -1) {
			if strings.HasPrefix(m[1], ".") {
				s.paths = append(s.paths, m[1])
			}
		}
		secs, levels, starts = append(secs, s), append(levels, level), append(starts, i)
	}
	for k := range secs {
		end, treeEnd := len(lines), len(lines)
		if k+1 < len(secs) {
			end = starts[k+1]
		}
		for j := k + 1; j < len(secs); j++ {
			if levels[j] <= levels[k] {
				treeEnd = starts[j]
				break
			}
		}
		secs[k].body = strings.Join(lines[starts[k]+1:end], "\n")
		secs[k].tree = strings.Join(lines[starts[k]+1:treeEnd], "\n")
	}
	return secs
}

// keyTree is the keys of a JSON object, each with its value's keys (an
// object, or the objects of a list); a map's keys are data, not fields.
type keyTree struct {
	keys          map[string]*keyTree
	isMap, isList bool
}

func newKeyTree() *keyTree { return &keyTree{keys: map[string]*keyTree{}} }

func (k *keyTree) child(name string) *keyTree {
	if k.keys[name] == nil {
		k.keys[name] = newKeyTree()
	}
	return k.keys[name]
}

// addType adds the JSON keys of type t as encoding/json writes them.
func (k *keyTree) addType(t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		k.isList = k.isList || t.Kind() == reflect.Slice
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Map:
		k.isMap = true
	case t.Kind() != reflect.Struct || t == reflect.TypeFor[correlate.Time]():
	default:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case !f.IsExported() || name == "-":
			case f.Anonymous && name == "":
				k.addType(f.Type)
			default:
				k.child(cmp.Or(name, f.Name)).addType(f.Type)
			}
		}
	}
}

// addJSON adds the keys of a decoded JSON value, below maps the type
// walk marked (other keys found there are data).
func (k *keyTree) addJSON(v any) {
	switch v := v.(type) {
	case map[string]any:
		if k.isMap {
			return
		}
		for name, x := range v {
			k.child(name).addJSON(x)
		}
	case []any:
		for _, x := range v {
			k.addJSON(x)
		}
	}
}

// TestSummaryDocumented walks the summary of kwire analyze --json on
// captures with every kind of group (classic, KIP-848 consumer, share;
// transactions and read_committed; hazards of each family, lag), and
// the summary's Go type for fields no capture shows, and requires every
// key path to be documented in docs/schema.md: the heading of a section
// names the object's jq path (`.groups[].partitions[]`) and its text
// names the key in backticks; or the line documenting the object links
// to a section that names its keys (a generation or a hazard, as the
// events). The docs' links within the file must lead somewhere.
func TestSummaryDocumented(t *testing.T) {
	doc := schemaDoc(t)
	secs := docSections(doc)
	byAnchor := map[string]*docSection{}
	for i := range secs {
		byAnchor[secs[i].anchor] = &secs[i]
	}
	for _, m := range docLink.FindAllStringSubmatch(doc, -1) {
		if byAnchor[m[1]] == nil {
			t.Errorf("docs/schema.md links to #%s, which is no heading", m[1])
		}
	}

	summaryType := func() *keyTree {
		k := newKeyTree()
		k.addType(reflect.TypeFor[correlate.Snapshot]())
		for _, name := range []string{"v", "type", "ts", "ts_ms"} { // the envelope
			k.child(name)
		}
		return k
	}
	root, typed := summaryType(), summaryType()
	for _, name := range []string{"group", "g_848", "h_lag", "share_clean", "h_share_redelivery", "h_share_ack_lost",
		"txn_read_committed", "newest", "h_hanging_transaction", "h_txn_offsets_aborted", "h_non_owner_commit",
		"h_commit_rejected", "h_offset_reset", "lossy", "h_client_id_churn", "g_sarama"} {
		out := runKwire(t, "analyze", "--json", "--health-window", "4s", filepath.Join(testdataDir(), name+".pcapng"))
		var v map[string]any
		summaryLine(t, out, &v)
		root.addJSON(v)
		// A key the JSON has and the type walk does not is one the
		// type walk misread: it must know every key.
		if extra := newKeys(typed, root, ""); len(extra) > 0 {
			t.Errorf("%s: keys not in correlate.Snapshot's JSON as the test reads it: %v", name, extra)
		}
	}

	var check func(k *keyTree, path string, links []string)
	checked := 0
	check = func(k *keyTree, path string, links []string) {
		var own []*docSection
		for i := range secs {
			if slices.Contains(secs[i].paths, cmp.Or(path, ".")) {
				own = append(own, &secs[i])
			}
		}
		for _, name := range slices.Sorted(maps.Keys(k.keys)) {
			want := "`" + name + "`"
			child := path + "." + name
			var childLinks []string
			found := false
			for _, s := range own {
				for _, l := range strings.Split(s.body, "\n") {
					if strings.Contains(l, want) {
						found = true
						for _, m := range docLink.FindAllStringSubmatch(l, -1) {
							childLinks = append(childLinks, m[1])
						}
					}
				}
			}
			if len(own) == 0 {
				for _, a := range links {
					if s := byAnchor[a]; s != nil && strings.Contains(s.tree, want) {
						found = true
					}
				}
				childLinks = links
			}
			checked++
			if !found {
				where := "no section's heading names `" + cmp.Or(path, ".") + "`"
				if len(own) > 0 {
					where = "the sections naming `" + cmp.Or(path, ".") + "` do not"
				} else if len(links) > 0 {
					where = "nor do the sections it links to (" + strings.Join(links, ", ") + ")"
				}
				t.Errorf("summary key %s is not documented in docs/schema.md: %s", child, where)
				continue
			}
			c := k.keys[name]
			if c.isMap || len(c.keys) == 0 {
				continue
			}
			if c.isList {
				child += "[]"
			}
			check(c, child, childLinks)
		}
	}
	check(root, "", nil)
	t.Logf("%d summary keys checked", checked)
}

// newKeys lists the key paths of b not in a.
func newKeys(a, b *keyTree, path string) []string {
	var out []string
	for name, c := range b.keys {
		p := path + "." + name
		if a.keys[name] == nil {
			out = append(out, p)
			continue
		}
		out = append(out, newKeys(a.keys[name], c, p)...)
	}
	slices.Sort(out)
	return out
}

// fixedTime is the one time format of the NDJSON (correlate.TimeFormat).
var (
	fixedTime   = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
	timeInText  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[0-9.:+Z-]*`)
	looksLikeTS = regexp.MustCompile(`^\d{4}-\d\d-\d\dT`)
)

// TestNDJSONTimes checks, on every line of kwire read and analyze --json
// of captures with every kind of line, that every time (a string that
// begins as an RFC 3339 date, and times named inside text) is in the one
// format with six fractional digits, that every object with a ts has a
// ts_ms that is the same time, that every line has both, and that
// hazard ids are unique and the summary's are the lines'.
func TestNDJSONTimes(t *testing.T) {
	times, objects := 0, 0
	for _, name := range []string{"group", "g_848", "h_share_ack_lost", "txn_read_committed", "h_hanging_transaction",
		"h_non_owner_commit", "h_commit_rejected", "lossy", "h_lag", "h_txn_killed", "h_reset_regression"} {
		for _, cmd := range []string{"read", "analyze"} {
			out := runKwire(t, cmd, "--json", filepath.Join(testdataDir(), name+".pcapng"))
			lineIDs, summaryIDs := map[string]bool{}, []string{}
			for _, l := range nonEmptyLines(out) {
				var v map[string]any
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("%s %s: %v: %s", cmd, name, err, l)
				}
				if _, ok := v["ts_ms"]; !ok {
					t.Errorf("%s %s: a %v line without ts_ms", cmd, name, v["type"])
				}
				walkJSON(v, "", func(path string, obj map[string]any) {
					objects++
					ts, ok := obj["ts"].(string)
					if !ok {
						return
					}
					at, err := time.Parse(time.RFC3339Nano, ts)
					ms, _ := obj["ts_ms"].(float64)
					if err != nil || int64(ms) != at.UnixMilli() {
						t.Errorf("%s %s: %s: ts %q, ts_ms %v: want ts_ms the same time in milliseconds", cmd, name, path, ts, obj["ts_ms"])
					}
				}, func(path, s string) {
					if looksLikeTS.MatchString(s) {
						times++
						if !fixedTime.MatchString(s) {
							t.Errorf("%s %s: %s = %q: not in the one time format", cmd, name, path, s)
						}
						return
					}
					for _, x := range timeInText.FindAllString(s, -1) {
						times++
						if !fixedTime.MatchString(x) {
							t.Errorf("%s %s: %s names the time %q: not in the one time format", cmd, name, path, x)
						}
					}
				})
				switch v["type"] {
				case "hazard":
					id, _ := v["id"].(string)
					if id == "" || lineIDs[id] {
						t.Errorf("%s %s: hazard id %q missing or not unique", cmd, name, id)
					}
					lineIDs[id] = true
				case "summary":
					hs, _ := v["hazards"].([]any)
					for _, h := range hs {
						id, _ := h.(map[string]any)["id"].(string)
						summaryIDs = append(summaryIDs, id)
					}
				}
			}
			for _, id := range summaryIDs {
				if !lineIDs[id] {
					t.Errorf("%s %s: the summary's hazard %s is no hazard line's", cmd, name, id)
				}
			}
		}
	}
	if times == 0 || objects == 0 {
		t.Fatal("no times found")
	}
	t.Logf("%d times in %d objects checked", times, objects)
}

// walkJSON calls object for every object of v and str for every string.
func walkJSON(v any, path string, object func(string, map[string]any), str func(string, string)) {
	switch v := v.(type) {
	case map[string]any:
		object(path, v)
		for k, x := range v {
			walkJSON(x, path+"."+k, object, str)
		}
	case []any:
		for _, x := range v {
			walkJSON(x, path+"[]", object, str)
		}
	case string:
		str(path, v)
	}
}
