package capture

import (
	"encoding/binary"
	"net/netip"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// A flipped byte in a TCP header that decodes still misleads: a damaged
// port puts the segment in a connection of its own, a damaged sequence
// number puts its bytes in the wrong place, a damaged data offset moves
// where its payload starts, a SYN turned into a FIN ends the direction
// before it began. Dropping such a packet (checksum.go) loses its bytes;
// in a capture file whose checksums are right they can be had back. The
// TCP checksum is a ones-complement sum, so when one 16-bit word was
// damaged the wrong sum says exactly what that word was: w = w' - r
// (mod 0xffff), r the folded sum of the damaged segment. Which word is
// not known, so a header word is set back only where the packet is odd in
// its stream and the word's old value makes it ordinary: a port that names
// a connection being assembled, a sequence number where the direction's
// next bytes go, flags and a header length like the direction's. A wrong
// sum from damage elsewhere (the payload) gives a value that fits by
// chance at most once in tens of thousands. The packet's bytes are set
// back too, so its checksum is right afterwards. Files only (repaired
// packets are counted in Stats.RepairedPackets).

// Offsets of the TCP header's 16-bit words that can be set back.
const (
	wordSrcPort = 0
	wordDstPort = 2
	wordSeqHi   = 4
	wordSeqLo   = 6
	wordFlags   = 12
)

// wordBefore returns what the header word at off was before damage, if
// that word alone was damaged and the packet's sum is r (not 0xffff). A
// value 0 could also have been 0xffff (the same in ones-complement): alt.
func (d *decoder) wordBefore(off int, r uint16) (w uint16, alt bool) {
	cur := uint32(binary.BigEndian.Uint16(d.tcp.Contents[off:]))
	w = uint16((cur + 0xffff - uint32(r)) % 0xffff)
	return w, w == 0
}

// sumSuspect reports whether the current packet's checksum says it was
// damaged: wrong, on a direction whose checksums the capture shows right
// (sums), or, before anything is known of the direction, wrong other than
// as checksum offload leaves it. It returns the packet's sum.
func (d *decoder) sumSuspect(sums *checksums) (uint16, bool) {
	r, known, offload := d.residue()
	if !known || r == 0xffff {
		return r, false
	}
	if sums != nil && sums.probed > 0 {
		return r, sums.trusted()
	}
	return r, !offload
}

// setWord writes w into the header word at off (the packet's bytes).
func (d *decoder) setWord(off int, w uint16) {
	binary.BigEndian.PutUint16(d.tcp.Contents[off:], w)
}

// connKey names an assembled connection by its endpoints, as first seen.
type connKey [2]netip.AddrPort

// portFix looks, for the first packet of a connection that is not a SYN,
// for a damaged port: one whose old value names a connection being
// assembled. It sets the packet's bytes back and reports true; the caller
// decodes and assembles it again.
func (a *Assembler) portFix(tcp *layers.TCP) bool {
	d := &a.dec
	if !a.repair || tcp.SYN || len(a.open) == 0 {
		return false
	}
	r, bad := d.sumSuspect(nil)
	if !bad {
		return false
	}
	src, dst := addrOf(d.src), addrOf(d.dst)
	for _, off := range [...]int{wordSrcPort, wordDstPort} {
		w, alt := d.wordBefore(off, r)
		for _, p := range [...]uint16{w, 0xffff} {
			if p == 0xffff && !alt {
				continue
			}
			sp, dp := uint16(tcp.SrcPort), uint16(tcp.DstPort)
			if off == wordSrcPort {
				sp = p
			} else {
				dp = p
			}
			if a.isOpen(netip.AddrPortFrom(src, sp), netip.AddrPortFrom(dst, dp)) {
				d.setWord(off, p)
				return true
			}
		}
	}
	return false
}

// headerFix sets back a damaged sequence number or flags word of the
// current packet, on direction h whose next byte reassembly expects at
// nextSeq (negative: none yet), when the packet is odd there and the old
// value makes it ordinary. It reports whether it changed the packet.
func (s *stream) headerFix(h *halfState, tcp *layers.TCP, nextSeq reassembly.Sequence) bool {
	d := &s.a.dec
	n := len(tcp.Payload)
	seq := reassembly.Sequence(tcp.Seq)
	oddSeq := n > 0 && nextSeq >= 0 && seq != h.maxEnd && seq != nextSeq
	oddFlags := tcp.URG || tcp.RST || tcp.FIN || tcp.SYN && nextSeq >= 0 ||
		n > 0 && (h.hdr != 0 && len(tcp.Contents) != h.hdr || h.hdr == 0 && !tcpOptionsOK(tcp.Contents[20:]))
	if !oddSeq && !oddFlags {
		return false
	}
	r, bad := d.sumSuspect(&h.sums)
	if !bad {
		return false
	}
	if oddSeq {
		for _, off := range [...]int{wordSeqHi, wordSeqLo} {
			w, _ := d.wordBefore(off, r)
			b := binary.BigEndian.AppendUint32(nil, tcp.Seq)
			binary.BigEndian.PutUint16(b[off-wordSeqHi:], w)
			if c := reassembly.Sequence(binary.BigEndian.Uint32(b)); c == h.maxEnd || c == nextSeq {
				d.setWord(off, w)
				tcp.Seq = uint32(c)
				return true
			}
		}
	}
	if oddFlags {
		w, _ := d.wordBefore(wordFlags, r)
		if s.ordinaryFlags(h, w, nextSeq) {
			d.setWord(wordFlags, w)
			d.setFlags(w)
			return true
		}
	}
	return false
}

// ordinaryFlags reports whether w, a TCP header's data offset and flags
// word, is what an ordinary segment of direction h carries: a header as
// long as the direction's (or a plausible one), no reserved bit, and ACK
// with at most PSH, or the SYN that starts a direction.
func (s *stream) ordinaryFlags(h *halfState, w uint16, nextSeq reassembly.Sequence) bool {
	if s.a.hole.n > 0 {
		// Cut by the snaplen, its payload is padding (padCut), apart from
		// the header: a header of another length cannot be put back.
		return false
	}
	hdr := int(w>>12) * 4
	seg := len(s.a.dec.tcp.Contents) + len(s.a.dec.tcp.Payload)
	if hdr < 20 || hdr > seg || w&0x0e00 != 0 {
		return false
	}
	flags := w & 0x1ff
	if nextSeq < 0 && hdr == seg && (flags == 0x002 || flags == 0x012) { // SYN, SYN-ACK
		return true
	}
	if h.hdr != 0 && hdr != h.hdr || h.hdr == 0 && !tcpOptionsOK(s.a.dec.tcp.Contents[:hdr][min(hdr, 20):]) {
		return false
	}
	return flags == 0x010 || flags == 0x018
}

// noACK clears the flags of a segment whose flags no TCP sends, hit by
// a flipped byte of a damaged file where checksums could not say
// (offload) what they were: in a started direction, neither ACK nor RST
// (every segment after the handshake acknowledges, but for a reset: RFC
// 9293 §3.10.7.4); a reset without ACK but with an acknowledgement; or
// two of SYN, FIN and RST. A FIN or RST there would
// end the direction, a SYN restart it: it is taken as a plain ACK. (A
// SYN alone is left to the SYN rules: a retransmitted SYN, or a new
// connection on the same ports.) It reports whether it changed the
// packet.
func noACK(tcp *layers.TCP, nextSeq reassembly.Sequence) bool {
	two := tcp.SYN && tcp.FIN || tcp.SYN && tcp.RST || tcp.FIN && tcp.RST
	lone := nextSeq >= 0 && !tcp.ACK && !tcp.RST && !(tcp.SYN && !tcp.FIN && len(tcp.Payload) == 0)
	// A reset without ACK answers a segment that acknowledged something,
	// and so acknowledges nothing itself: a zero field (RFC 9293 §3.10.7.1,
	// as stacks send it). One with an acknowledgement is an ACK whose
	// flags were hit.
	rst := nextSeq >= 0 && tcp.RST && !tcp.ACK && tcp.Ack != 0
	if !two && !lone && !rst {
		return false
	}
	tcp.ACK, tcp.FIN, tcp.SYN, tcp.RST, tcp.URG = true, false, false, false, false
	return true
}

// setFlags applies a repaired data offset and flags word to the decoded
// header: its flags, and where its payload starts.
func (d *decoder) setFlags(w uint16) {
	t := &d.tcp
	seg := t.Contents[:len(t.Contents)+len(t.Payload)]
	hdr := int(w>>12) * 4
	if d.claimed >= 0 {
		d.claimed += len(t.Contents) - hdr
	}
	t.DataOffset = uint8(w >> 12)
	t.Contents, t.Payload = seg[:hdr], seg[hdr:]
	t.NS, t.CWR, t.ECE = w&0x100 != 0, w&0x80 != 0, w&0x40 != 0
	t.URG, t.ACK, t.PSH = w&0x20 != 0, w&0x10 != 0, w&0x08 != 0
	t.RST, t.SYN, t.FIN = w&0x04 != 0, w&0x02 != 0, w&0x01 != 0
}

// known reports whether the current packet belongs to a connection
// being assembled.
func (a *Assembler) known() bool {
	d := &a.dec
	return a.isOpen(netip.AddrPortFrom(addrOf(d.src), uint16(d.tcp.SrcPort)), netip.AddrPortFrom(addrOf(d.dst), uint16(d.tcp.DstPort)))
}

// isOpen reports whether a connection between x and y, either way, is
// being assembled.
func (a *Assembler) isOpen(x, y netip.AddrPort) bool {
	return a.open[connKey{x, y}] || a.open[connKey{y, x}]
}

// ipFix sets back one damaged word of the current packet's IPv4 header,
// decoded as TCP: its total length (which moves where the payload ends:
// link padding taken as data, or data cut off) or a word of an address
// (which puts the packet in a connection of its own). The IPv4 header
// checksum says what the word was, as the TCP one does for its header;
// a total length is kept only when the TCP checksum is right afterwards,
// which it is not by chance, or when it, and not the damaged one, ends
// the packet where the frame ends (the TCP checksum may be damaged too,
// or left to the NIC), and an address only when the packet then belongs
// to a connection being assembled. It reports whether it changed the packet,
// decoded again; the caller counts it.
func (a *Assembler) ipFix(lt layers.LinkType, data []byte) bool {
	d := &a.dec
	ip := d.ip4.Contents
	if !a.repair || d.v6 || len(ip) != 20 {
		return false
	}
	sum := fold(sum16(0, ip))
	if sum == 0xffff {
		return false
	}
	if right, known := d.tcpChecksum(); right && known {
		return false // a harmless field (TTL, id) was hit
	}
	for _, off := range [...]int{2, 12, 14, 16, 18} {
		ip = d.ip4.Contents
		cur := binary.BigEndian.Uint16(ip[off:])
		w := uint16((uint32(cur) + 0xffff - uint32(sum)) % 0xffff)
		if w == cur || off == 2 && w < 40 {
			continue
		}
		binary.BigEndian.PutUint16(ip[off:], w)
		if d.decode(lt, data) == pktTCP {
			// An address is in the TCP checksum too (pseudo-header): a
			// wrong word set to make up for the damaged one leaves it
			// right. Only a connection being assembled confirms one.
			if right, known := d.tcpChecksum(); off == 2 && (right && known || fitsFrame(lt, data, w) && !fitsFrame(lt, data, cur)) || off >= 12 && a.known() {
				return true
			}
		}
		binary.BigEndian.PutUint16(ip[off:], cur)
		d.decode(lt, data)
	}
	return false
}

// fitsFrame reports whether an IPv4 total length of n ends the packet at
// the end of the frame: exactly, or, in an Ethernet frame padded to its
// minimum of 60 bytes, at the zero padding.
func fitsFrame(lt layers.LinkType, data []byte, n uint16) bool {
	off, ok := ipv4Offset(lt)
	if !ok || len(data) < off+40 {
		return false
	}
	if off+int(n) == len(data) {
		return true
	}
	hdr := 20 + int(data[off+32]>>4)*4 // IPv4 (no options) and TCP headers
	if lt != layers.LinkTypeEthernet || len(data) != 60 || int(n) < hdr || off+int(n) > len(data) {
		return false
	}
	for _, b := range data[off+int(n):] {
		if b != 0 {
			return false
		}
	}
	return true
}
