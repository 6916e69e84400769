package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// base is the capture time of offset 0 in the synthetic captures.
var base = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Endpoints of the synthetic connections: a client on an ephemeral port
// and a broker on 9092.
var (
	cli4 = netip.MustParseAddrPort("10.0.0.1:50000")
	srv4 = netip.MustParseAddrPort("10.0.0.2:9092")
	cli6 = netip.MustParseAddrPort("[fd00::1]:50000")
	srv6 = netip.MustParseAddrPort("[fd00::2]:9092")
)

// seg is one TCP segment of a test conversation.
type seg struct {
	at    time.Duration // capture time after base
	c     int           // connection number: client port 50000+c
	toCli bool          // sent by the server
	seq   uint32
	flags string // letters of S A F R P
	data  string
	snap  int    // if > 0, capture only this many payload bytes
	v6    bool   // use the IPv6 endpoints
	id    uint16 // IPv4 id; pcapFile numbers packets when 0
	ack0  bool   // acknowledgement number 0 even with the ACK flag (else 1 with it, 0 without, as stacks send)
	ackNo uint32 // if not 0 and with the ACK flag, the acknowledgement number
}

// endpoints returns the sender and receiver of s.
func (s seg) endpoints() (src, dst netip.AddrPort) {
	cli, srv := cli4, srv4
	if s.v6 {
		cli, srv = cli6, srv6
	}
	cli = netip.AddrPortFrom(cli.Addr(), cli.Port()+uint16(s.c))
	if s.toCli {
		return srv, cli
	}
	return cli, srv
}

