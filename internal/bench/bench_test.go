package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	v := Vars{File: "/c.pcapng", Kwire: "bin/kwire", Ports: "29092-29094,9092"}
	for _, tc := range []struct {
		name string
		argv []string
		want []string
	}{
		{"kwire", Default[1].Argv, []string{"bin/kwire", "read", "--json", "--port", "29092-29094,9092", "/c.pcapng"}},
		{"tshark", Default[3].Argv, []string{"tshark", "-r", "/c.pcapng",
			"-d", "tcp.port==29092,kafka", "-d", "tcp.port==29093,kafka", "-d", "tcp.port==29094,kafka",
			"-d", "tcp.port==9092,kafka", "-V"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Expand(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Expand(%q)\n-want %q\n+got  %q", tc.argv, tc.want, got)
			}
		})
	}
	if _, err := (Vars{Ports: "9094-9092"}).Expand([]string{"{tshark-ports}"}); err == nil {
		t.Error("Expand accepted the port range 9094-9092")
	}
}

func TestCompare(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds := []Command{
		{Name: "cat", Argv: []string{"cat", "{file}"}},
		{Name: "absent", Argv: []string{"kwire-bench-no-such-program"}},
		{Name: "probed out", Argv: []string{"cat", "{file}"}, Probe: []string{"false"}},
	}
	results, notes, err := Compare(cmds, Vars{File: file}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(results[0].Runs) != 2 || len(notes) != 2 {
		t.Fatalf("got %d results (%+v), notes %q: want cat run twice and two notes", len(results), results, notes)
	}
	if r := results[0].Runs[0]; r.Wall <= 0 || r.MaxRSSKiB <= 0 {
		t.Errorf("run %+v: want a wall time and a max RSS", r)
	}
	results[0].Runs = []Run{{Wall: time.Second, MaxRSSKiB: 2048}, {Wall: 3 * time.Second}, {Wall: 2 * time.Second}}
	var b strings.Builder
	if err := Table(&b, results, 100e6, 1000); err != nil {
		t.Fatal(err)
	}
	if want := "| cat | 3 | 2.00 | 50 | 500 | 0.00 | 2 | 1.00x | — |"; !strings.Contains(b.String(), want) {
		t.Errorf("table:\n%s\nwant the row %s", b.String(), want)
	}
}
