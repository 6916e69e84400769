package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sys/unix"
)

// TestLiveDropsCapabilities runs the kwire binary (built as make build
// does: no cgo) as root and reads its /proc/PID/status once it says it is
// capturing: every capability it no longer needs is gone from its
// effective, permitted and bounding sets, no_new_privs is set, and the
// capture still works (a consumer group's generations are decoded, -w
// still writes and rotates). Before, kwire live kept every capability of
// root for its whole run.
func TestLiveDropsCapabilities(t *testing.T) {
	needCapture(t)
	if os.Geteuid() != 0 {
		t.Skip("kwire live drops root's capabilities: run as root (CI does)")
	}
	if testing.Short() {
		t.Skip("builds kwire and runs real clients")
	}
	bin := buildBinary(t, t.TempDir())
	kf, ports := newCluster(t, kfake.SeedTopics(2, "caps-0", "caps-1", "caps-2"))
	// A consumer group in this process, over plaintext.
	plain := func(i int) func(t *testing.T, _ *output) string {
		return func(t *testing.T, _ *output) string {
			g := newGroup(t, kf, fmt.Sprintf("caps-group-%d", i), fmt.Sprintf("caps-%d", i), 2)
			g.produce(20)
			g.join("member-1")
			g.settled("member-1 to consume and commit")
			g.leave("member-1")
			g.prod.Close()
			return g.name
		}
	}
	tlsPort, tlsGroup := capsTLSGroup(t)
	for _, tc := range []struct {
		name    string
		args    []string
		ebpf    bool
		kept    uint64 // the capabilities kwire keeps, as a mask
		files   bool   // -w: packets written
		traffic func(t *testing.T, out *output) string
	}{
		{name: "interface", args: []string{"-i", "lo", "--port", ports}, traffic: plain(0)},
		{name: "interface, -w rotating", args: []string{"-i", "lo", "--port", ports, "-w", "WDIR/cap.pcapng", "--rotate-mb", "1"},
			kept: 1 << unix.CAP_DAC_OVERRIDE, files: true, traffic: plain(1)},
		{name: "ebpf", args: []string{"--ebpf", "--port", ports}, ebpf: true, kept: 1 << unix.CAP_BPF, traffic: plain(2)},
		// The TLS client starts after kwire dropped its capabilities:
		// it is found, and probed, with those kwire kept.
		{name: "ebpf tls", args: []string{"--ebpf", "--tls", "--comm", capsTLSComm, "--port", tlsPort}, ebpf: true,
			kept:    1<<unix.CAP_BPF | 1<<unix.CAP_PERFMON | 1<<unix.CAP_SYS_PTRACE | 1<<unix.CAP_DAC_READ_SEARCH | 1<<unix.CAP_SYS_ADMIN,
			traffic: tlsGroup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ebpf {
				needEBPF(t)
			}
			dir := t.TempDir()
			args := []string{"live", "--json", "--stats-every", "1s"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "WDIR", dir))
			}
			cmd := exec.Command(bin, args...)
			stdout, stderr := newOutput(), newOutput()
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() {
				err := cmd.Wait()
				stderr.update(func() {})
				exited <- err
			}()
			defer cmd.Process.Kill()
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("kwire's stderr: %s\nkwire's last stats: %v", stderr.String(), lastStats(stdout.String()))
				}
			})
			stderr.wait(t, "kwire live to start", func() bool {
				return bytes.Contains(stderr.buf.Bytes(), []byte("kwire: capturing on")) || cmd.ProcessState != nil
			})
			if !strings.Contains(stderr.String(), "capturing on") {
				t.Fatalf("kwire live did not start: %s", stderr.String())
			}

			st := procStatus(t, cmd.Process.Pid)
			for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
				if st[k] != tc.kept {
					t.Errorf("%s %#x (%s), want %#x", k, st[k], capNames(st[k]), tc.kept)
				}
			}
			if st["CapInh"] != 0 || st["CapAmb"] != 0 || st["NoNewPrivs"] != 1 {
				t.Errorf("CapInh %#x, CapAmb %#x, NoNewPrivs %d: want 0, 0, 1", st["CapInh"], st["CapAmb"], st["NoNewPrivs"])
			}
			if !strings.Contains(stderr.String(), ", capabilities dropped") {
				t.Errorf("the status line does not say the capabilities were dropped: %s", stderr.String())
			}

			group := tc.traffic(t, stdout)
			stdout.wait(t, "the generation in kwire's output", func() bool {
				return bytes.Contains(stdout.buf.Bytes(), []byte(`"type":"generation"`)) &&
					bytes.Contains(stdout.buf.Bytes(), []byte(`"`+group+`"`))
			})
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("kwire live: %v: %s", err, stderr.String())
				}
			case <-time.After(waitTimeout):
				t.Fatal("kwire live did not stop on SIGTERM")
			}
			if strings.Contains(stderr.String(), "warning") {
				t.Errorf("stderr: %s", stderr.String())
			}
			if tc.files {
				if s := lastStats(stdout.String()); s["packets_written"] == 0 || s["packets_written"] != s["packets"] {
					t.Errorf("-w wrote %v packets of %v", s["packets_written"], s["packets"])
				}
				if files, _ := filepath.Glob(filepath.Join(dir, "cap*.pcapng")); len(files) == 0 {
					t.Error("-w wrote no file")
				}
			}
		})
	}
}

