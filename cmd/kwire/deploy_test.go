package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDir holds the files docs/deploy.md names.
func deployDir() string { return filepath.Join("..", "..", "deploy") }

// needTool returns the path of a tool a test needs beyond Go, skipping
// the test without it, but failing it under CI=true (make test-deps
// installs it).
func needTool(t *testing.T, name, why string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s is missing (make test-deps installs it): %s", name, why)
	}
	t.Skipf("%s is missing (make test-deps installs it): %s", name, why)
	return ""
}

// unit is a systemd unit file's settings, by key (the last value when a
// key repeats; continuation lines joined).
type unit map[string]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	u := unit{}
	text := strings.ReplaceAll(string(readFile(t, path)), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		u[k] = strings.Join(strings.Fields(v), " ")
	}
	return u
}

// execArgs are the arguments of a unit's ExecStart after the binary, with
// the environment file's variables given values.
func (u unit) execArgs(t *testing.T, vars map[string]string) []string {
	t.Helper()
	var args []string
	for i, f := range strings.Fields(u["ExecStart"]) {
		if i == 0 {
			if f != "/usr/local/bin/kwire" {
				t.Fatalf("ExecStart runs %s, want /usr/local/bin/kwire (docs/deploy.md installs it there)", f)
			}
			continue
		}
		for k, v := range vars {
			f = strings.ReplaceAll(f, "${"+k+"}", v)
		}
		if strings.Contains(f, "${") {
			t.Fatalf("ExecStart: %s has no value in the test", f)
		}
		args = append(args, f)
	}
	return args
}

// parseLive parses kwire live's arguments as cmdLive does.
func parseLive(t *testing.T, args []string) *liveFlags {
	t.Helper()
	if len(args) == 0 || args[0] != "live" {
		t.Fatalf("arguments %v: want kwire live", args)
	}
	var f liveFlags
	fs := flag.NewFlagSet("live", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		t.Fatalf("kwire %v: %v (arguments left: %v)", args, err, fs.Args())
	}
	return &f
}

// agentMemory is what a kwire live agent may use: its soft limit (the
// budgets and the headroom, memory.go), the kernel ring, the publish
// buffer, and runtimeSlack for the runtime, stacks and the binary.
func agentMemory(f *liveFlags) int64 {
	const runtimeSlack = 128 << 20
	return f.memoryLimit() + int64(f.ringMB)<<20 + int64(f.publish.bufferMB)<<20 + runtimeSlack
}

var systemdSizeRE = regexp.MustCompile(`^(\d+)([KMG]?)$`)

