package capture

import (
	"encoding/binary"
	"slices"

	"github.com/gopacket/gopacket/layers"
)

// A damaged capture file (a flipped byte in a transferred file) holds
// packets whose TCP headers lie: a sequence number far ahead makes the
// reassembly give up the real bytes behind it as a gap and drop the rest
// of the stream as retransmissions; a flag turned into RST or FIN closes
// the connection. The TCP checksum tells such a packet apart, but only on
// a direction whose checksums the capture shows right: captures taken on
// the sending host often hold checksums the NIC was to fill in. So each
// direction checks its first few data segments (checksumProbes), and a
// packet that would disturb its stream is dropped as damaged only there,
// and only when its checksum is wrong.

// farAhead is how far beyond the furthest data of its direction a data
// segment must start to be checked: a flipped byte in one of the two high
// bytes of a sequence number moves it by at least that much, and segments
// following a lost one are not that far beyond the ones before them.
const farAhead = 64 << 10

// checksumProbes is how many segments of a direction (the handshake's
// first) are checked to learn whether the capture's checksums are right on
// it.
const checksumProbes = 4

// tcpChecksum reports whether the decoded packet's TCP checksum is right;
// known is false when the capture cannot tell (a segment it cut short, an
// IP header that does not give the length).
func (d *decoder) tcpChecksum() (right, known bool) {
	right, known, _ = d.tcpChecksumOffload()
	return right, known
}

// tcpChecksumOffload is tcpChecksum, and offload says a wrong checksum is
// what checksum offload leaves in a capture taken on the sending host:
// zero, or the pseudo-header's sum alone, for the NIC to finish.
func (d *decoder) tcpChecksumOffload() (right, known, offload bool) {
	r, known, offload := d.residue()
	return r == 0xffff, known, offload
}

// residue returns the folded ones-complement sum of the current packet's
// pseudo-header and segment, checksum field included: 0xffff when its
// checksum is right (RFC 793, RFC 8200 section 8.1); known is false when
// the capture cannot tell (a segment it cut short, an IP header that does
// not give the length); offload as for tcpChecksumOffload.
func (d *decoder) residue() (r uint16, known, offload bool) {
	seg := len(d.tcp.Contents) + len(d.tcp.Payload)
	if d.claimed < 0 || d.claimed != len(d.tcp.Payload) || len(d.tcp.Contents)%2 != 0 {
		return 0, false, false
	}
	pseudo := sum16(0, d.src)
	pseudo = sum16(pseudo, d.dst)
	pseudo += 6 + uint64(seg>>16) + uint64(seg&0xffff)
	sum := sum16(pseudo, d.tcp.Contents)
	sum = sum16(sum, d.tcp.Payload)
	partial, field := uint16(fold(pseudo)), d.tcp.Checksum
	return uint16(fold(sum)), true, field == 0 || field == partial || field == ^partial
}

// fold folds a ones-complement sum into 16 bits.
func fold(sum uint64) uint64 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum
}

// damagedSYN reports whether the current packet, a SYN starting its
// direction, is damaged: its checksum is wrong, and not as offload leaves
// it. Nothing is known of the direction yet, but a damaged SYN would set
// where its stream starts, and dropping one loses no data.
func damagedSYN(d *decoder) bool {
	right, known, offload := d.tcpChecksumOffload()
	return known && !right && !offload
}

