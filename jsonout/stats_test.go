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
