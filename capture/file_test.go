package capture

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// conversation is a short exchange used wherever the container, not the
// TCP behaviour, is under test.
func conversation(v6 bool) []seg {
	return []seg{
		{at: 0, flags: "S", v6: v6},
		{at: 1 * time.Millisecond, toCli: true, flags: "SA", v6: v6},
		{at: 2 * time.Millisecond, seq: 1, flags: "PA", data: "request", v6: v6},
		{at: 3 * time.Millisecond, toCli: true, seq: 1, flags: "PA", data: "response", v6: v6},
		{at: 4 * time.Millisecond, seq: 8, flags: "FA", v6: v6},
		{at: 5 * time.Millisecond, toCli: true, seq: 9, flags: "FA", v6: v6},
	}
}

var conversationChunks = []string{
	"c1 to_server data request",
	"c1 to_client data response",
	"c1 to_server close fin",
	"c1 to_client close fin",
}

func TestLinkTypes(t *testing.T) {
	tests := []struct {
		name  string
		lt    layers.LinkType
		vlans int
		v6    bool
	}{
		{"Ethernet", layers.LinkTypeEthernet, 0, false},
		{"Ethernet IPv6", layers.LinkTypeEthernet, 0, true},
		{"Ethernet 802.1Q", layers.LinkTypeEthernet, 1, false},
		{"Ethernet QinQ", layers.LinkTypeEthernet, 2, true},
		{"Linux SLL", layers.LinkTypeLinuxSLL, 0, false},
		{"Linux SLL2", layers.LinkTypeLinuxSLL2, 0, false},
		{"Linux SLL2 IPv6", layers.LinkTypeLinuxSLL2, 0, true},
		{"NULL loopback", layers.LinkTypeNull, 0, false},
		{"NULL loopback IPv6", layers.LinkTypeNull, 0, true},
		{"OpenBSD LOOP", layers.LinkTypeLoop, 0, false},
		{"raw IP", layers.LinkTypeRaw, 0, false},
		{"raw IP IPv6", layers.LinkTypeRaw, 0, true},
		{"raw IPv4", layers.LinkTypeIPv4, 0, false},
		{"raw IPv6", layers.LinkTypeIPv6, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			st, err := runFiles(t, nil, rec, pcapFile(t, tt.lt, tt.vlans, conversation(tt.v6)...))
			if err != nil {
				t.Fatal(err)
			}
			if d := diffLines(conversationChunks, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.TCPPackets != 6 || st.Undecodable != 0 {
				t.Errorf("tcp_packets, undecodable = %d, %d; want 6, 0", st.TCPPackets, st.Undecodable)
			}
		})
	}
}