// sum16 adds b to sum as big-endian 16-bit words, an odd last byte padded
// with zero.
func sum16(sum uint64, b []byte) uint64 {
	for len(b) >= 8 {
		sum += uint64(binary.BigEndian.Uint16(b)) + uint64(binary.BigEndian.Uint16(b[2:])) +
			uint64(binary.BigEndian.Uint16(b[4:])) + uint64(binary.BigEndian.Uint16(b[6:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return sum
}

// checksums is what a direction learned of the capture's checksums.
type checksums struct {
	probed, right, offload uint8
}

// learn checks the current segment's checksum while probing.
func (c *checksums) learn(d *decoder) {
	if c.probed >= checksumProbes {
		return
	}
	if right, known, offload := d.tcpChecksumOffload(); known {
		c.probed++
		if right {
			c.right++
		} else if offload {
			c.offload++
		}
	}
}

// trusted reports whether the direction's checksums are right in the
// capture: most probes right, none wrong as checksum offload leaves them
// (a NIC that fills them in leaves every one of a direction so). A probe
// wrong otherwise is a damaged packet among the first ones, which a
// damaged file has: 0.2% of bytes flipped hits one 1500-byte packet in
// four.
func (c *checksums) trusted() bool {
	return c.probed > 0 && c.offload == 0 && 2*c.right > c.probed
}

// damaged reports whether the current packet is damaged: its direction's
// checksums are trusted and its own is wrong.
func (c *checksums) damaged(d *decoder) bool {
	if !c.trusted() {
		return false
	}
	right, known := d.tcpChecksum()
	return known && !right
}

// repair tries to make a frame of link type lt that does not decode as
// TCP over IP decode again, when the damage is one field of its IPv4 or
// link header (a flipped byte in a damaged file): the version and header
// length, the protocol, the fragment bits, the total length, or the
// EtherType / loopback family. A change is kept only when it leaves the
// IPv4 header checksum right, which the damage broke (or, for a link
// header, which was right all along): the packet is then decoded as it
// was sent instead of being lost. data is changed in place.
func repair(lt layers.LinkType, data []byte) bool {
	off, ok := ipv4Offset(lt)
	if !ok || len(data) < off+20 || isIPv6(lt, data) {
		return false
	}
	ip := data[off : off+20]
	if ipv4HeaderRight(ip) {
		return repairLink(lt, data) || repairDataOffset(data[off:])
	}
	try := func(i int, v ...byte) bool {
		old := slices.Clone(ip[i : i+len(v)])
		copy(ip[i:], v)
		if ipv4HeaderRight(ip) {
			return true
		}
		copy(ip[i:], old)
		return false
	}
	n := len(data) - off
	return try(0, 0x45) || try(9, 6) || try(6, 0x40, 0) || try(6, 0, 0) ||
		n <= 0xffff && try(2, byte(n>>8), byte(n))
}

// repairDataOffset sets back the data offset of the TCP header behind a
// right 20-byte IPv4 header p (a whole packet, not cut by the snap
// length) when it cannot be right (under 5 words, or past the segment):
// the one value that makes the TCP checksum right is kept. A capture
// whose checksums were left to the NIC (loopback, the sending host) has
// none right: there the largest whose options read as TCP options does
// (5, none, when no other does).
func repairDataOffset(p []byte) bool {
	total := int(binary.BigEndian.Uint16(p[2:]))
	if p[9] != 6 || total < 40 || total > len(p) {
		return false
	}
	tcp := p[20:total]
	if doff := int(tcp[12] >> 4); doff >= 5 && doff*4 <= len(tcp) {
		return false
	}
	pseudo := sum16(sum16(0, p[12:20]), []byte{0, 6, byte(len(tcp) >> 8), byte(len(tcp))})
	old := tcp[12]
	for doff := 5; doff <= 15 && doff*4 <= len(tcp); doff++ {
		tcp[12] = byte(doff)<<4 | old&0x0f
		if fold(sum16(pseudo, tcp)) == 0xffff {
			return true
		}
	}
	for doff := min(15, len(tcp)/4); doff >= 5; doff-- {
		if tcpOptionsOK(tcp[20 : doff*4]) {
			tcp[12] = byte(doff)<<4 | old&0x0f
			return true
		}
	}
	tcp[12] = old
	return false
}

// tcpOptionLen returns the shortest and longest lengths of a TCP option
// of a kind in use today (RFC 9293 and the IANA registry: MSS, window
// scale, SACK permitted, SACK, timestamps, MD5, user timeout, TCP-AO,
// MPTCP, TFO, the experimental kinds), ok false for another kind.
func tcpOptionLen(kind byte) (lo, hi int, ok bool) {
	switch kind {
	case 2:
		return 4, 4, true
	case 3:
		return 3, 3, true
	case 4:
		return 2, 2, true
	case 5:
		return 10, 34, true
	case 8:
		return 10, 10, true
	case 19:
		return 18, 18, true
	case 28:
		return 4, 4, true
	case 29, 30, 253, 254:
		return 3, 40, true
	case 34:
		return 2, 18, true
	}
	return 0, 0, false
}

// tcpOptionsOK reports whether b reads as the options of a TCP header as
// a stack writes them: kinds in use (tcpOptionLen) with their lengths, to
// its end, only zeros after an end of options. A data offset damaged
// upwards takes the payload's first bytes as options.
func tcpOptionsOK(b []byte) bool {
	for i := 0; i < len(b); {
		switch kind := b[i]; kind {
		case 0: // end of options: the rest is padding
			return !slices.ContainsFunc(b[i:], func(c byte) bool { return c != 0 })
		case 1:
			i++
		default:
			if i+1 >= len(b) {
				return false
			}
			n := int(b[i+1])
			lo, hi, ok := tcpOptionLen(kind)
			if !ok || n < lo || n > hi || i+n > len(b) {
				return false
			}
			i += n
		}
	}
	return true
}

// ipv4Offset returns where the IPv4 header starts in a frame of link
// type lt (no VLAN tags).
func ipv4Offset(lt layers.LinkType) (int, bool) {
	switch lt {
	case layers.LinkTypeEthernet:
		return 14, true
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		return 4, true
	case layers.LinkTypeLinuxSLL:
		return 16, true
	case layers.LinkTypeLinuxSLL2:
		return 20, true
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14, layers.LinkTypeIPv4:
		return 0, true
	}
	return 0, false
}

// isIPv6 reports whether the link header says IPv6, which no single
// damaged byte of an IPv4 one makes: such a packet is left alone.
func isIPv6(lt layers.LinkType, data []byte) bool {
	switch lt {
	case layers.LinkTypeEthernet:
		return binary.BigEndian.Uint16(data[12:]) == 0x86dd
	case layers.LinkTypeLinuxSLL:
		return binary.BigEndian.Uint16(data[14:]) == 0x86dd
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		switch binary.LittleEndian.Uint32(data) {
		case 10, 24, 28, 30, 10 << 24, 24 << 24, 28 << 24, 30 << 24:
			return true
		}
	}
	return false
}

// repairLink sets the link header's protocol field to IPv4 in front of a
// right IPv4 header (checked by the caller).
func repairLink(lt layers.LinkType, data []byte) bool {
	switch lt {
	case layers.LinkTypeEthernet:
		if binary.BigEndian.Uint16(data[12:]) == 0x0800 {
			return false
		}
		binary.BigEndian.PutUint16(data[12:], 0x0800)
	case layers.LinkTypeLinuxSLL:
		if binary.BigEndian.Uint16(data[14:]) == 0x0800 {
			return false
		}
		binary.BigEndian.PutUint16(data[14:], 0x0800)
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		// The family is in the capturing host's byte order (Null) or
		// big-endian (Loop): 2 either way for IPv4.
		if f := binary.LittleEndian.Uint32(data); f == 2 || f == 2<<24 {
			return false
		}
		if lt == layers.LinkTypeLoop {
			binary.BigEndian.PutUint32(data, 2)
		} else {
			binary.LittleEndian.PutUint32(data, 2)
		}
	default:
		return false
	}
	return true
}

// ipv4HeaderRight reports whether a 20-byte IPv4 header (no options)
// reads as one: version 4, length 5 words, a right checksum.
func ipv4HeaderRight(h []byte) bool {
	return h[0] == 0x45 && fold(sum16(0, h)) == 0xffff
}