// capsTLSComm is the name the TLS group child runs under.
const capsTLSComm = "kwire-capstls"

// capsTLSGroup returns a free port and a function that runs a kgo group
// over TLS in a process of its own (the test binary, as TestLiveEBPFTLS's
// child, named capsTLSComm) against a TLS kfake broker on that port: the
// child starts first, its clients retrying, until kwire has found and
// probed it (tls_targets), then the broker.
func capsTLSGroup(t *testing.T) (string, func(t *testing.T, out *output) string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return strconv.Itoa(port), func(t *testing.T, out *output) string {
		const group, topic, parts = "caps-tls-group", "caps-tls-topic", 2
		srv, certPEM := tlsCerts(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		link := filepath.Join(dir, capsTLSComm)
		if err := os.Symlink(exe, link); err != nil {
			t.Fatal(err)
		}
		spec, _ := json.Marshal(tlsGroupSpec{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)}, CertPEM: certPEM,
			KeyLog: filepath.Join(dir, "keys.log"), Topic: topic, Group: group, Parts: parts})
		cmd := exec.Command(link, "-test.run=^$")
		cmd.Env = append(os.Environ(), tlsGroupEnv+"="+string(spec))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		out.wait(t, "kwire to probe the TLS client that started after it", func() bool {
			return ebpfStats(out.buf.String())["tls_targets"] >= 1 || ebpfStats(out.buf.String())["tls_skipped_failed"] > 0
		})
		if e := ebpfStats(out.String()); e["tls_skipped_failed"] > 0 || e["tls_probes"] == 0 {
			t.Fatalf("probing the TLS client after the capabilities were dropped: %v", e)
		}
		kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.TLS(srv), kfake.SeedTopics(parts, topic))
		if err != nil {
			t.Fatal(err)
		}
		defer kf.Close()
		if err := <-done; err != nil {
			t.Fatalf("the TLS group child: %v", err)
		}
		return group
	}
}

// procStatus reads the capability sets and NoNewPrivs of process pid.
func procStatus(t *testing.T, pid int) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case !ok:
		case strings.HasPrefix(k, "Cap"):
			st[k], err = strconv.ParseUint(v, 16, 64)
		case k == "NoNewPrivs":
			st[k], err = strconv.ParseUint(v, 10, 64)
		}
		if err != nil {
			t.Fatalf("/proc/%d/status: %s: %v", pid, line, err)
		}
	}
	return st
}

// capNames lists the capabilities of mask by number.
func capNames(mask uint64) string {
	var s []string
	for c := range 64 {
		if mask&(1<<c) != 0 {
			s = append(s, strconv.Itoa(c))
		}
	}
	return strings.Join(s, ",")
}
