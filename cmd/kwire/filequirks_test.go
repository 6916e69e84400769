package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/internal/captest"
)

// setOrigLen rewrites the original length of every record of a
// little-endian pcap (captest.ToPcap) for which pick is true to its
// captured length less 4, as some capture libraries write records.
func setOrigLen(t *testing.T, pcap []byte, pick func(i int) bool) (n int) {
	t.Helper()
	const fileHdr, recHdr = 24, 16
	for off, i := fileHdr, 0; off < len(pcap); i++ {
		if off+recHdr > len(pcap) {
			t.Fatalf("record %d cut short", i)
		}
		incl := binary.LittleEndian.Uint32(pcap[off+8:])
		if pick(i) && incl > 4 {
			binary.LittleEndian.PutUint32(pcap[off+12:], incl-4)
			n++
		}
		off += recHdr + int(incl)
	}
	return n
}

// setNgOrigLen does the same to every Enhanced Packet Block of a
// little-endian pcapng.
func setNgOrigLen(t *testing.T, ng []byte) (n int) {
	t.Helper()
	for off := 0; off+12 <= len(ng); {
		typ, l := binary.LittleEndian.Uint32(ng[off:]), binary.LittleEndian.Uint32(ng[off+4:])
		if l < 12 || off+int(l) > len(ng) {
			t.Fatalf("block at %d: length %d", off, l)
		}
		if typ == 6 {
			if incl := binary.LittleEndian.Uint32(ng[off+20:]); incl > 4 {
				binary.LittleEndian.PutUint32(ng[off+24:], incl-4)
				n++
			}
		}
		off += int(l)
	}
	return n
}

// TestOrigLenBelowCaptured reads captures whose records give an original
// length smaller than their captured length, as some capture libraries
// write them (tshark reads them with the captured length): a few records
// of a pcap, every record of a pcap, every record of a pcapng. The story
// must be the one of the capture as written right, with one warning that
// names the quirk, its counter in stats, and no damage reported.
func TestOrigLenBelowCaptured(t *testing.T) {
	orig := filepath.Join(testdataDir(), "g_stable.pcapng")
	ng := readFile(t, orig)
	pcap, err := captest.ToPcap(ng)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rightPcap := filepath.Join(dir, "right.pcap")
	if err := os.WriteFile(rightPcap, pcap, 0o600); err != nil {
		t.Fatal(err)
	}
	some, all := append([]byte(nil), pcap...), append([]byte(nil), pcap...)
	nSome := setOrigLen(t, some, func(i int) bool { return i == 0 || i%97 == 5 })
	nAll := setOrigLen(t, all, func(int) bool { return true })
	ngAll := append([]byte(nil), ng...)
	nNg := setNgOrigLen(t, ngAll)
	for _, c := range []struct {
		name, right string
		data        []byte
		n           int
	}{
		{"some.pcap", rightPcap, some, nSome},
		{"all.pcap", rightPcap, all, nAll},
		{"all.pcapng", orig, ngAll, nNg},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.name)
			if err := os.WriteFile(p, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			want, wantErr := runOutput([]string{"analyze", "--json", c.right})
			got, gotErr := runOutput([]string{"analyze", "--json", p})
			if d := diffLines(withoutStats(t, want), withoutStats(t, got)); d != "" {
				t.Errorf("another story than the capture written right (-right +quirk):\n%s", d)
			}
			warn := "kwire: warning: " + p + ": " + strconv.Itoa(c.n) + " record(s) give an original length below their captured length"
			if strings.Count(gotErr, "kwire: warning:") != strings.Count(wantErr, "kwire: warning:")+1 || !strings.Contains(gotErr, warn) {
				t.Errorf("stderr %q: want one warning more than %q, %q...", gotErr, wantErr, warn)
			}
			st := fileStats(t, got)
			if st.Capture.OrigLenShort != c.n || st.Capture.FilesResynced != 0 || st.Capture.FileBytesSkipped != 0 {
				t.Errorf("stats %+v: want orig_len_short %d and no damage", st.Capture, c.n)
			}
			if st.TS.IsZero() {
				t.Error("the stats line's ts is the zero time")
			}
		})
	}
}

