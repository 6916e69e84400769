//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
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

// waitTimeout bounds every wait of these tests.
const waitTimeout = 60 * time.Second

// watched is state guarded by a mutex whose changes wake waiters.
type watched struct {
	mu      sync.Mutex
	changed chan struct{}
}

func (w *watched) init() { w.changed = make(chan struct{}) }

// update runs f under the lock and wakes the waiters.
func (w *watched) update(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f()
	close(w.changed)
	w.changed = make(chan struct{})
}

// wait returns once cond (run under the lock) holds, or fails the test.
func (w *watched) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, ch := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
	}
}

// output is an io.Writer whose content can be waited on.
type output struct {
	watched
	buf bytes.Buffer
}

func newOutput() *output { o := &output{}; o.init(); return o }

func (o *output) Write(p []byte) (int, error) {
	o.update(func() { o.buf.Write(p) })
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// liveCmd is `kwire live` running in this process.
type liveCmd struct {
	stdout, stderr *output
	done           chan int
	metricsURL     string
}

var metricsRE = regexp.MustCompile(`metrics on (http://\S+/metrics)`)

// startLive runs `kwire live args...` in a goroutine and returns once it
// is capturing.
func startLive(t *testing.T, args ...string) *liveCmd {
	t.Helper()
	l := &liveCmd{stdout: newOutput(), stderr: newOutput(), done: make(chan int, 1)}
	go func() { l.done <- run(append([]string{"live"}, args...), l.stdout, l.stderr) }()
	const ready = "kwire: capturing on"
	exited := false
	go func() {
		// Wake the waiter if kwire exits before it is ready.
		code := <-l.done
		l.stderr.update(func() { exited = true })
		l.done <- code
	}()
	l.stderr.wait(t, "kwire live to start", func() bool { return exited || bytes.Contains(l.stderr.buf.Bytes(), []byte(ready)) })
	if !strings.Contains(l.stderr.String(), ready) {
		t.Fatalf("kwire live exited early: %s", l.stderr.String())
	}
	if m := metricsRE.FindStringSubmatch(l.stderr.String()); m != nil {
		l.metricsURL = m[1]
	}
	t.Cleanup(func() { // after a Fatalf too: what kwire saw (drops, open connections...)
		if t.Failed() {
			t.Logf("kwire's last stats: %v\nkwire's stderr: %s", lastStats(l.stdout.String()), l.stderr.String())
			keepCapture(t, args)
		}
	})
	return l
}

// keepCapture copies the capture file a failed test's kwire live was
// writing (-w) out of the test's directory, which is removed, and logs
// where: what kwire saw can then be read again (a connection it never saw
// close, say).
func keepCapture(t *testing.T, args []string) {
	i := slices.Index(args, "-w")
	if i < 0 || i+1 >= len(args) {
		return
	}
	b, err := os.ReadFile(args[i+1])
	if err != nil {
		t.Logf("keeping the capture: %v", err)
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	kept := filepath.Join(os.TempDir(), fmt.Sprintf("kwire-failed-%s-%d.pcapng", name, time.Now().Unix()))
	if err := os.WriteFile(kept, b, 0o644); err != nil {
		t.Logf("keeping the capture: %v", err)
		return
	}
	t.Logf("the capture kwire live wrote is kept in %s", kept)
}

// waitClosed waits until kwire has seen connections and every one of them
// closed.
func (l *liveCmd) waitClosed(t *testing.T) {
	t.Helper()
	l.stdout.wait(t, "every connection to close", func() bool {
		st := lastStats(l.stdout.buf.String())
		return st["conns_seen"] > 0 && st["conns_open"] == 0
	})
}

// stop sends SIGINT, as a user's Ctrl-C would, and returns the exit code.
func (l *liveCmd) stop(t *testing.T) int {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-l.done:
		return code
	case <-time.After(waitTimeout):
		t.Fatalf("kwire live did not stop on SIGINT; stderr:\n%s", l.stderr.String())
	}
	return -1
}

// lastStats returns the capture counters of the last stats line written.
func lastStats(out string) map[string]float64 {
	var last map[string]float64
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `"type":"stats"`) {
			continue
		}
		var l struct {
			Capture map[string]any `json:"capture"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		last = map[string]float64{}
		for k, v := range l.Capture {
			if f, ok := v.(float64); ok {
				last[k] = f
			}
		}
		if live, ok := l.Capture["live"].(map[string]any); ok {
			for k, v := range live {
				last[k], _ = v.(float64)
			}
		}
	}
	return last
}

// scrape fetches url and returns its samples: "name{labels}" -> value,
// labels sorted as Prometheus writes them.
func scrape(t testing.TB, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// nonStats returns the NDJSON lines that are not stats lines.
func nonStats(out string) []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, `"type":"stats"`) {
			lines = append(lines, line)
		}
	}
	return lines
}

// newCluster starts a 3-broker kfake on loopback and returns it with its
// ports as a --port list.
func newCluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	var ports []string
	for _, a := range kf.ListenAddrs() {
		ports = append(ports, a[strings.LastIndexByte(a, ':')+1:])
	}
	return kf, strings.Join(ports, ",")
}

func newClient(t testing.TB, kf *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
