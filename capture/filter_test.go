package capture

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
)

// TestFilterProgram runs the port filter in golang.org/x/net/bpf's VM (the
// user-space variant: no loopback copy test, IP version from the header)
// and checks it against wantRaw, the same filter in Go, on packets built
// with gopacket.
func TestFilterProgram(t *testing.T) {
	type pkt struct {
		name string
		seg  seg
		edit func([]byte) []byte // changes the serialized packet
	}
	// Ports 50000+c are the client's, 9092 the server's.
	pkts := []pkt{
		{name: "v4 to 9092", seg: seg{flags: "PA", data: "x"}},
		{name: "v4 from 9092", seg: seg{toCli: true, flags: "PA", data: "x"}},
		{name: "v6 to 9092", seg: seg{v6: true, flags: "S"}},
		{name: "v4 client 50007", seg: seg{c: 7, flags: "A"}},
		{name: "v4 options", seg: seg{flags: "A"}, edit: withIPv4Options},
		{name: "v4 fragment", seg: seg{flags: "A"}, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[6:8], 185) // offset 185*8: no TCP header here
			return b
		}},
		{name: "v4 udp", seg: seg{flags: "A"}, edit: func(b []byte) []byte { b[9] = 17; return b }},
		{name: "v6 hop-by-hop", seg: seg{v6: true, flags: "A"}, edit: func(b []byte) []byte { b[6] = 0; return b }},
		{name: "not ip", seg: seg{flags: "A"}, edit: func(b []byte) []byte { b[0] = 0x00; return b }},
		{name: "v4 cut in tcp header", seg: seg{flags: "A"}, edit: func(b []byte) []byte { return b[:22] }},
	}
	tests := []struct {
		ports string
		want  []string // names of the packets accepted
	}{
		{"9092", []string{"v4 to 9092", "v4 from 9092", "v6 to 9092", "v4 client 50007", "v4 options"}},
		{"19092-19094", nil},
		{"50007", []string{"v4 client 50007"}},
		{"9090-9095,50001-50010", []string{"v4 to 9092", "v4 from 9092", "v6 to 9092", "v4 client 50007", "v4 options"}},
		{"1-9091,9093-49999,50008-65535", nil},
		{"", []string{"v4 to 9092", "v4 from 9092", "v6 to 9092", "v4 client 50007", "v4 options"}},
	}
	for _, tt := range tests {
		t.Run("ports="+tt.ports, func(t *testing.T) {
			var ports Ports
			if tt.ports != "" {
				ports = mustPorts(t, tt.ports)
			}
			ins, err := filterProgram(&ports, false)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := filterProgram(&ports, true); err != nil {
				t.Fatalf("kernel variant: %v", err)
			}
			var gotVM, gotGo []string
			for _, p := range pkts {
				b := frame(t, layers.LinkTypeRaw, p.seg, 0)
				if p.edit != nil {
					b = p.edit(b)
				}
				n, err := vm.Run(b)
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				if n > 0 {
					gotVM = append(gotVM, p.name)
				}
				if wantRaw(b, &ports, ports.Empty()) {
					gotGo = append(gotGo, p.name)
				}
			}
			if d := diffLines(tt.want, gotVM); d != "" {
				t.Errorf("BPF accepted (-want +got):\n%s", d)
			}
			if d := diffLines(tt.want, gotGo); d != "" {
				t.Errorf("wantRaw accepted (-want +got):\n%s", d)
			}
		})
	}
}

// withIPv4Options adds 4 bytes of IPv4 options (IHL 6): the ports move.
func withIPv4Options(b []byte) []byte {
	out := append([]byte(nil), b[:20]...)
	out = append(out, 1, 1, 1, 0) // NOP NOP NOP EOL
	out = append(out, b[20:]...)
	out[0] = 0x46
	binary.BigEndian.PutUint16(out[2:4], uint16(len(out)))
	return out
}

func mustPorts(t *testing.T, s string) Ports {
	t.Helper()
	p, err := ParsePorts(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFilterLimits checks that a port set too scattered for classic BPF's
// jumps is refused (kwire then filters ports in user space), and that the
// largest accepted one assembles.
func TestFilterLimits(t *testing.T) {
	var many []string
	for i := range maxFilterRanges + 1 {
		many = append(many, strconv.Itoa(10000+2*i))
	}
	ports := mustPorts(t, strings.Join(many, ","))
	if _, err := filterProgram(&ports, true); err == nil {
		t.Errorf("%d ranges: no error", maxFilterRanges+1)
	}
	ports = mustPorts(t, strings.Join(many[:maxFilterRanges], ","))
	ins, err := filterProgram(&ports, true)
	if err != nil {
		t.Fatalf("%d ranges: %v", maxFilterRanges, err)
	}
	if _, err := bpf.Assemble(ins); err != nil {
		t.Fatal(err)
	}
	// Ranges need two tests each: the most of them must fit too.
	var rs []string
	for i := range maxFilterRanges {
		rs = append(rs, strconv.Itoa(10000+10*i)+"-"+strconv.Itoa(10002+10*i))
	}
	ports = mustPorts(t, strings.Join(rs, ","))
	if _, err := filterProgram(&ports, true); err != nil {
		t.Fatalf("%d port ranges: %v", maxFilterRanges, err)
	}
}

func TestFilterText(t *testing.T) {
	for _, tt := range []struct{ ports, want string }{
		{"", "tcp"},
		{"9092", "tcp port 9092"},
		{"9092,19092-19094", "tcp and (port 9092 or portrange 19092-19094)"},
	} {
		var p Ports
		if tt.ports != "" {
			p = mustPorts(t, tt.ports)
		}
		if got := filterText(&p); got != tt.want {
			t.Errorf("filterText(%q) = %q, want %q", tt.ports, got, tt.want)
		}
	}
}
