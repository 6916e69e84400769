package capture

import "encoding/binary"

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
	seg := len(d.tcp.Contents) + len(d.tcp.Payload)
	if d.claimed < 0 || d.claimed != len(d.tcp.Payload) || len(d.tcp.Contents)%2 != 0 {
		return false, false, false
	}
	// RFC 793 (and RFC 8200 section 8.1): the pseudo-header, then the
	// segment, checksum field included: a right one sums to all ones.
	pseudo := sum16(0, d.src)
	pseudo = sum16(pseudo, d.dst)
	pseudo += 6 + uint64(seg>>16) + uint64(seg&0xffff)
	sum := sum16(pseudo, d.tcp.Contents)
	sum = sum16(sum, d.tcp.Payload)
	partial, field := uint16(fold(pseudo)), d.tcp.Checksum
	return fold(sum) == 0xffff, true, field == 0 || field == partial || field == ^partial
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
	probed, right uint8
}

// learn checks the current segment's checksum while probing.
func (c *checksums) learn(d *decoder) {
	if c.probed >= checksumProbes {
		return
	}
	if right, known := d.tcpChecksum(); known {
		c.probed++
		if right {
			c.right++
		}
	}
}

// damaged reports whether the current packet is damaged: its direction's
// probed checksums were all right (one is enough: a NIC that fills them in
// leaves every one of a direction wrong), and its own is wrong.
func (c *checksums) damaged(d *decoder) bool {
	if c.probed == 0 || c.right != c.probed {
		return false
	}
	right, known := d.tcpChecksum()
	return known && !right
}
