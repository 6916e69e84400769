package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kwire/kwire/internal/captest"
)

// shardCopies are the altered copies of a capture the sharded run is
// checked on: damaged bytes (framing too: the reader resynchronises),
// lost segments, and a capture started late and stopped early.
var shardCopies = []struct {
	name string
	make func(src []byte, seed uint64) ([]byte, error)
}{
	{"damaged", func(src []byte, seed uint64) ([]byte, error) { return captest.FlipBytes(src, 0.0005, seed), nil }},
	{"lossy", func(src []byte, seed uint64) ([]byte, error) { return captest.DropData(src, 0.05, seed) }},
	{"midstream", midstream},
}

// midstream cuts src to a window of its time that holds packets (a
// capture whose traffic is bunched leaves little in some windows).
func midstream(src []byte, _ uint64) ([]byte, error) {
	var b []byte
	for _, from := range []float64{0.4, 0.1, 0.01} {
		var err error
		if b, err = captest.Window(src, from, 1-from/4); err != nil || len(b) > len(src)/10 {
			return b, err
		}
	}
	return b, nil
}

// shardShort are the captures of TestShardsSame with -short (make test
// runs it so under -race): several groups, a client bound to two,
// KIP-848, share groups, transactions and stable offsets, several brokers.
var shardShort = map[string]bool{
	"h_offset_reset": true, "g_848": true, "h_share_killed_held": true, "h_txn_offsets_aborted": true,
	"h_hanging_lso": true, "g_xbroker.brokers": true, "h_non_owner_fetch": true,
}

// TestShardsSame: kwire read and analyze with --shards 2, 4 and 8 write,
// byte for byte, what they write with --shards 1 (one correlator), on
// every capture in testdata (sets of per-broker captures merged too) and
// on damaged, lossy and mid-stream copies of each.
func TestShardsSame(t *testing.T) {
	dir := t.TempDir()
	for ci, c := range captures(t) {
		if testing.Short() && !shardShort[c.name] {
			continue
		}
		sets := [][]string{c.files}
		names := []string{c.name}
		if len(c.files) == 1 {
			src := readFile(t, c.files[0])
			for _, cp := range shardCopies {
				b, err := cp.make(src, uint64(ci+1))
				if err != nil {
					t.Fatalf("%s %s: %v", c.name, cp.name, err)
				}
				f := filepath.Join(dir, c.name+"."+cp.name+".pcapng")
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
				sets, names = append(sets, []string{f}), append(names, c.name+"."+cp.name)
			}
		}
		for i, files := range sets {
			for _, cmd := range []string{"read", "analyze"} {
				t.Run(names[i]+"/"+cmd, func(t *testing.T) {
					args := append([]string{cmd, "--json", "--shards", "1"}, files...)
					want := runKwireAny(t, args...)
					for _, n := range []int{2, 4, 8} {
						args[3] = strconv.Itoa(n)
						if got := runKwireAny(t, args...); !bytes.Equal(want, got) {
							if d := os.Getenv("KWIRE_SHARDS_DUMP"); d != "" {
								_ = os.WriteFile(filepath.Join(d, "want.ndjson"), want, 0o644)
								_ = os.WriteFile(filepath.Join(d, "got.ndjson"), got, 0o644)
							}
							t.Errorf("--shards %d differs from --shards 1 (-1 +%d):\n%s", n, n, lineDiff(want, got))
						}
					}
				})
			}
		}
	}
}

// runKwireAny runs kwire and returns its output whatever its exit status
// (a damaged copy may end in an error after its output), stderr after
// stdout, without the warning of a sharded run's cross-bound clients.
func runKwireAny(t testing.TB, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	run(args, &stdout, &stderr)
	out := stdout.Bytes()
	for _, l := range bytes.SplitAfter(stderr.Bytes(), []byte("\n")) {
		if !bytes.Contains(l, []byte("consumer groups that different shards correlate")) {
			out = append(out, l...)
		}
	}
	return out
}
