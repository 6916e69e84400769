//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// tlsSpec is the TLS of a child: the broker's certificate and key, which
// the clients also trust, and the key log the clients append their
// session secrets to.
type tlsSpec struct {
	CertPEM string `json:"cert"`
	KeyPEM  string `json:"key"`
	KeyLog  string `json:"keylog,omitempty"`
}

// newTLSSpec makes a self-signed ECDSA certificate for 127.0.0.1.
func newTLSSpec(t *testing.T, keylog string) *tlsSpec {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwire-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsSpec{
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
		KeyLog:  keylog,
	}
}

func (s *tlsSpec) server() (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(s.CertPEM), []byte(s.KeyPEM))
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// dial is the kgo option of a client: TLS trusting the broker's
// certificate and writing the key log, or none (a nil config is
// plaintext).
func (s *tlsSpec) dial() (kgo.Opt, error) {
	if s == nil {
		return kgo.DialTLSConfig(nil), nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CertPEM))
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.KeyLog != "" {
		f, err := os.OpenFile(s.KeyLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		cfg.KeyLogWriter = f // closed at exit
	}
	return kgo.DialTLSConfig(cfg), nil
}

// childJVM looks like a JVM to kwire's TLS probes: it maps a file named
// libjvm.so, as every JVM does.
func childJVM(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "kwire-jvm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "libjvm.so")
	if err := os.WriteFile(path, make([]byte, 4096), 0o600); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	defer syscall.Munmap(m)
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// TestEBPFTLSFound: the TLS probes find their files through the processes
// --comm selects, with no target given. A kgo member talking TLS, started
// before the capture, is probed in the middle of its connections: each
// continues as plaintext under a new identity (its ciphertext before the
// probes was reported apart), and the member's commits and its leave are
// decoded from it, with its pid. A process mapping libjvm.so with the same
// name is skipped as a JVM.
func TestEBPFTLSFound(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the TLS probes are built for amd64, this is %s", runtime.GOARCH)
	}
	const topic, group, parts, comm = "found-orders", "found-group", 3, "kwire-tlsfound"
	dir := t.TempDir()
	spec := newTLSSpec(t, "")
	broker := startChild(t, "broker", childSpec{Topic: topic, Partitions: parts, TLS: spec})
	addrs := broker.waitReady(t, "broker")
	brokers := strings.Split(addrs, ",")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(dir, comm)
	if err := os.Symlink(exe, client); err != nil {
		t.Fatal(err)
	}
	prod := startChildAs(t, client, "producer", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, ClientID: "producer", TLS: spec})
	prod.waitReady(t, "producer")
	member := startChildAs(t, client, "member", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, Group: group, ClientID: "member", TLS: spec})
	member.waitReady(t, "member")
	jvm := startChildAs(t, client, "jvm", childSpec{})
	jvm.waitReady(t, "jvm")

	src := openEBPF(t, &capture.EBPFOptions{TickEvery: 100 * time.Millisecond, Comm: comm, TLS: true}, portsOf(addrs))
	report := strings.Join(src.TLSReport(), "\n")
	t.Logf("hooks: %s\ntls: %s", src.Hooks(), report)
	if !strings.Contains(report, fmt.Sprintf("Go crypto/tls (%s) in %s (pid", runtime.Version(), exe)) ||
		!strings.Contains(report, fmt.Sprintf("pid %d (%s): a JVM", jvm.pid(), comm)) {
		t.Errorf("TLS report: %s; want the test binary probed through a process, pid %d skipped as a JVM", report, jvm.pid())
	}
	a := newAnalysis("ebpf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := a.run(ctx, src)
	a.wait(t, "a commit of the member from plaintext", func(s *correlate.Snapshot) bool {
		for _, g := range s.Groups {
			for _, p := range g.Partitions {
				if g.Group == group && len(p.Commits) > 0 {
					return true
				}
			}
		}
		return false
	})
	member.stop(t)
	a.wait(t, "the member to leave", allLeft(group, 1))
	prod.stop(t)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("capture: %v", err)
	}
	checkPIDs(t, a, map[string]*child{"member": member}, broker.pid())
	e := src.Stats().EBPF
	t.Logf("ebpf: %+v; anomalies %v", *e, a.anomalies)
	if e.TLSTargets != 1 || e.TLSSkippedJVM != 1 || e.TLSCalls == 0 || e.TLSNoSocket != 0 {
		t.Errorf("TLS counters: %d files probed, %d JVMs skipped, %d calls, %d without socket; want 1, 1, > 0, 0",
			e.TLSTargets, e.TLSSkippedJVM, e.TLSCalls, e.TLSNoSocket)
	}
}

