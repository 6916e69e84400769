package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/kwire/kwire/tui"
)

// tmuxSession is a program running in a detached tmux session of its own
// server, 80x24, read with capture-pane.
type tmuxSession struct {
	t      *testing.T
	tmux   string
	sock   string
	stderr string // the program's stderr, for when it hangs
	status string // the file the shell writes the exit status to
}

// startTmux runs command under a private tmux server; it skips the test
// when tmux is missing.
func startTmux(t *testing.T, command string) *tmuxSession {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed: the terminal UI end-to-end test needs it (make test-deps installs it)")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "tmux.conf")
	// escape-time 0 passes esc on at once.
	if err := os.WriteFile(conf, []byte("set -g escape-time 0\nset -g status off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, tmux: tmux, sock: filepath.Join(dir, "sock"), stderr: filepath.Join(dir, "stderr"), status: filepath.Join(dir, "status")}
	// The shell keeps the exit status in a file: tmux may see the pane
	// die before it learns the status.
	s.run("-f", conf, "new-session", "-d", "-s", "kwire", "-x", "80", "-y", "24",
		"GOTRACEBACK=all "+command+" 2>"+s.stderr+"; echo $? >"+s.status+".tmp; mv "+s.status+".tmp "+s.status)
	t.Cleanup(func() { exec.Command(s.tmux, "-S", s.sock, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.tmux, append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys sends tmux key names (Enter, Escape, Tab) and literal text.
func (s *tmuxSession) keys(keys ...string) {
	s.t.Helper()
	for _, k := range keys {
		switch k {
		case "Enter", "Escape", "Tab", "BTab":
			s.run("send-keys", "-t", "kwire", k)
		default:
			s.run("send-keys", "-t", "kwire", "-l", k)
		}
	}
}

func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "kwire") }

// waitFor waits (up to a deadline) until every regexp matches a line of
// the screen, and returns the screen.
func (s *tmuxSession) waitFor(res ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		scr := s.screen()
		missing := ""
		for _, re := range res {
			if !regexp.MustCompile("(?m)" + re).MatchString(scr) {
				missing = re
				break
			}
		}
		if missing == "" {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q:\n%s", missing, scr)
		}
		<-tick.C
	}
}

// exited waits until the program ended and returns its exit status. If
// it does not end, it gets SIGQUIT and the test fails with its goroutines.
func (s *tmuxSession) exited() string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := os.ReadFile(s.status); err == nil {
			return strings.TrimSpace(string(st))
		}
		if time.Now().After(deadline) {
			scr := s.screen()
			shell := strings.TrimSpace(s.run("display-message", "-p", "-t", "kwire", "#{pane_pid}"))
			kids, _ := os.ReadFile("/proc/" + shell + "/task/" + shell + "/children")
			for _, k := range strings.Fields(string(kids)) {
				if pid, err := strconv.Atoi(k); err == nil {
					syscall.Kill(pid, syscall.SIGQUIT)
				}
			}
			for range 100 {
				if _, err := os.Stat(s.status); err == nil {
					break
				}
				<-tick.C
			}
			dump, _ := os.ReadFile(s.stderr)
			s.t.Fatalf("kwire did not exit; screen:\n%s\nstderr after SIGQUIT:\n%s", scr, dump)
		}
		<-tick.C
	}
}

// buildKwire builds the kwire binary into a temporary directory.
func buildKwire(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "kwire")
	if out, err := exec.Command(goCmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func capturePath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(testdataDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTUIEndToEnd runs the built `kwire analyze --tui` on real-client
// captures in tmux and drives it as a user would.
func TestTUIEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the terminal UI end-to-end test needs it (make test-deps installs it)")
	}
	bin := buildKwire(t)
	t.Run("filter, drill in, evidence, help, quit", func(t *testing.T) { tuiDrive(t, bin) })
	t.Run("paused, stepped, resumed, fast", func(t *testing.T) { tuiPaused(t, bin) })
}

// tuiDrive filters the groups, drills into one, opens a hazard's
// evidence, reads the help and quits.
func tuiDrive(t *testing.T, bin string) {
	s := startTmux(t, bin+" analyze --tui "+capturePath(t, "h_offset_reset.pcapng"))

	s.waitFor(`^kwire \[1 Groups\]  2 Hazards \(3\)`, `^hor-fresh +empty +1 +0/1`, `^hor-lagging +empty +3 +0/\d+ .* C1 I1`,
		`^h_off\S* │ \d+pkt \S+ │ drop 0 gap 0 resync 0 │ .* replay done \d\d:\d\d:\d\d$`)

	s.keys("/", "lagging", "Enter")
	scr := s.waitFor(`filter:lagging`, `^hor-lagging `)
	if strings.Contains(scr, "hor-fresh ") {
		t.Fatalf("filter:lagging still shows hor-fresh:\n%s", scr)
	}

	s.keys("Enter")
	s.waitFor(`› hor-lagging`, `^hor-lagging  classic consumer/\S+  state EMPTY  generation 3$`,
		`^MEMBERS 0 live of \d+$`, `^\S+ +hor-\S+ +127\.0\.0\.1 +left +\d+ +- +hor-orders\[0\]$`,
		`^GENERATIONS \d+, newest first$`)

	// Two escapes in a row read as alt-escape: wait for each to land.
	s.keys("Escape") // back to Groups
	s.waitFor(`^GROUP `, `filter:lagging`)
	s.keys("Escape") // clear the filter
	s.waitFor(`^hor-fresh `, `^hor-lagging `)

	s.keys("Tab", "s", "g", "Enter") // Hazards, most severe first, the first one
	s.waitFor(`› evidence`, `^CRIT offset_reset at \d\d:\d\d:\d\d\.\d{3}$`, `^hor-lagging hor-orders/0: fetch offset 50 was out of range`,
		`^EVIDENCE \d+ exchange`, `^\d\d:\d\d:\d\d\.\d{6} +c\d+ 127\.0\.0\.1:\d+ > 127\.0\.0\.1:\d+ (Fetch|ListOffsets)`)

	s.keys("?")
	s.waitFor(`^kwire keys`)
	s.keys("G") // the help's end: longer than the screen
	s.waitFor(`^q ctrl-c +quit$`)
	s.keys("Escape")
	s.waitFor(`› evidence`)
	s.keys("Escape")
	s.waitFor(`^TIME +SEVERITY +KIND +GROUP +SUMMARY$`)

	s.keys("q")
	if st := s.exited(); st != "0" {
		t.Fatalf("kwire exited with status %s", st)
	}
}

// tuiPaused starts a paused replay, steps it, then lets it run to the end
// as fast as possible.
func tuiPaused(t *testing.T, bin string) {
	s := startTmux(t, bin+" analyze --tui --replay=paused --step=2s "+capturePath(t, "g_churn.pcapng"))
	s.waitFor(`PAUSED$`, `no consumer group seen yet`)
	s.keys("n", "n")
	s.waitFor(`PAUSED \d\d:\d\d:\d\d$`, `^gc-group +\w+ +\d+ `) // the capture's clock
	s.keys("p", "f")                                            // resume at capture pace, then as fast as possible
	s.waitFor(`replay done \d\d:\d\d:\d\d$`, `^gc-group +empty +10 +0/4 `)
	s.keys("q")
	if st := s.exited(); st != "0" {
		t.Fatalf("kwire exited with status %s", st)
	}
}

// TestReplayTUIDraws replays a capture at 20x capture pace under the UI
// drawing on a simulation screen, as kwire analyze --tui wires it (run it
// with -race: the pipeline and the UI share only frames), and checks the
// screen it ends on.
func TestReplayTUIDraws(t *testing.T) {
	var cf commonFlags
	var tf tuiFlags
	fs := newFlagSet("analyze", "", io.Discard)
	cf.register(fs)
	tf.register(fs)
	if err := fs.Parse([]string{"--tui", "--replay=real", "--speed=20"}); err != nil {
		t.Fatal(err)
	}
	sim := tcell.NewSimulationScreen("UTF-8")
	sim.SetSize(80, 24)
	p := newPipeline(&cf, io.Discard, false)
	err := p.replayTUI([]string{capturePath(t, "g_churn.pcapng")}, &cf, &tf, sim, func(ui *tui.UI) { ui.Stop() })
	if err != nil {
		t.Fatal(err)
	}
	feed := p.tap.(*tui.Feed)
	if n := feed.Published(); n < 3 {
		t.Errorf("%d frames published over a 0.6s replay, want one every 250ms at least", n)
	}
	snap := p.corr.Snapshot()
	if len(snap.Groups) != 1 || snap.Groups[0].Generation != 10 {
		t.Errorf("the replay did not reach the end: %+v", snap.Groups)
	}
}
