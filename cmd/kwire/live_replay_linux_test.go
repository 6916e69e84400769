package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/internal/captest"
)

// TestLiveReplayReordered replays copies of real captures, reordered as a
// loaded host delivers them (captest.Reorder: FIN/RST before the last
// data, data before the handshake's last ACK, swapped segments), onto one
// end of a veth pair at their captured pace, while CPU hogs keep both
// cores busy, and runs kwire live on the other end, writing what it
// captures (-w). With no kernel drop there must be no gap; kwire live must
// tell exactly the story kwire analyze tells of the packets it captured;
// and those packets must carry every exchange of the original capture,
// nothing more, and the same anomalies (reorderView of kwire read's
// exchange and anomaly lines: times aside).
//
// The story is not compared with the original's: on this virtual machine
// the replay keeps the captured pace to within tens of milliseconds at
// worst (it logs how late it sent), which moves judgements made at a
// timeout (h_non_owner_fetch's member is removed 19 ms after its session
// timeout). TestReorderSame shows that the reordered file tells the
// original's story.
func TestLiveReplayReordered(t *testing.T) {
	needCapture(t)
	if testing.Short() {
		t.Skip("replays captures at their captured pace for about 30 s")
	}
	tx, rx := newVeth(t)
	hogs(t, runtime.NumCPU())
	for _, name := range []string{"h_commit_on_receive", "g_stable", "h_non_owner_fetch", "h_848_zombie"} {
		t.Run(name, func(t *testing.T) {
			orig := filepath.Join(testdataDir(), name+".pcapng")
			want, wantErr := runOutput([]string{"analyze", "--json", orig})
			if !strings.HasPrefix(wantErr, "exit 0") {
				t.Fatalf("kwire analyze of the original: %s", wantErr)
			}
			ports := brokerPorts(t, want)
			r, err := captest.Reorder(readFile(t, orig), nil, 7)
			if err != nil {
				t.Fatal(err)
			}
			captured := filepath.Join(t.TempDir(), "live.pcapng")
			live := startLive(t, "-i", rx, "--port", ports, "--json", "--stats-every", "1s", "-w", captured)
			sent := replay(t, tx, r.Data)
			live.waitClosed(t)
			if code := live.stop(t); code != 0 {
				t.Fatalf("kwire live exited %d: %s", code, live.stderr.String())
			}
			st := lastStats(live.stdout.String())
			t.Logf("replayed %d packets (%d FIN/RST moved, %d early data, %d swapped); live: %v packets, %v out of order, %v kernel drops, %v gaps",
				sent, r.ClosesMoved, r.EarlyData, r.Swapped, st["packets"], st["out_of_order"], st["kernel_drops"], st["gaps"])
			if st["kernel_drops"] == 0 && (st["gaps"] != 0 || st["gap_bytes"] != 0 || st["buffer_limit_gaps"] != 0) {
				t.Errorf("no kernel drop, yet %v gaps (%v bytes, %v at the buffer limit)", st["gaps"], st["gap_bytes"], st["buffer_limit_gaps"])
			}
			if st["kernel_drops"] != 0 {
				t.Skipf("the kernel dropped %v packets: the story may rightly differ", st["kernel_drops"])
			}
			if st["packets"] != float64(sent) || st["packets_written"] != float64(sent) {
				t.Errorf("kwire live saw %v packets and wrote %v, of the %d replayed", st["packets"], st["packets_written"], sent)
			}

			offline, offErr := runOutput([]string{"analyze", "--json", "--port", ports, captured})
			if !strings.HasPrefix(offErr, "exit 0") {
				t.Fatalf("kwire analyze of what kwire live captured: %s", offErr)
			}
			if d := diffLines(nonStats(string(offline)), nonStats(live.stdout.String())); d != "" {
				t.Errorf("kwire live and kwire analyze of the packets it captured tell other stories (-analyze +live):\n%s", d)
			}
			wantX, _ := runOutput([]string{"read", "--json", "--port", ports, orig})
			gotX, _ := runOutput([]string{"read", "--json", "--port", ports, captured})
			exchanges := func(out []byte) []string { // the exchanges and anomalies, not the story nor the stats
				var keep []string
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, `"type":"exchange"`) || strings.Contains(l, `"type":"anomaly"`) {
						keep = append(keep, l)
					}
				}
				return reorderView(t, []byte(strings.Join(keep, "\n")))
			}
			if d := diffLines(exchanges(wantX), exchanges(gotX)); d != "" {
				t.Errorf("the packets kwire live captured carry other exchanges than the original capture (-original +captured):\n%s", d)
			}
		})
	}
}

