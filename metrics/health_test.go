package metrics

import (
	"testing"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// TestHealthFields: every field of the stats line (a live eBPF capture's,
// so that every section is there) is exported by one health family or
// named in notExported with its reason, and every family's fields exist:
// a field added to a Stats struct must be decided on here.
func TestHealthFields(t *testing.T) {
	fields := statsFields(capture.Stats{Live: &capture.LiveStats{}, EBPF: &capture.EBPFStats{}}, decode.Stats{}, correlate.Stats{})
	if len(fields) < 80 {
		t.Fatalf("only %d stats fields found: the flattening misses sections", len(fields))
	}
	exported := map[string]string{}
	for _, h := range health {
		for _, f := range h.fields {
			if _, ok := fields[f.path]; !ok {
				t.Errorf("%s reads %s, which the stats do not have", h.name, f.path)
			}
			if other, ok := exported[f.path]; ok {
				t.Errorf("%s exported by %s and %s", f.path, other, h.name)
			}
			exported[f.path] = h.name
		}
	}
	for path := range fields {
		_, ex := exported[path]
		_, not := notExported[path]
		switch {
		case ex && not:
			t.Errorf("%s is exported and in notExported", path)
		case !ex && !not:
			t.Errorf("stats field %s is neither exported by a health family nor in notExported with a reason", path)
		}
	}
	for path := range notExported {
		if _, ok := fields[path]; !ok {
			t.Errorf("notExported names %s, which the stats do not have", path)
		}
	}
}

// TestHealthOffline: a capture file's stats (no live section) export no
// live or eBPF family, and none of the file counters.
func TestHealthOffline(t *testing.T) {
	p := runCapture(t, nil)
	p.x.Stats(capture.Stats{Packets: 1, FilesRead: 1}, p.ds)
	m := scrape(t, p.x)
	for _, name := range []string{"kwire_capture_kernel_drops_total", "kwire_ebpf_events_total", "kwire_capture_files_read_total"} {
		if _, ok := m[name]; ok {
			t.Errorf("%s exported for a capture without it", name)
		}
	}
	if m["kwire_capture_packets_total"] != 1 {
		t.Errorf("kwire_capture_packets_total = %v, want 1", m["kwire_capture_packets_total"])
	}
}
