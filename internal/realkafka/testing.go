package realkafka

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// StartT starts a cluster for a test and stops it when the test ends. When
// java or the jars are missing it skips the test saying what is missing and
// how to fix it, or fails it when CI=true (CI must run these tests). When
// the test fails, the nodes' directories (server.properties, server.log,
// data) are kept and named in the test log with the end of each server.log;
// otherwise they are removed.
func StartT(t testing.TB, opts *Options) *Cluster {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "realkafka-"+sanitize(t.Name())+"-")
		if err != nil {
			t.Fatal(err)
		}
		o.Dir = dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, &o)
	keep := func() {
		if t.Failed() {
			t.Logf("realkafka: broker logs kept in %s", o.Dir)
			logs, _ := filepath.Glob(filepath.Join(o.Dir, "node*", "server.log"))
			for _, l := range logs {
				t.Logf("realkafka: end of %s:\n%s", l, tail(l, 15))
			}
			return
		}
		os.RemoveAll(o.Dir)
	}
	if err != nil {
		if errors.Is(err, ErrMissing) {
			os.RemoveAll(o.Dir)
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %v", err)
			}
			t.Skip(err)
		}
		t.Errorf("realkafka: start: %v", err)
		keep()
		t.FailNow()
	}
	t.Logf("realkafka: %d-node %s cluster (Kafka %s) ready in %v (format %v, JVMs to ready %v); client listeners %v",
		len(c.nodes), c.opts.Layout, c.opts.Version, time.Since(start).Round(time.Millisecond),
		c.Formatted.Round(time.Millisecond), c.Ready.Round(time.Millisecond), c.Addrs())
	t.Cleanup(func() {
		c.Stop()
		keep()
	})
	return c
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, s)
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// BuildKwire builds cmd/kwire (CGO_ENABLED=0, as shipped) into the test's
// temporary directory and returns its path: the real-Kafka tests analyse
// their captures with the binary an operator runs.
func BuildKwire(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kwire")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kwire/kwire/cmd/kwire")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build kwire: %v\n%s", err, out)
	}
	return bin
}

// DiffMaps is a (-want +got) diff of two maps, one line per differing
// key, in key order; "" when they are equal.
func DiffMaps[K cmp.Ordered, V any](want, got map[K]V) string {
	keys := make([]K, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		if wok == gok && reflect.DeepEqual(w, g) {
			continue
		}
		if wok {
			fmt.Fprintf(&b, "-%v: %+v\n", k, w)
		}
		if gok {
			fmt.Fprintf(&b, "+%v: %+v\n", k, g)
		}
	}
	return b.String()
}
