//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kwire/kwire/internal/caps"
)

// needCapture skips the test unless this process may open packet sockets.
func needCapture(t testing.TB) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Skipf("live capture needs root or CAP_NET_RAW (AF_PACKET socket: %v); CI runs this as root", err)
	}
	unix.Close(fd)
}

const liveTimeout = 30 * time.Second

// server accepts connections on addr and answers each client's message
// with "re:" + message, then closes when the client does.
func server(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	return serve(t, ln)
}

func serve(t *testing.T, ln net.Listener) net.Listener {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				c.Write(append([]byte("re:"), buf[:n]...))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln
}

// talk connects to ln, sends msg, reads the answer and, unless keep,
// closes the connection.
func talk(t *testing.T, ln net.Listener, msg string, keep bool) net.Conn {
	t.Helper()
	c, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := io.ReadAtLeast(c, buf, len(msg)+3); err != nil {
		t.Fatal(err)
	}
	if !keep {
		c.Close()
	}
	return c
}

// liveRecorder records chunks (from Run's goroutine) and tells the test
// when enough connection directions have closed.
type liveRecorder struct {
	mu      sync.Mutex
	rec     recorder
	closes  int
	want    int
	enough  chan struct{}
	ticked  chan struct{}
	stopped bool
}

func newLiveRecorder(closes int) *liveRecorder {
	return &liveRecorder{want: closes, enough: make(chan struct{}), ticked: make(chan struct{}, 1)}
}

func (r *liveRecorder) Chunk(c *Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Chunk(c)
	if c.Kind == Close {
		if r.closes++; r.closes == r.want {
			close(r.enough)
		}
	}
}

func (r *liveRecorder) Tick(time.Time) {
	select {
	case r.ticked <- struct{}{}:
	default:
	}
}

// byConn renders what each connection carried, by its server port: the
// bytes of each direction and how each ended. Connections that carried no
// byte are left out: a late pure ACK after a connection's idle close
// starts a new, empty one (which decode ignores); when it comes depends on
// the kernel's timing, not on kwire.
func (r *liveRecorder) byConn() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type dirs struct{ data, end [2]string }
	m := map[string]*dirs{}
	carried := map[uint64]bool{}
	for _, c := range r.rec.chunks {
		carried[c.Conn.ID] = carried[c.Conn.ID] || c.Kind != Close
	}
	for _, c := range r.rec.chunks {
		if !carried[c.Conn.ID] {
			continue
		}
		k := fmt.Sprintf("%s>%s", c.Conn.Client.Addr(), c.Conn.Server)
		if m[k] == nil {
			m[k] = &dirs{}
		}
		switch c.Kind {
		case Data:
			m[k].data[c.Dir] += string(c.Data)
		case Gap:
			m[k].data[c.Dir] += fmt.Sprintf("[gap %d]", c.Len)
		case Close:
			m[k].end[c.Dir] += c.Reason.String()
		}
	}
	var out []string
	for k, d := range m {
		out = append(out, fmt.Sprintf("%s %q %s / %q %s", k, d.data[ToServer], d.end[ToServer], d.data[ToClient], d.end[ToClient]))
	}
	slices.Sort(out)
	return out
}

// startLive opens a live capture on lo and runs it in the background;
// stop ends it and returns Run's error.
func startLive(t *testing.T, lo *LiveOptions, opts *Options, sink Sink) (l *Live, stop func() error) {
	t.Helper()
	l, err := OpenLive(lo, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, sink) }()
	return l, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(liveTimeout):
			t.Fatal("Run did not return after cancel")
		}
		return nil
	}
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(liveTimeout):
		t.Fatalf("timed out after %s waiting for %s", liveTimeout, what)
	}
}

// TestLiveLoopback captures IPv4 and IPv6 connections on lo, and on "any":
// each byte once (the kernel filter keeps one copy of each packet), only
// the broker ports' connections, and the pcapng written (rotated) holds
// exactly the packets reassembled.
func TestLiveLoopback(t *testing.T) {
	needCapture(t)
	for _, iface := range []string{"lo", "any"} {
		t.Run(iface, func(t *testing.T) { testLiveLoopback(t, iface) })
	}
}

