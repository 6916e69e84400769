package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kwire/kwire/aggregate/wire"
)

// Agents' keys of the tests (openssl rand -hex 32).
const (
	testKeyB0    = "b0 8c1f3e0d7a9b2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
	testKeyB1    = "b1 1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a"
	testKeyB2    = "b2 c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc"
	testKeyWrong = "x 0f0e0d0c0b0a09080706050403020100f0e0d0c0b0a090807060504030201000"
)

func writeKeyFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parsedKey(t *testing.T, line string) *wire.Key {
	t.Helper()
	keys, err := wire.ParseKeys([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return &keys[0]
}

// runKwireErr runs kwire and returns its exit status, stdout and stderr.
func runKwireErr(args ...string) (int, []byte, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.Bytes(), stderr.String()
}

// TestAggregateForgedAgents: three agents sign their batches with their
// own keys; writers to the same topic pose as them: one without a key as
// a new run of b1 (which would mark b1 restarted), one with b2's key as
// b1, one with a key of its own as b0's very run (its sequence numbers
// first, which would make b0's own batches duplicates), and an agent no
// key names. The aggregator holding the agents' keys (from a file, or
// the environment) drops and counts every forged batch, says so on
// stderr, and gives what kwire analyze gives of the honest agents' files;
// without keys, the forgers' groups and commits are in its output.
func TestAggregateForgedAgents(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdataDir(), "g_xbroker.b?.pcapng"))
	if len(files) != 3 {
		t.Fatalf("want 3 per-broker captures of g_xbroker, have %v", files)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/kwire"
	keyring := writeKeyFile(t, "agents.keys", "# kwire agents", testKeyB0, testKeyB1, testKeyB2)
	capture := func(name string) []string { return []string{filepath.Join(testdataDir(), name+".pcapng")} }

	// The forgers publish first.
	forged := publishAgents(t, url, []agentSpec{
		{host: "b1", run: 2, files: capture("h_member_expired")},
		{host: "b1", run: 3, files: capture("h_commit_gap"), forgeWith: parsedKey(t, testKeyB2)},
		{host: "b0", run: 1, files: capture("h_offset_reset"), forgeWith: parsedKey(t, strings.Replace(testKeyWrong, "x", "b0", 1))},
		{host: "b9", run: 1, files: capture("g_sarama"), forgeWith: parsedKey(t, strings.Replace(testKeyWrong, "x", "b9", 1))},
	})
	var honest []agentSpec
	for i, f := range files {
		line := []string{testKeyB0, testKeyB1, testKeyB2}[i]
		honest = append(honest, agentSpec{host: line[:2], files: []string{f}, keyFile: writeKeyFile(t, line[:2]+".key", line)})
	}
	publishAgents(t, url, honest)
	want, _ := normalize(t, runKwire(t, append([]string{"analyze", "--json"}, files...)...))

	check := func(t *testing.T, args ...string) {
		code, stdout, stderr := runKwireErr(append([]string{"aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got, agg := normalize(t, stdout)
		compareLines(t, want, got)
		if agg == nil || agg.Unverified != int64(forged) || agg.Duplicates != 0 || agg.Missing != 0 || agg.Restarts != 0 || len(agg.Agents) != 3 {
			t.Fatalf("aggregate line %+v: want %d unverified batches, 3 agents, no duplicate, missing or restart", agg, forged)
		}
		for _, a := range agg.Agents {
			if !strings.HasSuffix(a.Agent, "/1") || a.State != "stopped" {
				t.Errorf("agent %+v: want b0, b1, b2 of run 1, stopped", a)
			}
		}
		// Rate-limited: the first of each reason at once (unsigned, a
		// key not the agent's, an agent with no key), then one per 10 s
		// at most.
		for _, reason := range []string{"unsigned batch", "tag does not verify with the agent's key", "no key for the agent it names"} {
			if n := strings.Count(stderr, "kwire: dropped a batch naming agent"); n < 1 || n > 6 || !strings.Contains(stderr, reason) {
				t.Errorf("%d lines about dropped batches on stderr, want 3 to 6, one %q:\n%s", n, reason, stderr)
			}
		}
		if strings.Contains(stderr, "warning") || !strings.Contains(stderr, "verifying agents' batches with the keys of b0, b1, b2") {
			t.Errorf("stderr:\n%s", stderr)
		}
		t.Logf("%d lines compared, %d forged batches dropped; stderr:\n%s", len(want), agg.Unverified, stderr)
	}
	t.Run("file", func(t *testing.T) { check(t, "--agent-key-file", keyring) })
	t.Run("env", func(t *testing.T) {
		b, _ := os.ReadFile(keyring)
		t.Setenv(agentKeysEnv, string(b))
		check(t)
	})
	t.Run("no keys", func(t *testing.T) {
		code, stdout, stderr := runKwireErr("aggregate", "--json", "--from", url, "--exit-idle", "1s", "--clock-window", "0")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "warning: aggregating without agent keys") || !strings.Contains(stderr, "can pose as any agent and invent groups") {
			t.Errorf("no warning without keys:\n%s", stderr)
		}
		got, agg := normalize(t, stdout)
		if extra, _ := multisetDiff(want, got); len(extra) == 0 || agg == nil || agg.Unverified != 0 {
			t.Errorf("without keys, the forgers' lines should be there: %d extra lines, %+v", len(extra), agg)
		}
	})
}

// TestAgentKeys: the agent's key comes from --publish-key-file or
// $KWIRE_PUBLISH_KEY (the file first) and names the agent; a key that
// is not one, a keyring, or --publish-agent naming another agent are
// refused, saying why; so is a bad keyring on the aggregator.
func TestAgentKeys(t *testing.T) {
	b1 := writeKeyFile(t, "b1.key", testKeyB1)
	shared := writeKeyFile(t, "shared.key", strings.Replace(testKeyWrong, "x", "*", 1))
	ring := writeKeyFile(t, "agents.keys", testKeyB0, testKeyB1)
	short := writeKeyFile(t, "short.key", "b1 00112233")
	for _, tc := range []struct {
		name, file, env, agent string
		wantKey, wantName      string
		err                    string
	}{
		{name: "file", file: b1, wantKey: "b1", wantName: "b1"},
		{name: "env", env: testKeyB1, wantKey: "b1", wantName: "b1"},
		{name: "file before env", file: b1, env: testKeyB2, wantKey: "b1", wantName: "b1"},
		{name: "name matches", file: b1, agent: "b1", wantKey: "b1", wantName: "b1"},
		{name: "name of another agent", file: b1, agent: "b2", err: "--publish-agent b2: the key of --publish-key-file " + b1 + " is agent b1's"},
		{name: "shared key", file: shared, agent: "h7", wantKey: "*", wantName: "h7"},
		{name: "keyring", file: ring, err: "2 keys: an agent is given its own key alone"},
		{name: "env keyring", env: testKeyB0 + "\n" + testKeyB1, err: "$KWIRE_PUBLISH_KEY: 2 keys"},
		{name: "not a key", file: short, err: "line 1: agent b1: the key has 4 bytes, want at least 16"},
		{name: "no file", file: filepath.Join(t.TempDir(), "none"), err: "--publish-key-file: open"},
		{name: "none", agent: "h7", wantName: "h7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(publishKeyEnv, tc.env)
			f := &publishFlags{keyFile: tc.file, name: tc.agent}
			key, name, err := f.agentKey()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotKey := ""
			if key != nil {
				gotKey = key.Agent
			}
			if gotKey != tc.wantKey || name != tc.wantName {
				t.Errorf("key of %q, agent %q; want %q, %q", gotKey, name, tc.wantKey, tc.wantName)
			}
		})
	}
	t.Run("aggregator", func(t *testing.T) {
		bad := writeKeyFile(t, "bad.keys", testKeyB0, "b1 not-hex-at-all")
		code, _, stderr := runKwireErr("aggregate", "--from", "kafka://127.0.0.1:1/kwire", "--agent-key-file", bad)
		if code == 0 || !strings.Contains(stderr, "--agent-key-file "+bad+": line 2: agent b1: the key is not hex") {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		if strings.Contains(stderr, testKeyB0[3:19]) {
			t.Errorf("the error shows a key: %s", stderr)
		}
	})
}
