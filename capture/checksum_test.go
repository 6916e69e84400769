package capture

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// TestDamagedPackets: in a damaged capture file, a packet whose flipped
// byte turned a data segment into a RST, or moved its sequence number far
// ahead, on a direction whose other checksums are right, is set back when
// its wrong checksum says what the damaged word was (tcp_repair.go), and
// dropped when it cannot (a second damaged byte): only its own bytes are
// lost, as a gap, and the connection goes on. Where the capture's
// checksums are all wrong (the NIC was to fill them in), packets are taken
// as they are.
func TestDamagedPackets(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 4, flags: "PA", data: "bbb"},
		{at: 3, seq: 7, flags: "PA", data: "ccc"},
	})
	tests := []struct {
		name    string
		damage  func(file []byte)
		want    []string
		damaged uint64
		fixed   uint64
	}{
		{"a RST flag on a data segment", func(f []byte) { f[tcpAt(f, "bbb")+13] |= 0x04 },
			[]string{"c1 to_server data aaa", "c1 to_server data bbb", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}, 0, 1},
		{"a sequence number far ahead", func(f []byte) { f[tcpAt(f, "bbb")+5] ^= 0x40 },
			[]string{"c1 to_server data aaa", "c1 to_server data bbb", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}, 0, 1},
		{"a RST flag and a damaged payload", func(f []byte) { f[tcpAt(f, "bbb")+13] |= 0x04; f[tcpAt(f, "bbb")+21] ^= 0x10 },
			[]string{"c1 to_server data aaa", "c1 to_server gap 3", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}, 1, 0},
		{"a sequence number far ahead and a damaged payload", func(f []byte) { f[tcpAt(f, "bbb")+5] ^= 0x40; f[tcpAt(f, "bbb")+20] ^= 0x01 },
			[]string{"c1 to_server data aaa", "c1 to_server gap 3", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}, 1, 0},
		{"checksums wrong on the direction: taken as they are", func(f []byte) {
			// Every checksum field of the client's packets as checksum
			// offload leaves it: the pseudo-header's sum, for the NIC to
			// finish.
			ports := []byte{0xc3, 0x50, 0x23, 0x84} // 50000 > 9092
			for i := bytes.Index(f, ports); i >= 0; {
				ip := f[i-20 : i]
				seg := int(ip[2])<<8 | int(ip[3]) - 20
				partial := fold(sum16(sum16(6+uint64(seg), ip[12:16]), ip[16:20]))
				f[i+16], f[i+17] = byte(partial>>8), byte(partial)
				j := bytes.Index(f[i+1:], ports)
				if j < 0 {
					break
				}
				i += 1 + j
			}
			f[tcpAt(f, "bbb")+13] |= 0x04
		}, []string{"c1 to_server data aaa", "c1 to_server data bbb", "c1 to_server close rst", "c1 to_client close rst"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := runDamaged(t, segs, tt.damage, tt.want)
			if st.DamagedPackets != tt.damaged || st.RepairedPackets != tt.fixed {
				t.Errorf("damaged_packets = %d, repaired_packets = %d, want %d and %d", st.DamagedPackets, st.RepairedPackets, tt.damaged, tt.fixed)
			}
		})
	}
}

// TestDamagedSYN: a SYN whose sequence number was damaged would set where
// its direction's stream starts, and every segment after it would look
// like an old retransmission: the whole direction was lost. A SYN whose
// checksum is wrong, and not as checksum offload leaves it, is dropped;
// the direction starts at its next segment.
func TestDamagedSYN(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 4, flags: "PA", data: "bbb"},
	})
	file := pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
	// The client's SYN is the first TCP header: flip its sequence number.
	syn := bytes.Index(file, []byte{0xc3, 0x50, 0x23, 0x84}) // ports 50000 > 9092
	file[syn+5] ^= 0x81
	rec := &recorder{}
	st, err := runFiles(t, nil, rec, file)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c1 to_server data aaa", "c1 to_server data bbb", "c1 to_server close eof", "c1 to_client close eof"}
	if d := diffLines(want, rec.lines(false)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	if st.DamagedPackets != 1 {
		t.Errorf("damaged_packets = %d, want 1", st.DamagedPackets)
	}
}

