package metrics

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/internal/realkafka"
)

// TestFamilyNames holds every family to Prometheus' naming conventions
// (prometheus.io/docs/practices/naming): kwire_ or kafka_exporter's
// kafka_ prefix, snake case, _total on counters and only on them, base
// units (seconds, bytes), no word said twice in a row
// (kwire_decode_decode_errors_total), labels in snake case and no
// member_id but on the opt-in info metric.
func TestFamilyNames(t *testing.T) {
	name := regexp.MustCompile(`^(kwire|kafka)_[a-z0-9]+(_[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, f := range Families() {
		if seen[f.Name] {
			t.Errorf("%s: twice", f.Name)
		}
		seen[f.Name] = true
		if !name.MatchString(f.Name) {
			t.Errorf("%s: not a snake-case name under kwire_ or kafka_", f.Name)
		}
		words := strings.Split(f.Name, "_")
		for i := 1; i < len(words); i++ {
			if words[i] == words[i-1] {
				t.Errorf("%s: stutters (%q twice)", f.Name, words[i])
			}
		}
		if counter := f.Type == "counter"; counter != strings.HasSuffix(f.Name, "_total") {
			t.Errorf("%s: a %s; counters, and only they, end in _total", f.Name, f.Type)
		}
		for _, w := range words {
			if slices.Contains([]string{"millis", "ms", "milliseconds", "kb", "mb", "kib", "mib", "minutes"}, w) {
				t.Errorf("%s: not in base units (seconds, bytes)", f.Name)
			}
		}
		for _, l := range f.Labels {
			if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(l) || l == "group" {
				t.Errorf("%s: label %q (the group label is %s)", f.Name, l, groupLabel)
			}
			if l == "member_id" && f.Name != "kwire_group_member_info" {
				t.Errorf("%s: a member_id label makes series at every consumer restart", f.Name)
			}
		}
		if f.Help == "" || !slices.Contains([]string{"counter", "gauge", "histogram"}, f.Type) {
			t.Errorf("%s: type %q, help %q", f.Name, f.Type, f.Help)
		}
	}
}

// clientFamily says whether a family is the client library's (Go runtime,
// process, promhttp), which docs/metrics.md lists as groups.
func clientFamily(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_")
}

// TestFamiliesExported: an exporter given everything (member info on;
// consumer groups, share groups with a member live at the end,
// transactions and unattributed fetches from real captures; live and eBPF
// stats; a packet time) exports exactly the families Families lists, no
// more: the list is what the code registers.
func TestFamiliesExported(t *testing.T) {
	var paths []string
	for _, c := range []string{"group", "compress", "h_hanging_lso", "h_share_redelivery", "h_share_ack_lost"} {
		paths = append(paths, "../testdata/"+c+".pcapng")
	}
	p := runCapturesOf(t, paths, &Options{MemberInfo: true})
	p.cs.Live, p.cs.EBPF = &capture.LiveStats{}, &capture.EBPFStats{}
	p.x.Stats(p.cs, p.ds)
	p.x.LastPacket(time.Now())
	m := scrape(t, p.x)
	histograms := map[string]bool{}
	for _, f := range Families() {
		histograms[f.Name] = f.Type == "histogram"
	}
	got := map[string]bool{}
	for series := range m {
		n, _, _ := strings.Cut(series, "{")
		if clientFamily(n) {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(n, suffix); base != n && histograms[base] {
				n = base
			}
		}
		got[n] = true
	}
	want := map[string]bool{}
	for _, f := range Families() {
		want[f.Name] = true
	}
	// Tested elsewhere: kwire_metrics_folded_total needs an event of a
	// group past the cap (TestHostileClientCannotBlind),
	// kwire_transaction_open_seconds a transaction open at the end, which
	// no capture has (TestTransactionMetrics snapshots mid-way).
	got["kwire_metrics_folded_total"], got["kwire_transaction_open_seconds"] = true, true
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("families exported differ from Families() (-listed +exported):\n%s", d)
	}
}

// TestFamiliesDocumented: docs/metrics.md lists every family of Families
// with its type and labels, and nothing else.
func TestFamiliesDocumented(t *testing.T) {
	f, err := os.Open("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\| (counter|gauge|histogram) \\| ([^|]*) \\|")
	label := regexp.MustCompile("`([a-z_0-9]+)`")
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r := row.FindStringSubmatch(sc.Text())
		if r == nil || clientFamily(r[1]) {
			continue
		}
		var labels []string
		for _, l := range label.FindAllStringSubmatch(r[3], -1) {
			labels = append(labels, l[1])
		}
		if _, dup := got[r[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", r[1])
		}
		got[r[1]] = r[2] + " " + strings.Join(labels, ",")
	}
	want := map[string]string{}
	for _, f := range Families() {
		want[f.Name] = f.Type + " " + strings.Join(f.Labels, ",")
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("docs/metrics.md and Families() differ (-code +docs):\n%s", d)
	}
}
