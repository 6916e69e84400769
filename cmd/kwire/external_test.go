package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kwire/kwire/internal/captest"
)

// TestExternalCaptures is compare.sh (../shared/external-captures) in Go:
// on each public capture of another project, kwire read, with and without
// the broker port, finds at least the Kafka PDUs tshark's dissector finds
// (the counts recorded in tshark-counts.tsv), and neither read nor
// analyze fails.
func TestExternalCaptures(t *testing.T) {
	dir := filepath.Dir(captest.External(t, "ports.txt"))
	tshark := map[string]int{}
	for _, f := range fields(t, filepath.Join(dir, "tshark-counts.tsv")) {
		req, _ := strconv.Atoi(f[1])
		resp, _ := strconv.Atoi(f[2])
		tshark[f[0]] = req + resp
	}
	for _, f := range fields(t, filepath.Join(dir, "ports.txt")) {
		name, port := f[0], f[1]
		t.Run(name, func(t *testing.T) {
			want, ok := tshark[name]
			if !ok {
				t.Fatalf("%s: no count in tshark-counts.tsv", name)
			}
			path := filepath.Join(dir, name)
			for _, args := range [][]string{{"read", "--json", path}, {"read", "--json", "--port", port, path}} {
				out, stderr := runOutput(args)
				if !strings.HasPrefix(stderr, "exit 0:") || strings.Contains(stderr, "panic") {
					t.Errorf("%v: %s", args[:len(args)-1], stderr)
				}
				var st struct {
					Type   string
					Decode struct {
						Requests  int `json:"requests"`
						Responses int `json:"responses"`
						Unmatched int `json:"unmatched_responses"`
					}
				}
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if json.Unmarshal([]byte(l), &st) == nil && st.Type == "stats" {
						break
					}
				}
				if got := st.Decode.Requests + st.Decode.Responses + st.Decode.Unmatched; got < want {
					t.Errorf("%v: %d Kafka PDUs (%d requests, %d responses, %d unmatched), tshark %d",
						args[:len(args)-1], got, st.Decode.Requests, st.Decode.Responses, st.Decode.Unmatched, want)
				}
			}
			if _, stderr := runOutput([]string{"analyze", "--json", path}); !strings.HasPrefix(stderr, "exit 0:") && !strings.HasPrefix(stderr, "exit 3:") {
				t.Errorf("analyze: %s", stderr)
			}
		})
	}
}

// TestReadUnmatchedShown reads nDPI's kafka.pcapng: the three responses
// whose requests were not captured are on kwire read's output, as tshark
// shows them ("Request missing"), with their correlation ids and the API
// their bytes and the capture's requests give, in NDJSON and in text.
func TestReadUnmatchedShown(t *testing.T) {
	path := captest.External(t, "ndpi/kafka.pcapng")
	out, stderr := runOutput([]string{"read", "--json", path})
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a struct {
			Type, Kind, API string
			Conn            struct{ Client string }
			CorrelationID   int32  `json:"correlation_id"`
			APIVersion      *int16 `json:"api_version"`
			ErrorCode       *int16 `json:"error_code"`
		}
		if json.Unmarshal([]byte(l), &a) != nil || a.Type != "anomaly" {
			continue
		}
		s := fmt.Sprintf("%s %s #%d", a.Kind, a.Conn.Client, a.CorrelationID)
		if a.APIVersion != nil && a.ErrorCode != nil {
			s += fmt.Sprintf(" %s v%d error_code=%d", a.API, *a.APIVersion, *a.ErrorCode)
		}
		got = append(got, s)
	}
	want := []string{
		"unmatched_response 172.16.17.101:49280 #131 Metadata v2 error_code=0",
		"unmatched_response 172.16.17.101:58052 #140 ApiVersions v0 error_code=0",
		"unmatched_response 172.16.17.101:58052 #141 Metadata v2 error_code=0",
	}
	if d := diffLines(want, got); d != "" {
		t.Errorf("anomaly lines (-want +got) (%s):\n%s", stderr, d)
	}
	text, _ := runOutput([]string{"read", "--text", path})
	for _, w := range []string{
		"ANOMALY unmatched_response c2 172.16.17.101:49280>172.30.0.237:9092 to_client: response whose request was not seen; Metadata v2 inferred",
		"ANOMALY unmatched_response c3 172.16.17.101:58052>172.30.0.237:9092 to_client: response whose request was not seen; ApiVersions v0 inferred",
	} {
		if !strings.Contains(string(text), w) {
			t.Errorf("text output without %q:\n%s", w, text)
		}
	}
}

// fields returns the whitespace-separated fields of the lines of a
// manifest, comments (#) and blank lines left out.
func fields(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l, _, _ := strings.Cut(sc.Text(), "#")
		if fs := strings.Fields(l); len(fs) >= 2 {
			out = append(out, fs)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
