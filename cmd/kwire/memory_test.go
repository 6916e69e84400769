//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rssCeilingMiB is the most resident memory kwire may use on a capture of
// 100,000 connections open at once, each with a client id of its own. It
// is Linux's ru_maxrss: the Go heap with its garbage not yet collected or
// returned, stacks and the binary. Measured when it was set: 309 MiB for
// kwire analyze, 345 MiB for kwire read (about 3 KiB per connection).
const rssCeilingMiB = 512

// TestMemory100kConns writes a capture of 100,000 connections to the
// broker port, all open at once (the default --max-conns), each with an
// ApiVersions and a Metadata exchange under a client id of its own, then
// runs the kwire binary on it as a subprocess and reads the peak resident
// set size from the kernel (rusage ru_maxrss). It must stay under
// rssCeilingMiB, and every exchange must be decoded.
func TestMemory100kConns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 100,000-connection capture and builds kwire: about 10 seconds")
	}
	const conns = 100000
	start := time.Now()
	dir := t.TempDir()
	w := newPcapWriter(t, filepath.Join(dir, "100k.pcap"))
	srv := netip.MustParseAddrPort("10.0.0.2:9092")
	for i := range conns {
		cli := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 50000), 1}), uint16(10000+i%50000))
		f := w.flow(cli, srv)
		f.open()
		id := fmt.Sprintf("client-%d", i)
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "kgo", "1.19"
		avr := kmsg.NewPtrApiVersionsResponse()
		avr.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 4}}
		f.exchange(av, 3, 1, id, avr)
		meta := kmsg.NewPtrMetadataRequest()
		meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
		mr := kmsg.NewPtrMetadataResponse()
		mr.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: "10.0.0.2", Port: 9092}}
		f.exchange(meta, 12, 2, id, mr)
	}
	path := w.close()
	t.Logf("capture written in %v", time.Since(start))
	bin := buildBinary(t, dir)
	t.Logf("kwire built in %v", time.Since(start))

	for _, command := range []string{"analyze", "read"} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, command, "--json", path)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kwire %s: %v\n%s", command, err, stderr.Bytes())
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		rssMiB := ru.Maxrss >> 10 // KiB on Linux
		t.Logf("kwire %s on %d connections: max RSS %d MiB (ceiling %d MiB), user %v, sys %v",
			command, conns, rssMiB, rssCeilingMiB, cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime())
		if rssMiB > rssCeilingMiB {
			t.Errorf("kwire %s: max RSS %d MiB, ceiling %d MiB", command, rssMiB, rssCeilingMiB)
		}
		st := ndjsonLine(t, stdout.Bytes(), "stats")
		for k, want := range map[string]float64{"capture.conns_seen": conns, "capture.conns_over_cap": 0, "decode.exchanges": 2 * conns, "decode.unmatched_responses": 0} {
			if got := field(st, k); got != want {
				t.Errorf("kwire %s: stats %s = %v, want %v", command, k, got, want)
			}
		}
	}
}

// buildBinary builds kwire into dir, as `make build` does.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "kwire")
	cmd := exec.Command(goCmd, "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
