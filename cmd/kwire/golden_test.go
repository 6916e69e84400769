package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.ndjson and *.golden.txt from the current output")

// testdataDir is where the committed captures are; KWIRE_TESTDATA points
// the tests at another set (e.g. freshly generated ones).
func testdataDir() string {
	if d := os.Getenv("KWIRE_TESTDATA"); d != "" {
		return d
	}
	return "../../testdata"
}

// goldenCase is one input of the golden tests: a capture, or the files
// captured per broker (X.b0.pcapng, X.b1.pcapng...) analysed together.
type goldenCase struct {
	name  string
	files []string
	args  []string // flags the capture needs (--port), before its files
}

// captures returns the golden cases of the committed captures.
func captures(t testing.TB) []goldenCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdataDir(), "*.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no captures in testdata: run 'make captures'")
	}
	var cases []goldenCase
	perBroker := map[string][]string{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pcapng")
		cases = append(cases, goldenCase{name: name, files: []string{f}})
		if i := strings.LastIndex(name, ".b"); i > 0 {
			perBroker[name[:i]] = append(perBroker[name[:i]], f)
		}
	}
	for set, fs := range perBroker {
		if len(fs) > 1 {
			cases = append(cases, goldenCase{name: set + ".brokers", files: fs})
		}
	}
	return cases
}

// runKwire runs the command line and returns its stdout; it fails the test
// on a non-zero exit.
func runKwire(t testing.TB, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("kwire %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.Bytes()
}

// TestGolden checks 'kwire read --json' and 'kwire analyze --json' on every
// committed capture against golden files: the NDJSON output is a public
// contract, and offline runs must be deterministic.
func TestGolden(t *testing.T) {
	for _, c := range captures(t) {
		for _, cmd := range []string{"read", "analyze"} {
			t.Run(c.name+"/"+cmd, func(t *testing.T) {
				args := append([]string{cmd, "--json"}, c.files...)
				got := runKwire(t, args...)
				if again := runKwire(t, args...); !bytes.Equal(got, again) {
					t.Fatal("two runs on the same capture differ: output is not deterministic")
				}
				checkGolden(t, filepath.Join(testdataDir(), c.name+"."+cmd+".golden.ndjson"), got)
			})
		}
	}
}

// textGoldens are the captures whose text report (kwire analyze --text)
// has a golden file: a rebalance storm, records lost to an offset reset
// (and a new group starting at the log's end), commits rejected (records
// processed again), and a healthy group.
var textGoldens = []string{"h_rebalance_storm", "h_offset_reset", "h_commit_rejected", "g_stable"}

// TestGoldenText checks kwire analyze --text, the report people read,
// against golden files (testdata/<case>.analyze.golden.txt).
func TestGoldenText(t *testing.T) {
	for _, name := range textGoldens {
		t.Run(name, func(t *testing.T) {
			got := runKwire(t, "analyze", "--text", filepath.Join(testdataDir(), name+".pcapng"))
			checkGolden(t, filepath.Join(testdataDir(), name+".analyze.golden.txt"), got)
		})
	}
}

// lineDiff shows the first differing lines of two outputs.
func lineDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 5; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			b.WriteString("line " + itoa(i+1) + ":\n-" + w + "\n+" + g + "\n")
			shown++
		}
	}
	if len(wl) != len(gl) {
		b.WriteString("line counts: want " + itoa(len(wl)) + ", got " + itoa(len(gl)) + "\n")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGolden compares got with the golden file, or writes it with -update.
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run 'make goldens')", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s (-want +got):\n%s", golden, lineDiff(want, got))
	}
}
