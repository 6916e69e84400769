package capture

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket/layers"
)

// TestTCPHeaderRepair: a TCP header word damaged in a capture file (a
// flipped byte) is set back when the packet's wrong checksum says what it
// was and that value makes the packet ordinary in its stream: the
// connection's bytes come out whole. Damage elsewhere in the packet (its
// payload) leaves the header as it is.
func TestTCPHeaderRepair(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaaaaaaa"},
		{at: 2, seq: 9, flags: "PA", data: "bbbbbbbb"},
		{at: 3, seq: 17, flags: "PA", data: "cccccccc"},
	})
	whole := []string{"c1 to_server data aaaaaaaa", "c1 to_server data bbbbbbbb", "c1 to_server data cccccccc", "c1 to_server close eof", "c1 to_client close eof"}
	tests := []struct {
		name     string
		damage   func(f []byte)
		want     []string
		repaired uint64
	}{
		{"source port", func(f []byte) { f[tcpAt(f, "bbbbbbbb")+1] ^= 0x08 }, whole, 1},
		{"destination port", func(f []byte) { f[tcpAt(f, "bbbbbbbb")+2] ^= 0x40 }, whole, 1},
		{"sequence number, a little ahead", func(f []byte) { f[tcpAt(f, "bbbbbbbb")+7] ^= 0x01 }, whole, 1},
		{"sequence number, behind", func(f []byte) { f[tcpAt(f, "cccccccc")+7] ^= 0x04 }, whole, 1},
		{"data offset", func(f []byte) { f[tcpAt(f, "bbbbbbbb")+12] = 0x60 }, whole, 1},
		{"data offset of the first data segment", func(f []byte) { f[tcpAt(f, "aaaaaaaa")+12] = 0x60 }, whole, 1},
		{"a SYN turned FIN", func(f []byte) {
			syn := bytes.Index(f, []byte{0xc3, 0x50, 0x23, 0x84}) // the client's SYN: ports 50000 > 9092
			f[syn+13] = 0x01
		}, whole, 1},
		{"payload: left as it is", func(f []byte) { f[tcpAt(f, "bbbbbbbb")+21] = 'x' },
			[]string{"c1 to_server data aaaaaaaa", "c1 to_server data bxbbbbbb", "c1 to_server data cccccccc", "c1 to_server close eof", "c1 to_client close eof"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := runDamaged(t, segs, tt.damage, tt.want)
			if st.RepairedPackets != tt.repaired || st.DamagedPackets != 0 || st.ConnsSeen != 1 {
				t.Errorf("repaired_packets %d, damaged_packets %d, conns_seen %d; want %d, 0, 1",
					st.RepairedPackets, st.DamagedPackets, st.ConnsSeen, tt.repaired)
			}
		})
	}
}

// TestFlagsRepairedWithoutChecksums: flags hit by a flipped byte where the
// checksum cannot say what they were (left to the NIC, or damaged too): a
// SYN-ACK that lost its SYN flag still starts its direction after the SYN,
// and a FIN without ACK in the middle of a direction does not end it.
func TestFlagsRepairedWithoutChecksums(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaaaaaaa"},
		{at: 2, toCli: true, seq: 1, flags: "PA", data: "xxxxxxxx"},
		{at: 3, seq: 9, flags: "A"},
		{at: 4, seq: 9, flags: "PA", data: "bbbbbbbb"},
		{at: 5, toCli: true, seq: 9, flags: "PA", data: "yyyyyyyy"},
	})
	whole := []string{"c1 to_server data aaaaaaaa", "c1 to_client data xxxxxxxx", "c1 to_server data bbbbbbbb",
		"c1 to_client data yyyyyyyy", "c1 to_server close eof", "c1 to_client close eof"}
	// tcpOf returns the offset of the TCP header of packet i (of segs).
	tcpOf := func(f []byte, i int) int {
		recs, _ := records(f)
		return recs[i].off + 16 + 14 + 20
	}
	noSum := func(f []byte, at int) { f[at+16], f[at+17] = 0, 0 }
	for _, tt := range []struct {
		name   string
		damage func(f []byte)
	}{
		{"a SYN-ACK without its SYN", func(f []byte) { at := tcpOf(f, 1); f[at+13] = 0xd0; noSum(f, at) }},
		{"a FIN without ACK", func(f []byte) { at := tcpOf(f, 5); f[at+13] = 0x49; noSum(f, at) }},
		{"a RST without ACK that acknowledges", func(f []byte) { at := tcpOf(f, 5); f[at+13] = 0x04; noSum(f, at) }},
		{"RST, SYN and FIN at once", func(f []byte) { at := tcpOf(f, 5); f[at+13] = 0xe7; noSum(f, at) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := runDamaged(t, segs, tt.damage, whole)
			if st.RepairedPackets != 1 || st.DamagedPackets != 0 {
				t.Errorf("repaired_packets %d, damaged_packets %d; want 1, 0", st.RepairedPackets, st.DamagedPackets)
			}
		})
	}
}

// TestOffStart: the client's SYN not in the capture, and its handshake
// ACK's sequence number hit by a flipped byte: the ACK is dropped instead
// of starting the direction where every byte after it would look old; the
// SYN-ACK said where it starts.
func TestOffStart(t *testing.T) {
	segs := cat(handshake(0, 0)[1:], []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaaaaaaa"},
		{at: 2, toCli: true, seq: 1, flags: "PA", data: "xxxxxxxx"},
		{at: 3, seq: 9, flags: "PA", data: "bbbbbbbb"},
	})
	st := runDamaged(t, segs, func(f []byte) {
		recs, _ := records(f)
		at := recs[1].off + 16 + 14 + 20 // the client's handshake ACK
		f[at+5] ^= 0x86
		f[at+16], f[at+17] = 0, 0 // checksum left to the NIC
	}, []string{"c1 to_server data aaaaaaaa", "c1 to_client data xxxxxxxx", "c1 to_server data bbbbbbbb", "c1 to_server close eof", "c1 to_client close eof"})
	if st.DamagedPackets != 1 {
		t.Errorf("damaged_packets %d, want 1", st.DamagedPackets)
	}
}

// runDamaged writes segs as an Ethernet pcap file, lets damage change it,
// reads it and checks the chunks delivered against want.
func runDamaged(t *testing.T, segs []seg, damage func(f []byte), want []string) Stats {
	t.Helper()
	file := pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
	damage(file)
	rec := &recorder{}
	st, err := runFiles(t, nil, rec, file)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLines(want, rec.lines(false)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	return st
}