// pcapngFile writes segs into one pcapng file, each through the interface
// of its link type (one interface per link type given).
func pcapngFile(t testing.TB, lts []layers.LinkType, segs []seg) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{LinkType: lts[0], SnapLength: 262144}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range lts[1:] {
		if _, err := w.AddInterface(pcapgo.NgInterface{LinkType: lt, SnapLength: 262144}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range segs {
		iface := i % len(lts)
		s.id = uint16(i + 1)
		data := frame(t, lts[iface], s, 0)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

func TestFileFormats(t *testing.T) {
	conv := conversation(false)
	tests := []struct {
		name string
		file []byte
	}{
		{"pcap", pcapFile(t, layers.LinkTypeEthernet, 0, conv...)},
		{"pcapng", pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, conv)},
		{"pcapng with Ethernet and SLL2 interfaces", pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL2}, conv)},
		{"gzipped pcap", gz(t, pcapFile(t, layers.LinkTypeEthernet, 0, conv...))},
		{"gzipped pcapng", gz(t, pcapngFile(t, []layers.LinkType{layers.LinkTypeLinuxSLL}, conv))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			st, err := runFiles(t, nil, rec, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffLines(conversationChunks, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.FilesRead != 1 || st.FilesTruncated != 0 || st.Packets != 6 {
				t.Errorf("files_read, files_truncated, packets = %d, %d, %d; want 1, 0, 6", st.FilesRead, st.FilesTruncated, st.Packets)
			}
		})
	}
}

func TestMergeFiles(t *testing.T) {
	conv := conversation(false)
	shift := func(segs []seg, d time.Duration) []seg {
		out := append([]seg(nil), segs...)
		for i := range out {
			out[i].at += d
		}
		return out
	}
	var toSrv, toCli []seg
	for _, s := range conv {
		if s.toCli {
			toCli = append(toCli, s)
		} else {
			toSrv = append(toSrv, s)
		}
	}
	tests := []struct {
		name  string
		opts  *Options
		files [][]seg
		dups  uint64
	}{
		{"each direction in its own file", nil, [][]seg{toCli, toSrv}, 0},
		{"same connection captured on both hosts", nil, [][]seg{conv, shift(conv, 100*time.Microsecond)}, 6},
		{"same connection in both, dedupe off: retransmissions", &Options{DedupeWindow: -1}, [][]seg{conv, shift(conv, 100*time.Microsecond)}, 0},
		{"same connection in both, copies late by more than the window", &Options{DedupeWindow: time.Microsecond}, [][]seg{conv, shift(conv, 100*time.Microsecond)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var files [][]byte
			for _, f := range tt.files {
				// Both captures see the same IPv4 ids: number by time.
				for i := range f {
					f[i].id = uint16(f[i].at/time.Millisecond) + 1
				}
				files = append(files, pcapFile(t, layers.LinkTypeEthernet, 0, f...))
			}
			rec := &recorder{}
			st, err := runFiles(t, tt.opts, rec, files...)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffLines(conversationChunks, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.Duplicates != tt.dups || st.FilesRead != len(files) || st.ConnsSeen != 1 {
				t.Errorf("duplicates, files_read, conns_seen = %d, %d, %d; want %d, %d, 1", st.Duplicates, st.FilesRead, st.ConnsSeen, tt.dups, len(files))
			}
		})
	}
}

func TestTruncatedFile(t *testing.T) {
	conv := conversation(false)
	full := pcapFile(t, layers.LinkTypeEthernet, 0, conv...)
	upTo4 := pcapFile(t, layers.LinkTypeEthernet, 0, conv[:4]...)
	tests := []struct {
		name string
		file []byte
	}{
		{"cut inside a record's data", full[:len(upTo4)+30]},
		{"cut inside a record's header", full[:len(upTo4)+7]},
		{"pcapng cut inside a block", pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, conv)[:len(pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, conv[:4]))+30]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			st, err := runFiles(t, nil, rec, tt.file)
			if err != nil {
				t.Fatalf("Run = %v, want nil: a truncated file is not an error", err)
			}
			want := []string{
				"c1 to_server data request",
				"c1 to_client data response",
				"c1 to_server close eof",
				"c1 to_client close eof",
			}
			if d := diffLines(want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.FilesTruncated != 1 || st.Packets != 4 {
				t.Errorf("files_truncated, packets = %d, %d; want 1, 4", st.FilesTruncated, st.Packets)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope.pcap"), "no such file"},
		{"empty", write("empty.pcap", nil), "file is empty"},
		{"short", write("short.pcap", []byte{0xd4}), "too short"},
		{"not a capture", write("notes.txt", []byte("hello, world\n")), "not a pcap or pcapng file (magic 0x68656c6c); kwire reads pcap and pcapng"},
		{"unsupported link type", write("wifi.pcap", pcapFile(t, layers.LinkTypeIEEE80211Radio, 0)), "link type 127 (RadioTap) is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := OpenFiles([]string{write("good.pcap", pcapFile(t, layers.LinkTypeEthernet, 0)), tt.path}, nil)
			if err == nil {
				fs.Close()
				t.Fatalf("OpenFiles succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("error = %q, want it to name %s and contain %q", err, tt.path, tt.want)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	fs, err := OpenFiles([]string{writeTemp(t, "c.pcap", pcapFile(t, layers.LinkTypeEthernet, 0, conversation(false)...))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &recorder{}
	if err := fs.Run(ctx, rec); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

func TestStatsWhileRunning(t *testing.T) {
	var segs []seg
	for i := range 5000 {
		segs = append(segs, seg{at: time.Duration(i) * time.Microsecond, seq: uint32(1 + i), flags: "PA", data: "x"})
	}
	fs, err := OpenFiles([]string{writeTemp(t, "s.pcap", pcapFile(t, layers.LinkTypeEthernet, 0, segs...))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for fs.Stats().FilesRead == 0 {
		}
	}()
	if err := fs.Run(context.Background(), SinkFunc(func(*Chunk) {})); err != nil {
		t.Fatal(err)
	}
	<-done
	if st := fs.Stats(); st.Packets != 5000 || st.DeliveredBytes != 5000 {
		t.Errorf("packets, delivered = %d, %d; want 5000, 5000", st.Packets, st.DeliveredBytes)
	}
}