// liveMembers is true once the group has n live members.
func liveMembers(group string, n int) func(*correlate.Snapshot) bool {
	return func(s *correlate.Snapshot) bool {
		for _, g := range s.Groups {
			if g.Group != group {
				continue
			}
			live := 0
			for _, m := range g.Members {
				if m.Status == "live" {
					live++
				}
			}
			return live == n
		}
		return false
	}
}

// tickSink passes chunks to a Sink in front of an analysis (a
// TLSDecrypter) and ticks to the analysis.
type tickSink struct {
	capture.Sink
	a *analysis
}

func (s tickSink) Tick(now time.Time) { s.a.Tick(now) }

// TestEBPFTLS runs TestEBPFGroup's story over TLS: a kfake cluster with a
// TLS listener, a producer and three kgo group members, each a process of
// its own, named kwire-tlsclient (this test binary through a symlink).
// The eBPF capture with TLS uprobes on the test binary (Go crypto/tls),
// restricted to that name, and a packet capture of lo decrypted with the
// clients' key log, running together, must show the same generations,
// members, assignments and commits; the eBPF one must get them from
// plaintext (TLS calls counted, ciphertext left out and counted, no TLS
// anomaly) and map each member to its process.
func TestEBPFTLS(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the TLS probes are built for amd64, this is %s", runtime.GOARCH)
	}
	const topic, group, parts, comm = "tls-orders", "tls-billing", 6, "kwire-tlsclient"
	dir := t.TempDir()
	keylog := filepath.Join(dir, "keys.log")
	if err := os.WriteFile(keylog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := newTLSSpec(t, keylog)
	broker := startChild(t, "broker", childSpec{Topic: topic, Partitions: parts, TLS: spec})
	addrs := broker.waitReady(t, "broker")
	ports := portsOf(addrs)
	brokers := strings.Split(addrs, ",")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(dir, comm)
	if err := os.Symlink(exe, client); err != nil {
		t.Fatal(err)
	}
	// The test binary is probed up front: the clients start after the
	// capture, and a process found by a later scan may have begun its
	// handshake before its probes were in.
	ebpfSrc := openEBPF(t, &capture.EBPFOptions{TickEvery: 100 * time.Millisecond, Comm: comm, TLS: true, TLSTargets: []string{exe}}, ports)
	t.Logf("hooks: %s", ebpfSrc.Hooks())
	for _, l := range ebpfSrc.TLSReport() {
		t.Logf("tls: %s", l)
	}
	p, _ := capture.ParsePorts(ports)
	pktSrc, err := capture.OpenLive(&capture.LiveOptions{Interface: "lo", TickEvery: 100 * time.Millisecond}, &capture.Options{Ports: p})
	if err != nil {
		ebpfSrc.Close()
		t.Fatalf("packet capture on lo: %v", err)
	}
	keys, err := capture.LoadTLSKeys([]string{keylog}, true)
	if err != nil {
		t.Fatal(err)
	}
	viaEBPF, viaPackets := newAnalysis("ebpf"), newAnalysis("packets+keylog")
	decrypter := capture.DecryptTLS(viaPackets, keys)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ebpfDone := viaEBPF.run(ctx, ebpfSrc)
	pktDone := viaPackets.runVia(ctx, pktSrc, tickSink{decrypter, viaPackets})

	prod := startChildAs(t, client, "producer", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, ClientID: "producer", TLS: spec})
	prod.waitReady(t, "producer")
	// Each step waits until both captures have seen the last: the key
	// log decryption holds a new connection's bytes until it re-reads
	// the key log (at most once a second), and a member joining on a
	// connection decrypted sooner would reach the correlator first.
	seen := func(what string, live int) {
		t.Helper()
		for _, a := range []*analysis{viaEBPF, viaPackets} {
			a.wait(t, what, liveMembers(group, live))
		}
	}
	members := map[string]*child{}
	for i, id := range []string{"member-a", "member-b", "member-c"} {
		members[id] = startChildAs(t, client, "member", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, Group: group, ClientID: id, TLS: spec})
		members[id].waitReady(t, id)
		seen(id+" to join", i+1)
	}
	for i, id := range []string{"member-b", "member-a", "member-c"} {
		members[id].stop(t)
		seen(id+" to leave", 2-i)
	}
	prod.stop(t)
	for _, a := range []*analysis{viaEBPF, viaPackets} {
		a.wait(t, "every member to leave", allLeft(group, 3))
	}
	cancel()
	for name, done := range map[string]<-chan error{"ebpf": ebpfDone, "packets": pktDone} {
		if err := <-done; err != nil && err != context.Canceled {
			t.Errorf("%s capture: %v", name, err)
		}
	}

	got, want := viewOf(&viaEBPF.snap, group), viewOf(&viaPackets.snap, group)
	if len(want.Generations) < 3 || len(want.Members) != 3 || len(want.Commits) == 0 {
		t.Fatalf("the decrypted packet capture shows too little to compare: %s", dump(want))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("eBPF TLS probes and the decrypted packet capture disagree (-packets +ebpf):\n-%s\n+%s", dump(want), dump(got))
	}
	checkPIDs(t, viaEBPF, members, broker.pid())
	if n := viaEBPF.anomalies[decode.AnomalyTLS]; n != 0 {
		t.Errorf("the eBPF capture reported %d TLS connections: it should see plaintext only", n)
	}
	ts := decrypter.Stats()
	if ts.TLSDecrypted == 0 || ts.TLSNoKeys != 0 {
		t.Errorf("key log decryption of the packet capture: %+v; want every connection decrypted", ts)
	}

	st := ebpfSrc.Stats()
	e := st.EBPF
	t.Logf("ebpf: %+v", *e)
	t.Logf("ebpf: anomalies %v; packets: anomalies %v, tls %+v", viaEBPF.anomalies, viaPackets.anomalies, ts)
	if e.RingDrops != 0 || e.KernelEvents != e.Events {
		t.Errorf("ring buffer: %d drops, %d events submitted, %d read; want no drops, all read", e.RingDrops, e.KernelEvents, e.Events)
	}
	if e.TLSCalls == 0 || e.TLSBytes == 0 || e.TLSCipherBytes == 0 || e.TLSProbes == 0 || e.TLSTargets != 1 {
		t.Errorf("TLS counters: %d calls, %d plaintext bytes, %d ciphertext bytes left out, %d probes in %d files; want all > 0, 1 file",
			e.TLSCalls, e.TLSBytes, e.TLSCipherBytes, e.TLSProbes, e.TLSTargets)
	}
	if e.TLSNoSocket != 0 {
		t.Errorf("%d TLS calls on sockets never found", e.TLSNoSocket)
	}
	// Every byte the connections moved is plaintext: no ciphertext was
	// delivered besides it (it would have been reported as TLS above),
	// and all the data bytes delivered came from the TLS probes.
	if e.CallBytes != e.TLSBytes {
		t.Errorf("%d bytes delivered by the probes, %d of them plaintext from TLS calls; want all", e.CallBytes, e.TLSBytes)
	}
}