// systemdBytes is a MemoryMax value in bytes (systemd's K, M and G are
// powers of 1024).
func systemdBytes(t *testing.T, s string) int64 {
	t.Helper()
	m := systemdSizeRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("memory size %q: want a number with K, M or G", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n << map[string]int{"": 0, "K": 10, "M": 20, "G": 30}[m[2]]
}

// TestDeployUnits: the systemd units pass systemd-analyze verify with no
// word (it warns of unknown keys and bad values, and exits 0); their
// kwire command lines parse; the agent's MemoryMax is what its budgets
// add up to (agentMemory), rounded up by less than 16 MiB; and the
// DaemonSet is well-formed YAML of a DaemonSet that runs the agent with
// the unit's capabilities, budgets and memory limit.
func TestDeployUnits(t *testing.T) {
	agent := readUnit(t, filepath.Join(deployDir(), "kwire-agent.service"))
	vars := map[string]string{"KWIRE_PORTS": "9092", "KWIRE_PUBLISH": "kafka://k1:9093/kwire", "KWIRE_FROM": "kafka://k1:9093/kwire"}
	f := parseLive(t, agent.execArgs(t, vars))
	want, got := agentMemory(f), systemdBytes(t, agent["MemoryMax"])
	if got < want || got >= want+16<<20 {
		t.Errorf("MemoryMax=%s (%d MiB): want the agent's budgets, %d MiB, rounded up by less than 16 MiB", agent["MemoryMax"], got>>20, want>>20)
	}
	if agent["CapabilityBoundingSet"] != agent["AmbientCapabilities"] || agent["NoNewPrivileges"] != "yes" {
		t.Errorf("capabilities: bounding set %q, ambient %q, NoNewPrivileges %q: want the same set and yes",
			agent["CapabilityBoundingSet"], agent["AmbientCapabilities"], agent["NoNewPrivileges"])
	}

	agg := readUnit(t, filepath.Join(deployDir(), "kwire-aggregate.service"))
	aggArgs := agg.execArgs(t, vars)
	var af aggregateFlags
	fs := flag.NewFlagSet("aggregate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	af.register(fs)
	if len(aggArgs) == 0 || aggArgs[0] != "aggregate" || fs.Parse(aggArgs[1:]) != nil || fs.NArg() > 0 {
		t.Errorf("the aggregator's ExecStart does not parse as kwire aggregate: %v", aggArgs)
	}
	if agg["CapabilityBoundingSet"] != "" || agg["AmbientCapabilities"] != "" {
		t.Errorf("the aggregator captures nothing: want no capability, have %q", agg["CapabilityBoundingSet"])
	}

	t.Run("daemonset", func(t *testing.T) { checkDaemonSet(t, agent, f) })

	t.Run("systemd-analyze verify", func(t *testing.T) {
		sa := needTool(t, "systemd-analyze", "it checks the systemd units")
		// verify wants ExecStart's binary to be there and executable:
		// the test binary stands in for /usr/local/bin/kwire.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var paths []string
		for _, name := range []string{"kwire-agent.service", "kwire-aggregate.service"} {
			b := bytes.ReplaceAll(readFile(t, filepath.Join(deployDir(), name)), []byte("/usr/local/bin/kwire"), []byte(self))
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		out, err := exec.Command(sa, append([]string{"verify"}, paths...)...).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
}

// checkDaemonSet holds the DaemonSet to the agent's systemd unit.
func checkDaemonSet(t *testing.T, agent unit, unitFlags *liveFlags) {
	var ds struct {
		Kind string
		Spec struct {
			Template struct {
				Spec struct {
					HostNetwork bool `yaml:"hostNetwork"`
					Containers  []struct {
						Args      []string
						Resources struct {
							Limits struct{ Memory string }
						}
						SecurityContext struct {
							AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
							Capabilities             struct{ Add, Drop []string }
						} `yaml:"securityContext"`
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(deployDir(), "kwire-agent-daemonset.yaml")), &ds); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	if ds.Kind != "DaemonSet" || !ds.Spec.Template.Spec.HostNetwork || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want a DaemonSet on the host's network with one container: %+v", ds)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	var caps []string
	for _, c := range strings.Fields(agent["AmbientCapabilities"]) {
		caps = append(caps, strings.TrimPrefix(c, "CAP_"))
	}
	if strings.Join(c.SecurityContext.Capabilities.Add, " ") != strings.Join(caps, " ") ||
		strings.Join(c.SecurityContext.Capabilities.Drop, " ") != "ALL" ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("securityContext %+v: want ALL dropped, the unit's %v added, no privilege escalation", c.SecurityContext, caps)
	}
	f := parseLive(t, c.Args)
	if agentMemory(f) != agentMemory(unitFlags) {
		t.Errorf("the DaemonSet's budgets add up to %d MiB, the unit's to %d MiB", agentMemory(f)>>20, agentMemory(unitFlags)>>20)
	}
	if lim := strings.TrimSuffix(c.Resources.Limits.Memory, "i"); lim != agent["MemoryMax"] {
		t.Errorf("memory limit %s, want the unit's MemoryMax %s", c.Resources.Limits.Memory, agent["MemoryMax"])
	}
}