// TestSummaryTimeNeverZero analyzes a capture with no packet on the
// Kafka ports: the summary and stats lines are stamped now, not with the
// zero time.
func TestSummaryTimeNeverZero(t *testing.T) {
	pcap, err := captest.ToPcap(readFile(t, filepath.Join(testdataDir(), "g_stable.pcapng")))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "empty.pcap")
	if err := os.WriteFile(p, pcap[:24], 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	out, stderr := runOutput([]string{"analyze", "--json", p})
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v struct {
			Type string
			TS   time.Time
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s (%s)", err, l, stderr)
		}
		if v.Type == "summary" || v.Type == "stats" {
			n++
			if v.TS.Before(before) {
				t.Errorf("%s line at %v: want the time of the run", v.Type, v.TS)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d summary and stats lines, want 2: %s", n, out)
	}
}

type statsLine struct {
	TS      time.Time
	Capture struct {
		OrigLenShort     int `json:"orig_len_short"`
		FilesResynced    int `json:"files_resynced"`
		FileBytesSkipped int `json:"file_bytes_skipped"`
	}
}

// fileStats returns the last stats line of NDJSON output.
func fileStats(t *testing.T, out []byte) statsLine {
	t.Helper()
	var st statsLine
	found := false
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v struct{ Type string }
		if json.Unmarshal([]byte(l), &v) == nil && v.Type == "stats" {
			found = json.Unmarshal([]byte(l), &st) == nil
		}
	}
	if !found {
		t.Fatalf("no stats line in %d bytes of output", len(out))
	}
	return st
}

// withoutStats returns the lines of out but its stats lines.
func withoutStats(t *testing.T, out []byte) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, `{"v":3,"type":"stats"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestJoinUnseenStable analyzes a window of g_stable that starts after
// generation 6 formed and stops before its members leave, as a tcpdump
// started on a running cluster captures it: no JoinGroup or SyncGroup of
// it, only its members' heartbeats, fetches and commits. The group is
// stable in generation 6, its join unseen, not rebalancing.
func TestJoinUnseenStable(t *testing.T) {
	w, err := captest.Window(readFile(t, filepath.Join(testdataDir(), "g_stable.pcapng")), 0.705, 0.894)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "window.pcapng")
	if err := os.WriteFile(p, w, 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr := runOutput([]string{"analyze", "--json", p})
	var groups []struct {
		Group, State string
		Generation   int32
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v struct {
			Type   string
			Groups []struct {
				Group, State string
				Generation   int32
			}
		}
		if json.Unmarshal([]byte(l), &v) == nil && v.Type == "summary" {
			groups = v.Groups
		}
	}
	if len(groups) != 1 || groups[0].Group != "gs-group" || groups[0].Generation != 6 || groups[0].State != "stable" {
		t.Errorf("summary groups %+v (%s): want gs-group stable in generation 6", groups, stderr)
	}
}

// shiftPcap adds d (whole seconds) to the time of every record of a
// little-endian pcap (captest.ToPcap).
func shiftPcap(t *testing.T, pcap []byte, d time.Duration) []byte {
	t.Helper()
	out := append([]byte(nil), pcap...)
	const fileHdr, recHdr = 24, 16
	for off := fileHdr; off < len(out); {
		if off+recHdr > len(out) {
			t.Fatalf("record at %d cut short", off)
		}
		sec := binary.LittleEndian.Uint32(out[off:])
		binary.LittleEndian.PutUint32(out[off:], sec+uint32(d/time.Second))
		off += recHdr + int(binary.LittleEndian.Uint32(out[off+8:]))
	}
	return out
}

// TestFilesApart: captures merged by time that do not overlap (two runs
// of a test, hours apart) are analysed with a warning naming the file
// that ends and the one that begins after the gap; per-broker captures
// of one run, one capture cut in two (rotated files), or one file, are
// not.
func TestFilesApart(t *testing.T) {
	pcap, err := captest.ToPcap(readFile(t, filepath.Join(testdataDir(), "g_stable.pcapng")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, second := write("first.pcap", pcap), write("later.pcap", shiftPcap(t, pcap, 3*time.Hour))
	var halves []string
	for i, w := range [][2]float64{{0, 0.5}, {0.5, 1}} {
		b, err := captest.Window(pcap, w[0], w[1])
		if err != nil {
			t.Fatal(err)
		}
		halves = append(halves, write("half"+strconv.Itoa(i)+".pcap", b))
	}
	brokers, _ := filepath.Glob(filepath.Join(testdataDir(), "g_xbroker.b?.pcapng"))
	const warning = "kwire: warning: the capture files do not overlap in time"
	for _, tc := range []struct {
		name  string
		files []string
		want  string // "" for no warning
	}{
		{"hours apart", []string{second, first}, warning + ": " + first + " ends at "},
		{"hours apart/after the gap", []string{second, first}, ", " + second + " begins 2h"},
		{"per-broker captures", brokers, ""},
		{"rotated", halves, ""},
		{"one file", []string{first}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"analyze", "read"} {
				_, stderr := runOutput(append([]string{cmd, "--json"}, tc.files...))
				if tc.want == "" && strings.Contains(stderr, warning) || !strings.Contains(stderr, tc.want) {
					t.Errorf("kwire %s: stderr %q, want %q", cmd, stderr, tc.want)
				}
			}
		})
	}
}
