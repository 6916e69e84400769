package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
