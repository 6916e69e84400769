package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestLiveReport runs kwire live --report on loopback while a kgo group
// of real clients joins, consumes and commits against kfake: SIGUSR1
// writes the report of what was captured so far (the group and its first
// generation in it), and the end writes the final one, which Chromium
// reads like an offline report: every generation, member and hazard of
// kwire live's own summary is on the page.
func TestLiveReport(t *testing.T) {
	needCapture(t)
	if testing.Short() {
		t.Skip("live capture runs real clients for a while")
	}
	browser := chromiumCtx(t)
	const groupName, topic = "report-group", "report-topic"
	kf, ports := newCluster(t, kfake.SeedTopics(3, topic))
	page := filepath.Join(t.TempDir(), "live.html")
	live := startLive(t, "-i", "lo", "--port", ports, "--json", "--stats-every", "1s", "--report", page)
	if !strings.Contains(live.stderr.String(), "report to "+page) {
		t.Errorf("the status line does not name the report: %s", live.stderr.String())
	}

	g := newGroup(t, kf, groupName, topic, 3)
	g.produce(30)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")

	// kwire live took SIGUSR1 over when it started: the test process
	// survives it.
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	live.stderr.wait(t, "the report on SIGUSR1", func() bool {
		return bytes.Contains(live.stderr.buf.Bytes(), []byte("report written to "+page+" (SIGUSR1)"))
	})
	early, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(early, []byte(`data-group="`+groupName+`"`)) || !bytes.Contains(early, []byte(`data-generation="1"`)) {
		t.Error("the report written on SIGUSR1 lacks the group or its first generation")
	}

	g.join("member-2")
	g.produce(30)
	g.settled("member-2 to join")
	g.leave("member-1")
	g.leave("member-2")
	g.prod.Close()
	live.waitClosed(t)
	if code := live.stop(t); code != 0 {
		t.Fatalf("kwire live exited %d: %s", code, live.stderr.String())
	}
	want := summaryOf(t, []byte(live.stdout.String()))
	if len(want.Groups) == 0 {
		t.Fatal("kwire live's summary has no group")
	}
	checkReport(t, want, readReport(t, browser, page, ""))
}