// ipLayers returns the IP and TCP layers of s, checksums computed.
func (s seg) ipLayers() []gopacket.SerializableLayer {
	src, dst := s.endpoints()
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
		Seq: s.seq, Ack: s.ackNum(), Window: 65535,
		SYN: strings.Contains(s.flags, "S"), ACK: strings.Contains(s.flags, "A"),
		FIN: strings.Contains(s.flags, "F"), RST: strings.Contains(s.flags, "R"),
		PSH: strings.Contains(s.flags, "P"),
	}
	var ip gopacket.NetworkLayer
	if s.v6 {
		ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	} else {
		ip = &layers.IPv4{Version: 4, TTL: 64, Id: s.id, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
			SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	return []gopacket.SerializableLayer{ip.(gopacket.SerializableLayer), tcp, gopacket.Payload(s.data)}
}

// frame builds s as a frame of link type lt. vlans adds 802.1Q tags to
// Ethernet frames (two for QinQ).
func frame(t testing.TB, lt layers.LinkType, s seg, vlans int) []byte {
	t.Helper()
	l := s.ipLayers()
	et, family := layers.EthernetTypeIPv4, layers.ProtocolFamilyIPv4
	if s.v6 {
		et, family = layers.EthernetTypeIPv6, layers.ProtocolFamilyIPv6Linux
	}
	var prefix []byte // link headers gopacket cannot serialize
	switch lt {
	case layers.LinkTypeEthernet:
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: et}
		tags := []gopacket.SerializableLayer{eth}
		for i := range vlans {
			tpid := layers.EthernetTypeDot1Q
			if i == 0 && vlans > 1 {
				tpid = layers.EthernetTypeQinQ
			}
			if i == 0 {
				eth.EthernetType = tpid
			} else {
				tags[len(tags)-1].(*layers.Dot1Q).Type = tpid
			}
			tags = append(tags, &layers.Dot1Q{VLANIdentifier: uint16(100 + i), Type: et})
		}
		l = append(tags, l...)
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		l = append([]gopacket.SerializableLayer{&layers.Loopback{Family: family}}, l...)
		if lt == layers.LinkTypeLoop { // OpenBSD LOOP: family in network order
			prefix = binary.BigEndian.AppendUint32(nil, uint32(family))
			l = l[1:]
		}
	case layers.LinkTypeLinuxSLL: // 16 bytes: type, ARPHRD, addr len, addr[8], protocol
		prefix = binary.BigEndian.AppendUint16(nil, 0)
		prefix = binary.BigEndian.AppendUint16(prefix, 1)
		prefix = binary.BigEndian.AppendUint16(prefix, 6)
		prefix = append(prefix, 2, 0, 0, 0, 0, 1, 0, 0)
		prefix = binary.BigEndian.AppendUint16(prefix, uint16(et))
	case layers.LinkTypeLinuxSLL2: // 20 bytes: protocol, reserved, ifindex, ARPHRD, type, addr len, addr[8]
		prefix = binary.BigEndian.AppendUint16(nil, uint16(et))
		prefix = append(prefix, 0, 0)
		prefix = binary.BigEndian.AppendUint32(prefix, 3)
		prefix = binary.BigEndian.AppendUint16(prefix, 1)
		prefix = append(prefix, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, l...); err != nil {
		t.Fatalf("serialize %+v: %v", s, err)
	}
	return append(prefix, buf.Bytes()...)
}

// pcapFile writes segs as a pcap of link type lt and returns its bytes.
func pcapFile(t testing.TB, lt layers.LinkType, vlans int, segs ...seg) []byte {
	t.Helper()
	var b bytes.Buffer
	w := pcapgo.NewWriterNanos(&b)
	if err := w.WriteFileHeader(262144, lt); err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if s.id == 0 {
			s.id = uint16(i + 1)
		}
		data := frame(t, lt, s, vlans)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(data), Length: len(data)}
		if s.snap > 0 {
			ci.CaptureLength = len(data) - len(s.data) + s.snap
			data = data[:ci.CaptureLength]
		}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// writeTemp writes b to a file in t's temporary directory.
func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// recorder is a Sink that keeps a copy of every chunk.
type recorder struct {
	chunks []Chunk
	// onChunk, if set, runs on each chunk before it is recorded.
	onChunk func(c *Chunk)
}

func (r *recorder) Chunk(c *Chunk) {
	if r.onChunk != nil {
		r.onChunk(c)
	}
	cp := *c
	cp.Data = append([]byte(nil), c.Data...)
	cp.Conn = new(Conn)
	*cp.Conn = *c.Conn // as it was at this chunk
	r.chunks = append(r.chunks, cp)
}

// lines renders chunks one per line: "c1 to_server data hello",
// "c1 to_client gap 3", "c1 to_server close fin". With times, each line
// starts with the capture time after base.
func (r *recorder) lines(times bool) []string {
	var out []string
	for _, c := range r.chunks {
		s := fmt.Sprintf("c%d %s ", c.Conn.ID, c.Dir)
		if times {
			s = fmt.Sprintf("%v %s", c.Time.Sub(base), s)
		}
		switch c.Kind {
		case Data:
			s += "data " + string(c.Data)
		case Gap:
			s += fmt.Sprintf("gap %d", c.Len)
		case Close:
			s += "close " + c.Reason.String()
		}
		out = append(out, s)
	}
	return out
}

// runFiles reads the files through Files and returns what the Sink got.
func runFiles(t testing.TB, opts *Options, rec *recorder, files ...[]byte) (Stats, error) {
	t.Helper()
	var paths []string
	for i, b := range files {
		paths = append(paths, writeTemp(t, fmt.Sprintf("f%d.pcap", i), b))
	}
	fs, err := OpenFiles(paths, opts)
	if err != nil {
		t.Fatalf("OpenFiles: %v", err)
	}
	err = fs.Run(context.Background(), rec)
	return fs.Stats(), err
}

// diffLines returns a (-want +got) diff of two line lists, "" if equal.
func diffLines(want, got []string) string {
	// Longest common subsequence, then walk it.
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	diff := false
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			fmt.Fprintf(&b, "  %s\n", want[i])
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+ %s\n", got[j])
			j, diff = j+1, true
		default:
			fmt.Fprintf(&b, "- %s\n", want[i])
			i, diff = i+1, true
		}
	}
	if !diff {
		return ""
	}
	return b.String()
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// ackNum is the acknowledgement number of s.
func (s seg) ackNum() uint32 {
	if s.ackNo != 0 && strings.Contains(s.flags, "A") {
		return s.ackNo
	}
	return b2u(strings.Contains(s.flags, "A") && !s.ack0)
}
