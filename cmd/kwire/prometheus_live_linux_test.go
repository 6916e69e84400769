package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func init() { liveMetricsTarget = replayedLive }

// replayedLive runs kwire live --metrics on one end of a veth pair while
// the capture called name is replayed onto the other at its captured pace
// (TestLiveReplayReordered's replay), and returns the metrics address
// once the replay is over; kwire live runs until the test ends. Without
// root (no AF_PACKET socket) it returns why not.
func replayedLive(t *testing.T, name string) (addr, why string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return "", fmt.Sprintf("live capture needs root or CAP_NET_RAW: %v", err)
	}
	unix.Close(fd)
	orig := filepath.Join(testdataDir(), name+".pcapng")
	ports := brokerPorts(t, runKwire(t, "analyze", "--json", orig))
	tx, rx := newVeth(t)
	live := startLive(t, "-i", rx, "--port", ports, "--json", "--stats-every", "1s", "--metrics", "127.0.0.1:0")
	t.Cleanup(func() { live.stop(t) })
	if live.metricsURL == "" {
		t.Fatalf("no metrics address in kwire live's status line: %s", live.stderr.String())
	}
	sent := replay(t, tx, readFile(t, orig))
	live.waitClosed(t)
	t.Logf("kwire live captured a replay of %s (%d packets)", name, sent)
	u, err := url.Parse(live.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(u.Host, "/"), ""
}
