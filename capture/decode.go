package capture

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Link types accepted besides the named gopacket ones: DLT_RAW is 12 on
// most systems and 14 on OpenBSD; some writers put the DLT in the file
// instead of LINKTYPE_RAW (101).
const (
	linkTypeRawDLT12 layers.LinkType = 12
	linkTypeRawDLT14 layers.LinkType = 14
)

// SupportedLinkType reports whether Packet decodes frames of link type lt:
// Ethernet, Linux cooked v1 and v2, BSD loopback (NULL and LOOP) and raw
// IP (RAW, IPV4, IPV6).
func SupportedLinkType(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeNull, layers.LinkTypeLoop, layers.LinkTypeRaw,
		linkTypeRawDLT12, linkTypeRawDLT14, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		return true
	}
	return false
}

// verdict is what decoding made of a packet.
type verdict uint8

const (
	pktTCP verdict = iota
	pktNonIP
	pktNonTCP
	pktFragment
	pktBad
)

// decoder holds preallocated layers, so decoding a packet allocates
// nothing. After decode returns pktTCP, its fields describe that packet and
// point into its bytes.
type decoder struct {
	eth  layers.Ethernet
	vlan layers.Dot1Q
	sll  layers.LinuxSLL
	sll2 layers.LinuxSLL2
	lo   layers.Loopback
	ip4  layers.IPv4
	ip6  layers.IPv6
	tcp  layers.TCP

	v6       bool
	src, dst []byte // IP addresses (4 or 16 bytes)
	ipID     uint16 // IPv4 identification, 0 for IPv6
	// claimed is the TCP payload length the IP header claims, which is
	// more than len(tcp.Payload) when the capture cut the packet short;
	// -1 when the header does not say (TSO with a zero IPv4 length, IPv6
	// jumbograms).
	claimed int
	netFlow gopacket.Flow
}

var nf = gopacket.NilDecodeFeedback

// decode takes a frame of link type lt down to its TCP header.
func (d *decoder) decode(lt layers.LinkType, data []byte) verdict {
	et, p, v := d.link(lt, data)
	if v != pktTCP {
		return v
	}
	// 802.1Q tags, stacked for QinQ (0x88a8 outer, or the older 0x9100).
	for et == layers.EthernetTypeDot1Q || et == layers.EthernetTypeQinQ || et == 0x9100 {
		if d.vlan.DecodeFromBytes(p, nf) != nil {
			return pktBad
		}
		et, p = d.vlan.Type, d.vlan.Payload
	}
	switch et {
	case layers.EthernetTypeIPv4:
		p, v = d.ipv4(p)
	case layers.EthernetTypeIPv6:
		p, v = d.ipv6(p)
	default:
		return pktNonIP
	}
	if v != pktTCP {
		return v
	}
	if d.tcp.DecodeFromBytes(p, nf) != nil {
		return pktBad
	}
	if d.claimed >= 0 {
		d.claimed -= len(d.tcp.Contents)
	}
	return pktTCP
}

// link strips the link-layer header and returns the EtherType of what
// follows.
func (d *decoder) link(lt layers.LinkType, data []byte) (layers.EthernetType, []byte, verdict) {
	switch lt {
	case layers.LinkTypeEthernet:
		if d.eth.DecodeFromBytes(data, nf) != nil {
			return 0, nil, pktBad
		}
		return d.eth.EthernetType, d.eth.Payload, pktTCP
	case layers.LinkTypeLinuxSLL:
		if d.sll.DecodeFromBytes(data, nf) != nil {
			return 0, nil, pktBad
		}
		return d.sll.EthernetType, d.sll.Payload, pktTCP
	case layers.LinkTypeLinuxSLL2:
		if d.sll2.DecodeFromBytes(data, nf) != nil {
			return 0, nil, pktBad
		}
		return d.sll2.ProtocolType, d.sll2.Payload, pktTCP
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		if d.lo.DecodeFromBytes(data, nf) != nil {
			return 0, nil, pktBad
		}
		switch d.lo.Family {
		case layers.ProtocolFamilyIPv4:
			return layers.EthernetTypeIPv4, d.lo.Payload, pktTCP
		case layers.ProtocolFamilyIPv6BSD, layers.ProtocolFamilyIPv6FreeBSD,
			layers.ProtocolFamilyIPv6Darwin, layers.ProtocolFamilyIPv6Linux:
			return layers.EthernetTypeIPv6, d.lo.Payload, pktTCP
		}
		return 0, nil, pktNonIP
	case layers.LinkTypeRaw, linkTypeRawDLT12, linkTypeRawDLT14:
		if len(data) == 0 {
			return 0, nil, pktBad
		}
		switch data[0] >> 4 {
		case 4:
			return layers.EthernetTypeIPv4, data, pktTCP
		case 6:
			return layers.EthernetTypeIPv6, data, pktTCP
		}
		return 0, nil, pktBad
	case layers.LinkTypeIPv4:
		return layers.EthernetTypeIPv4, data, pktTCP
	case layers.LinkTypeIPv6:
		return layers.EthernetTypeIPv6, data, pktTCP
	}
	return 0, nil, pktBad
}

