package jsonout

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// TestStatsNamesTheBuild: the stats line says which kwire wrote it
// (version, commit), so that a bug report with the output says what ran.
func TestStatsNamesTheBuild(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf, nil)
	w.Stats(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), capture.Stats{}, decode.Stats{})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Type  string         `json:"type"`
		Kwire map[string]any `json:"kwire"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	want := version.Get().Build()
	if line.Type != "stats" || line.Kwire["version"] != want.Version || want.Version == "" {
		t.Errorf("stats line %s: want \"kwire\":{\"version\":%q...}", buf.String(), want.Version)
	}
	if _, ok := line.Kwire["go"]; ok {
		t.Errorf("stats line %s names the toolchain: goldens would change with it", buf.String())
	}
}

// TestTextStatsEBPF: the text stats line of an eBPF source says what the
// probes did not copy (sendfile, --snap) and what of it the decoder
// placed in record data; a packet source's has no eBPF line.
func TestTextStatsEBPF(t *testing.T) {
	for _, tt := range []struct {
		name string
		cs   capture.Stats
		want string
	}{
		{"ebpf", capture.Stats{EBPF: &capture.EBPFStats{Events: 40, RingDrops: 2, SendfileBytes: 25230, SnapBytes: 100}},
			"-- eBPF: 40 probe events, 2 dropped (ring full); 25330 bytes not copied (25230 sent with sendfile, 100 past --snap), " +
				"of which 25300 record bytes in decoded frames; 1 frames decoded without their body"},
		{"packets", capture.Stats{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := New(&buf, &Options{Text: true})
			w.Stats(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), tt.cs, decode.Stats{NotCopiedBytes: 25330, RecordsNotCopiedBytes: 25300, NotCopiedFrames: 1})
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if tt.want == "" && bytes.Contains(buf.Bytes(), []byte("eBPF")) || tt.want != "" && !bytes.Contains(buf.Bytes(), []byte(tt.want)) {
				t.Errorf("text stats:\n%s\nwant it to contain %q", got, tt.want)
			}
		})
	}
}