func testLiveLoopback(t *testing.T, iface string) {
	broker4 := server(t, "tcp4", "127.0.0.1:0")
	other := server(t, "tcp4", "127.0.0.1:0")
	ports := mustPorts(t, portOf(broker4))
	// IPv6 on the same port, when the host has ::1.
	broker6, err := net.Listen("tcp6", "[::1]:"+portOf(broker4))
	v6 := err == nil
	if v6 {
		serve(t, broker6)
	} else {
		t.Logf("no IPv6 loopback (%v): IPv4 only", err)
	}

	dir := t.TempDir()
	w, err := CreatePcapng(filepath.Join(dir, "lo.pcapng"), iface, &Rotation{Bytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	conns := 1
	if v6 {
		conns = 2
	}
	rec := newLiveRecorder(2 * conns)
	l, stop := startLive(t, &LiveOptions{Interface: iface, RingBytes: 4 << 20, TickEvery: 20 * time.Millisecond, Write: w}, &Options{Ports: ports}, rec)
	if want := "tcp port " + portOf(broker4); !strings.HasPrefix(l.Filter(), want) {
		t.Errorf("Filter() = %q, want it to start with %q", l.Filter(), want)
	}
	talk(t, other, "not kafka", false)
	talk(t, broker4, "hello4", false)
	if v6 {
		talk(t, broker6, "hello6", false)
	}
	waitFor(t, "both directions of each connection to close", rec.enough)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	want := []string{fmt.Sprintf(`127.0.0.1>127.0.0.1:%s "hello4" fin / "re:hello4" fin`, portOf(broker4))}
	if v6 {
		want = append(want, fmt.Sprintf(`::1>[::1]:%s "hello6" fin / "re:hello6" fin`, portOf(broker4)))
	}
	if d := diffLines(want, rec.byConn()); d != "" {
		t.Errorf("connections (-want +got):\n%s", d)
	}
	st := l.Stats()
	ls := st.Live
	if st.Duplicates != 0 || ls.KernelDrops != 0 || st.ConnsSeen != uint64(conns) || ls.PacketsWritten != st.Packets ||
		ls.KernelPackets != st.Packets+ls.UserFiltered {
		t.Errorf("stats: duplicates %d, kernel drops %d, conns %d (want %d), written %d of %d, kernel packets %d = %d + %d filtered?",
			st.Duplicates, ls.KernelDrops, st.ConnsSeen, conns, ls.PacketsWritten, st.Packets, ls.KernelPackets, st.Packets, ls.UserFiltered)
	}

	// The files written, read back, give the same connections.
	files := w.Files()
	if len(files) < 2 {
		t.Errorf("rotation every 600 bytes wrote %d file(s)", len(files))
	}
	fs, err := OpenFiles(files, &Options{Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	back := newLiveRecorder(-1)
	if err := fs.Run(context.Background(), back); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(rec.byConn(), back.byConn()); d != "" {
		t.Errorf("read back from %v (-live +files):\n%s", files, d)
	}
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

// TestLiveIdle checks that a quiet connection is closed after the idle
// timeout, with no packet to move the clock: the capture follows the wall
// clock while the ring is empty.
func TestLiveIdle(t *testing.T) {
	needCapture(t)
	broker := server(t, "tcp4", "127.0.0.1:0")
	rec := newLiveRecorder(2)
	l, stop := startLive(t, &LiveOptions{Interface: "lo", RingBytes: 1 << 20, TickEvery: 20 * time.Millisecond},
		&Options{Ports: mustPorts(t, portOf(broker)), IdleTimeout: time.Second}, rec)
	c := talk(t, broker, "hello", true)
	defer c.Close()
	waitFor(t, "the idle connection to close", rec.enough)
	// Let one more tick publish the counters.
	for range 2 {
		waitFor(t, "a tick", rec.ticked)
	}
	if st := l.Stats(); st.Live.ConnsIdleClosed != 1 {
		t.Errorf("ConnsIdleClosed = %d, want 1", st.Live.ConnsIdleClosed)
	}
	stop()
	got := rec.byConn()
	want := []string{fmt.Sprintf(`127.0.0.1>127.0.0.1:%s "hello" idle / "re:hello" idle`, portOf(broker))}
	if d := diffLines(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestOpenLiveErrors checks the errors a user can act on.
func TestOpenLiveErrors(t *testing.T) {
	needCapture(t)
	_, err := OpenLive(&LiveOptions{Interface: "kwire-no-such0"}, nil)
	if !errors.Is(err, ErrNoInterface) || !strings.Contains(err.Error(), "lo") {
		t.Errorf("unknown interface: %v, want ErrNoInterface naming lo", err)
	}
	caps.WithoutNetRaw(t, func() {
		_, err = OpenLive(&LiveOptions{Interface: "lo"}, nil)
	})
	if !errors.Is(err, ErrPermission) || !errors.Is(err, unix.EPERM) {
		t.Errorf("without CAP_NET_RAW: %v, want ErrPermission wrapping EPERM", err)
	}
}

// TestLoopbackNote: the filter's loopback note is said for loopback
// devices and "any", never for another device (it was printed for a veth).
func TestLoopbackNote(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var lo, other string
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 {
			lo = ifi.Name
		} else if other == "" {
			other = ifi.Name
		}
	}
	for _, tc := range []struct {
		iface, want string
	}{
		{"", "; loopback devices: outgoing copies only"},
		{"any", "; loopback devices: outgoing copies only"},
		{lo, "; loopback: outgoing copies only"},
		{other, ""},
		{"no-such-device0", ""},
	} {
		if tc.iface == "" && tc.want != "; loopback devices: outgoing copies only" {
			continue // no such device on this host
		}
		if got := loopbackNote(tc.iface); got != tc.want {
			t.Errorf("loopbackNote(%q) = %q, want %q", tc.iface, got, tc.want)
		}
	}
}