func (d *decoder) ipv4(p []byte) ([]byte, verdict) {
	ip := &d.ip4
	if ip.DecodeFromBytes(p, nf) != nil || ip.Version != 4 {
		return nil, pktBad
	}
	if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
		return nil, pktFragment
	}
	if ip.Protocol != layers.IPProtocolTCP {
		return nil, pktNonTCP
	}
	d.v6, d.src, d.dst, d.ipID = false, ip.SrcIP, ip.DstIP, ip.Id
	d.claimed = -1
	// A zero total length is what TSO hands to the capture: no claim.
	if n := int(binary.BigEndian.Uint16(p[2:4])); n != 0 {
		d.claimed = n - int(ip.IHL)*4
	}
	d.netFlow = ip.NetworkFlow()
	return ip.Payload, pktTCP
}

func (d *decoder) ipv6(p []byte) ([]byte, verdict) {
	ip := &d.ip6
	if ip.DecodeFromBytes(p, nf) != nil && !gsoIPv6(ip, p) || ip.Version != 6 {
		return nil, pktBad
	}
	next, payload := ip.NextHeader, ip.Payload
	consumed := 0 // extension header bytes before the TCP header
	if ip.HopByHop != nil {
		next, consumed = ip.HopByHop.NextHeader, ip.HopByHop.ActualLength
	}
	for next == layers.IPProtocolIPv6Routing || next == layers.IPProtocolIPv6Destination {
		if len(payload) < 2 {
			return nil, pktBad
		}
		n := (int(payload[1]) + 1) * 8
		if n > len(payload) {
			return nil, pktBad
		}
		next, payload, consumed = layers.IPProtocol(payload[0]), payload[n:], consumed+n
	}
	if next == layers.IPProtocolIPv6Fragment {
		return nil, pktFragment
	}
	if next != layers.IPProtocolTCP {
		return nil, pktNonTCP
	}
	d.v6, d.src, d.dst, d.ipID = true, ip.SrcIP, ip.DstIP, 0
	d.claimed = -1
	if ip.Length != 0 {
		d.claimed = int(ip.Length) - consumed
	}
	d.netFlow = ip.NetworkFlow()
	return payload, pktTCP
}

// tsval returns the TCP timestamp option's TSval, 0 if absent.
func (d *decoder) tsval() uint32 {
	for i := range d.tcp.Options {
		o := &d.tcp.Options[i]
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) >= 4 {
			return binary.BigEndian.Uint32(o.OptionData)
		}
	}
	return 0
}

// gsoIPv6 accepts what gopacket rejects: a zero payload length without a
// jumbo option, which is how captures show Linux GSO and BIG TCP packets
// larger than 64 KiB. The payload is the rest of the frame.
func gsoIPv6(ip *layers.IPv6, p []byte) bool {
	if len(p) < 40 || p[0]>>4 != 6 || binary.BigEndian.Uint16(p[4:6]) != 0 ||
		layers.IPProtocol(p[6]) == layers.IPProtocolIPv6HopByHop {
		return false
	}
	ip.Version, ip.Length, ip.NextHeader = 6, 0, layers.IPProtocol(p[6])
	ip.SrcIP, ip.DstIP, ip.HopByHop = p[8:24], p[24:40], nil
	ip.Contents, ip.Payload = p[:40], p[40:]
	return true
}
