//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kwireInTmux is a command line that runs this test binary as kwire (see
// TestMain) with args, for startTmux.
func kwireInTmux(t *testing.T, args string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return "KWIRE_TEST_MAIN=1 " + exe + " " + args
}

// TestLiveTUIEndToEnd runs `kwire live --tui` in tmux, on lo and with
// --ebpf, while a kgo consumer group of two members consumes from kfake
// and commits. It checks that the UI shows the group and its members and
// the capture's counters in the status bar, then quits with q: kwire must
// stop the capture, exit 0 and write the final summary on the terminal
// the UI gave back.
func TestLiveTUIEndToEnd(t *testing.T) {
	needCapture(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the terminal UI end-to-end test needs it (make test-deps installs it)")
	}
	t.Run("lo", func(t *testing.T) { liveTUIDrive(t, "-i lo", "lo") })
	t.Run("ebpf", func(t *testing.T) {
		needEBPF(t)
		liveTUIDrive(t, "--ebpf", "ebpf")
	})
}

// liveTUIDrive runs kwire live --tui capturing as how says (-i lo,
// --ebpf) against a consumer group and drives the UI; source is what the
// status bar names.
func liveTUIDrive(t *testing.T, how, source string) {
	const groupName, topic = "tui-group", "tui-topic"
	kf, ports := newCluster(t, kfake.SeedTopics(6, topic))
	s := startTmux(t, kwireInTmux(t, "live "+how+" --port "+ports+" --tui"))
	// The pane stays once kwire exits, with what it wrote after the UI.
	s.run("set-option", "-t", "kwire", "remain-on-exit", "on")
	s.waitFor(`^kwire \[1 Groups\]`, `no consumer group seen yet`, `^`+source+` │ .*drop 0 gap 0 resync 0 .* live$`)

	g := newGroup(t, kf, groupName, topic, 6)
	g.produce(20)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")
	g.join("member-2")
	g.produce(20)
	g.settled("member-2 to join")

	s.waitFor(`^tui-group +stable +\d+ +2/2 `,
		`^`+source+` │ \d+pkt \S+ │ drop 0 gap 0 resync 0 │ \S+ ev/s +live \d\d:\d\d:\d\d$`)
	s.keys("Enter")
	s.waitFor(`› tui-group`, `^tui-group  classic consumer/\S+  state STABLE  generation \d+$`, `^MEMBERS 2 live of 2$`,
		`^\S+ +member-1 +127\.0\.0\.1 +(\S+ +)?live `, `^\S+ +member-2 +127\.0\.0\.1 +(\S+ +)?live `)

	s.keys("q")
	if st := s.exited(); st != "0" {
		stderr, _ := os.ReadFile(s.stderr)
		t.Fatalf("kwire exited with status %s; stderr:\n%s", st, stderr)
	}
	// -J joins the lines the 80 columns wrapped; -S - adds the history.
	after := s.run("capture-pane", "-p", "-J", "-S", "-", "-t", "kwire")
	for _, re := range []string{`^== group tui-group \(classic, consumer/\S+\) state \w+, generation \d+`,
		`^  \S+ +member-1@127\.0\.0\.1 +live `, `^  \S+ +member-2@127\.0\.0\.1 +live `,
		`^-- \d+ packets, .*, kernel dropped 0 of \d+ packets`} {
		if !regexp.MustCompile("(?m)" + re).MatchString(after) {
			t.Errorf("the terminal after the UI lacks %q:\n%s", re, after)
		}
	}
	if strings.Contains(after, "kwire [1 Groups]") {
		t.Errorf("the UI's screen is still on the terminal after it quit:\n%s", after)
	}
	stderr, err := os.ReadFile(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stderr), "kwire: capturing on ") {
		t.Errorf("stderr lacks the status line:\n%s", stderr)
	}
}

// TestLiveTUINoTerminal checks that kwire live --tui without a terminal
// (a new session has no controlling terminal) says so before it captures.
func TestLiveTUINoTerminal(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "live", "-i", "lo", "--tui")
	cmd.Env = append(os.Environ(), "KWIRE_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("kwire live --tui without a terminal: %v, want exit status 1; stderr:\n%s", err, stderr.String())
	}
	const want = "kwire: --tui needs a terminal (open /dev/tty: no such device or address): leave it out to get output lines\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}
}