// brokerPorts returns the ports of the brokers in an analyze summary, as
// a --port list.
func brokerPorts(t *testing.T, out []byte) string {
	t.Helper()
	var ports []string
	for _, l := range bytes.Split(out, []byte("\n")) {
		var s struct {
			Type    string
			Brokers map[string]string
		}
		if json.Unmarshal(l, &s) != nil || s.Type != "summary" {
			continue
		}
		for _, a := range s.Brokers {
			if _, p, err := net.SplitHostPort(a); err == nil {
				ports = append(ports, p)
			}
		}
	}
	if len(ports) == 0 {
		t.Fatal("no brokers in the summary")
	}
	sort.Strings(ports)
	return strings.Join(ports, ",")
}

// newVeth creates a veth pair (MTU 65535: the captures come from loopback,
// whose segments reach 64 KiB) and returns its ends' names; it is removed
// when the test ends.
func newVeth(t testing.TB) (tx, rx string) {
	t.Helper()
	tx, rx = fmt.Sprintf("kwr%dt", os.Getpid()%100000), fmt.Sprintf("kwr%dr", os.Getpid()%100000)
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := ip("link", "add", tx, "type", "veth", "peer", "name", rx); err != nil {
		t.Skipf("no veth pair (%v): this test needs root and veth support; CI runs it as root", err)
	}
	t.Cleanup(func() { ip("link", "del", tx) })
	for _, dev := range []string{tx, rx} {
		os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644) // no router solicitations
		if err := ip("link", "set", dev, "mtu", "65535", "up"); err != nil {
			t.Fatal(err)
		}
	}
	return tx, rx
}

// hogs keeps n processes spinning on the CPU until the test ends.
func hogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// replay sends the Ethernet frames of a pcapng capture out of dev at
// their captured pace and returns how many it sent. The replayer stands
// for the network, which a host's CPU load does not slow: it is a process
// of its own (this test binary, KWIRE_TEST_REPLAY), its thread at
// real-time priority (SCHED_FIFO), sleeping in the kernel until each
// frame's time; so the hogs starve kwire, not the traffic. It logs how
// late the frames were sent.
func replay(t *testing.T, dev string, capture []byte) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.pcapng")
	if err := os.WriteFile(path, capture, 0o600); err != nil {
		t.Fatal(err)
	}
	return replayFile(t, dev, path)
}

// replayFile is replay of the capture in file path.
func replayFile(t testing.TB, dev, path string) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "KWIRE_TEST_REPLAY="+dev+" "+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v: %s", err, out)
	}
	t.Logf("replay: %s", bytes.TrimSpace(out))
	var n int
	if _, err := fmt.Sscanf(string(out), "sent %d frames", &n); err != nil {
		t.Fatalf("replay said %q", out)
	}
	return n
}

// replayChild is the replaying process: arg is "DEV FILE".
func replayChild(arg string) int {
	dev, path, _ := strings.Cut(arg, " ")
	if err := replayFrames(dev, path); err != nil {
		fmt.Println("replay:", err)
		return 1
	}
	return 0
}

func replayFrames(dev, path string) error {
	runtime.LockOSThread()
	debug.SetGCPercent(-1) // the frames are read up front: nothing to collect
	prio := "SCHED_FIFO"
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 50}, 0); err != nil {
		prio = fmt.Sprintf("normal priority (SCHED_FIFO: %v)", err)
	}
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		return err
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		return fmt.Errorf("replay needs Ethernet frames, the capture has %v", r.LinkType())
	}
	type frame struct {
		data []byte
		at   time.Duration // after the first
	}
	var frames []frame
	var first time.Time
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if first.IsZero() {
			first = ci.Timestamp
		}
		frames = append(frames, frame{data, ci.Timestamp.Sub(first)})
	}
	if len(frames) == 0 {
		return fmt.Errorf("no frames in %s", path)
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(proto))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return err
	}
	late := make([]time.Duration, 0, len(frames))
	var start, now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &start)
	for i, f := range frames {
		at := unix.NsecToTimespec(start.Nano() + int64(f.at))
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &at, nil) == unix.EINTR {
		}
		if _, err := unix.Write(fd, f.data); err != nil {
			return fmt.Errorf("send frame %d (%d bytes) on %s: %w", i+1, len(f.data), dev, err)
		}
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
		late = append(late, time.Duration(now.Nano()-at.Nano()))
	}
	slices.Sort(late)
	fmt.Printf("sent %d frames over %v at %s, late by median %v, p99 %v, max %v\n", len(frames), frames[len(frames)-1].at.Round(time.Millisecond),
		prio, late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