// TestRepairedHeaders: a packet whose IPv4 header lost one field to
// damage (version, protocol, fragment bits, total length) or whose link
// header lost its protocol is decoded again when setting the field back
// leaves the IPv4 header checksum right; otherwise it is skipped as before.
// So is one whose TCP data offset cannot be right, set back by the TCP
// checksum (or, where checksums were left to the NIC, by its options).
func TestRepairedHeaders(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 4, flags: "PA", data: "bbb"},
		{at: 3, seq: 7, flags: "PA", data: "ccc"},
	})
	ipAt := func(file []byte, payload string) int { return bytes.Index(file, []byte(payload)) - 20 - 20 }
	tests := []struct {
		name     string
		damage   func(f []byte)
		repaired uint64
		want     []string
	}{
		{"protocol", func(f []byte) { f[ipAt(f, "bbb")+9] = 17 }, 1, nil},
		{"version", func(f []byte) { f[ipAt(f, "bbb")] = 0x65 }, 1, nil},
		{"fragment bits", func(f []byte) { f[ipAt(f, "bbb")+6] |= 0x20 }, 1, nil},
		{"EtherType", func(f []byte) { f[ipAt(f, "bbb")-2] = 0x86 }, 1, nil},
		{"TCP data offset", func(f []byte) { f[tcpAt(f, "bbb")+12] = 0x30 }, 1, nil},
		// Checksums left to the NIC tell nothing: the largest data offset
		// whose options read as options (none here: 5) is taken.
		{"TCP data offset, checksum not filled in", func(f []byte) {
			f[tcpAt(f, "bbb")+12], f[tcpAt(f, "bbb")+16], f[tcpAt(f, "bbb")+17] = 0xf0, 0, 0
		}, 1, nil},
		// Both the total length and the TCP checksum hit: the IPv4
		// checksum's value is kept as it ends the packet with the frame.
		{"total length and TCP checksum", func(f []byte) { f[ipAt(f, "bbb")+3] ^= 0x91; f[tcpAt(f, "bbb")+17] ^= 0x6a }, 1, nil},
		{"two fields: skipped", func(f []byte) { f[ipAt(f, "bbb")+9], f[ipAt(f, "bbb")] = 17, 0x65 }, 0,
			[]string{"c1 to_server data aaa", "c1 to_server gap 3", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
			tt.damage(file)
			rec := &recorder{}
			st, err := runFiles(t, nil, rec, file)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == nil {
				want = []string{"c1 to_server data aaa", "c1 to_server data bbb", "c1 to_server data ccc", "c1 to_server close eof", "c1 to_client close eof"}
			}
			if d := diffLines(want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.RepairedPackets != tt.repaired {
				t.Errorf("repaired_packets = %d, want %d", st.RepairedPackets, tt.repaired)
			}
		})
	}
}

// tcpAt returns the offset in file of the TCP header of the segment
// carrying payload (the synthetic segments have no options).
func tcpAt(file []byte, payload string) int { return bytes.Index(file, []byte(payload)) - 20 }

// TestFitsFrame: an IPv4 total length fits a frame when the packet ends
// where the frame does, or at the zero padding of a minimum Ethernet
// frame.
func TestFitsFrame(t *testing.T) {
	ack := frame(t, layers.LinkTypeEthernet, seg{seq: 1, flags: "A"}, 0) // 54 bytes
	padded := append(append([]byte(nil), ack...), make([]byte, 60-len(ack))...)
	dirty := append(append([]byte(nil), ack...), 0, 0, 0, 1, 0, 0)
	data := frame(t, layers.LinkTypeEthernet, seg{seq: 1, flags: "PA", data: "abc"}, 0)
	for _, tt := range []struct {
		name  string
		frame []byte
		n     uint16
		want  bool
	}{
		{"exact", ack, 40, true},
		{"padded", padded, 40, true},
		{"padded, a payload of padding", padded, 43, true},
		{"padded, shorter than the headers", padded, 39, false},
		{"padding not zero", dirty, 40, false},
		{"longer than the frame", ack, 185, false},
		{"data segment", data, 43, true},
		{"data segment, shorter", data, 42, false},
		{"data segment, unpadded", data[:57], 43, true},
	} {
		if got := fitsFrame(layers.LinkTypeEthernet, tt.frame, tt.n); got != tt.want {
			t.Errorf("%s: fitsFrame(%d bytes, %d) = %v, want %v", tt.name, len(tt.frame), tt.n, got, tt.want)
		}
	}
}
