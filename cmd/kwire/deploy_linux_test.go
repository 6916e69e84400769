//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeployUnitCapabilities: the agent unit's capability set is what
// kwire live needs. kwire (built as make build does: no cgo) runs as nobody, as
// the unit runs it (setpriv: that user, the unit's capabilities in the
// ambient and bounding sets, no_new_privs), on loopback traffic of a kfake
// cluster: with the set it captures and decodes the traffic (and drops
// the set once capturing); with none it stops with the capture error.
func TestDeployUnitCapabilities(t *testing.T) {
	needCapture(t)
	if os.Geteuid() != 0 {
		t.Skip("running kwire as another user with chosen capabilities needs root (CI runs as root)")
	}
	setpriv := needTool(t, "setpriv", "it runs kwire as the unit's user with the unit's capabilities")
	unit := readUnit(t, filepath.Join(deployDir(), "kwire-agent.service"))
	var set []string
	for _, c := range strings.Fields(unit["AmbientCapabilities"]) {
		set = append(set, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	if len(set) == 0 {
		t.Fatal("the unit gives no capability")
	}
	dir, err := os.MkdirTemp("", "kwire-deploy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // nobody must reach the binary
		t.Fatal(err)
	}
	bin := buildBinary(t, dir)

	kf, ports := newCluster(t, kfake.SeedTopics(1, "cap-topic"))
	cl := newClient(t, kf, kgo.ClientID("cap-client"), kgo.DefaultProduceTopic("cap-topic"))
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // traffic for as long as the test runs
		for ctx.Err() == nil {
			cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")})
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	run := func(caps string) (code int, stdout, stderr string) {
		var out, errb bytes.Buffer
		cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
			"--inh-caps=-all"+caps, "--ambient-caps=-all"+caps, "--bounding-set=-all"+caps, "--no-new-privs",
			"--", bin, "live", "-i", "lo", "--port", ports, "--json", "--exchanges", "--duration", "3s", "--stats-every", "1s")
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	}

	t.Run("the unit's set", func(t *testing.T) {
		code, stdout, stderr := run("," + strings.Join(set, ","))
		if code != 0 || !strings.Contains(stderr, "kwire: capturing on lo") || !strings.Contains(stderr, "capabilities dropped") {
			t.Fatalf("as nobody with %v: exit %d, want 0, capturing, capabilities dropped; stderr:\n%s", set, code, stderr)
		}
		if !strings.Contains(stdout, `"client_id":"cap-client"`) {
			t.Errorf("as nobody with %v: no exchange of the client decoded; stdout:\n%.2000s", set, stdout)
		}
	})
	t.Run("none", func(t *testing.T) {
		code, _, stderr := run("")
		if code != 1 || !strings.Contains(stderr, errNoCapNetRaw) {
			t.Errorf("as nobody without capabilities: exit %d, want 1 and %q; stderr:\n%s", code, errNoCapNetRaw, stderr)
		}
	})
}
