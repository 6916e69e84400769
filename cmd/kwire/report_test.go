package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
)

// TestTextTransactionsShare runs kwire analyze --text on the captures of
// a stuck transaction and of a share group's poison record, and finds in
// the text report the rows of their tables with the numbers the JSON
// summary of the same capture gives.
func TestTextTransactionsShare(t *testing.T) {
	type row struct {
		header string   // the table's title line
		cells  []string // one row, whitespace-separated, from the JSON summary
	}
	// The summary line, its numbers kept exact (producer ids need 64 bits).
	summary := func(file string) map[string]any {
		for _, l := range bytes.Split(runKwire(t, "analyze", "--json", filepath.Join(testdataDir(), file)), []byte("\n")) {
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(l))
			d.UseNumber()
			if d.Decode(&m) == nil && m["type"] == "summary" {
				return m
			}
		}
		t.Fatalf("%s: no summary line", file)
		return nil
	}
	num := func(v any) string { return v.(json.Number).String() }
	cases := map[string][]row{}

	s := summary("h_hanging_lso.pcapng")
	for _, tx := range s["transactions"].([]any) {
		x := tx.(map[string]any)
		cases["h_hanging_lso.pcapng"] = append(cases["h_hanging_lso.pcapng"], row{"== transactions", []string{
			x["transactional_id"].(string), x["client_id"].(string) + "@" + x["client_host"].(string), num(x["producer_id"]),
			num(x["producer_epoch"]), `\S+`, num(x["committed"]), num(x["aborted"]), num(x["timed_out"])}})
	}
	for _, sp := range s["stable_partitions"].([]any) {
		x := sp.(map[string]any)
		cases["h_hanging_lso.pcapng"] = append(cases["h_hanging_lso.pcapng"], row{"transactional partitions", []string{
			x["topic"].(string), num(x["partition"]), num(x["last_stable_offset"]), num(x["high_watermark"]), num(x["unstable"]),
			`\S+`, num(x["max_stuck_ms"]) + "ms", num(x["transaction_markers"]), num(x["aborted_transactions"])}})
	}
	s = summary("h_share_redelivery.pcapng")
	for _, g := range s["groups"].([]any) {
		sh, _ := g.(map[string]any)["share"].(map[string]any)
		if sh == nil {
			continue
		}
		for _, p := range sh["partitions"].([]any) {
			x := p.(map[string]any)
			cells := []string{x["topic"].(string), num(x["partition"])}
			for _, k := range []string{"acquired", "redelivered", "accepted", "released", "rejected", "lock_expired", "max_delivery_count", "held"} {
				cells = append(cells, num(x[k]))
			}
			cases["h_share_redelivery.pcapng"] = append(cases["h_share_redelivery.pcapng"], row{"share records:", cells})
		}
	}
	if len(cases["h_hanging_lso.pcapng"]) < 2 || len(cases["h_share_redelivery.pcapng"]) == 0 {
		t.Fatalf("the summaries lack transactions, stable partitions or share records: %v", cases)
	}
	for file, rows := range cases {
		text := string(runKwire(t, "analyze", "--text", filepath.Join(testdataDir(), file)))
		for _, r := range rows {
			i := strings.Index(text, r.header)
			if i < 0 {
				t.Errorf("%s: no %q table in the text report:\n%s", file, r.header, text)
				continue
			}
			quoted := make([]string, len(r.cells))
			for j, c := range r.cells {
				if c == `\S+` {
					quoted[j] = c
				} else {
					quoted[j] = regexp.QuoteMeta(c)
				}
			}
			re := regexp.MustCompile(`(?m)^\s*` + strings.Join(quoted, `\s+`) + `(\s|$)`)
			if !re.MatchString(text[i:]) {
				t.Errorf("%s: the %q table has no row %v (the JSON summary's):\n%s", file, r.header, r.cells, text[i:])
			}
		}
	}
}

// TestTextReportOrder: the report starts with its header and the verdict,
// and its timeline is in capture time order, dates and zone included, on
// the storm capture, whose expiries and slow rebalances are judged after
// events of later times (the correlator reports them late).
func TestTextReportOrder(t *testing.T) {
	file := filepath.Join(testdataDir(), "h_rebalance_storm.pcapng")
	// The events as reported: some hazards come after later events.
	late := 0
	var last string
	for _, m := range ndjsonLines(t, runKwire(t, "analyze", "--json", file)) {
		ts, _ := m["ts"].(string)
		if m["type"] == "summary" || m["type"] == "stats" {
			continue
		}
		if ts < last {
			late++
		}
		last = max(last, ts)
	}
	if late == 0 {
		t.Fatal("no event of the storm capture is reported after a later one: the test would prove nothing")
	}
	text := string(runKwire(t, "analyze", "--text", file))
	ls := strings.Split(text, "\n")
	if !strings.HasPrefix(ls[0], "== kwire report at 2026-") || !strings.HasPrefix(ls[1], "== verdict") || !strings.HasPrefix(ls[2], "WARN      hrst-group: ") {
		t.Fatalf("the report does not start with its header and the verdict:\n%s", strings.Join(ls[:min(5, len(ls))], "\n"))
	}
	start := slices.Index(ls, "== timeline (UTC, in capture time order)")
	if start < 0 {
		t.Fatalf("no timeline:\n%s", text)
	}
	stamp := regexp.MustCompile(`^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) [A-Z]+ `)
	n, prev := 0, ""
	for _, l := range ls[start+1:] {
		if l == "" {
			break
		}
		if strings.HasPrefix(l, "    ") {
			continue // a generation's members
		}
		m := stamp.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("a timeline line without its date and time: %q", l)
			continue
		}
		if m[1] < prev {
			t.Errorf("timeline out of order: %s after %s", m[1], prev)
		}
		prev = m[1]
		n++
	}
	if n < 20 {
		t.Errorf("the timeline has %d lines, want the storm's events", n)
	}
}

// TestTextIDs: the text has member ids in one short form, a prefix of the
// whole id, and --full-ids writes them whole; NDJSON always has them whole.
func TestTextIDs(t *testing.T) {
	file := filepath.Join(testdataDir(), "h_rebalance_storm.pcapng")
	var ids []string
	for _, m := range ndjsonLines(t, runKwire(t, "analyze", "--json", file)) {
		if m["type"] != "summary" {
			continue
		}
		for _, g := range m["groups"].([]any) {
			for _, mb := range g.(map[string]any)["members"].([]any) {
				ids = append(ids, mb.(map[string]any)["member_id"].(string))
			}
		}
	}
	if len(ids) < 5 {
		t.Fatalf("the storm has %d members, want more", len(ids))
	}
	short := string(runKwire(t, "analyze", "--text", file))
	full := string(runKwire(t, "analyze", "--text", "--full-ids", file))
	for _, id := range ids {
		s := correlate.ShortID(id)
		if s == id || !strings.HasPrefix(id, s) {
			t.Fatalf("ShortID(%q) = %q: want a shorter prefix", id, s)
		}
		if strings.Contains(short, id) {
			t.Errorf("the text has %s whole (the tables, a hazard's summary and the timeline all shorten it)", id)
		}
		if !strings.Contains(short, s+" ") {
			t.Errorf("the text lacks %s, the short form of %s", s, id)
		}
		if !strings.Contains(full, id) {
			t.Errorf("the text with --full-ids lacks %s", id)
		}
	}
}
