package gen

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Dir is the direction of a packet on a tapped connection.
type Dir uint8

const (
	// ToServer is client -> broker (requests).
	ToServer Dir = iota
	// ToClient is broker -> client (responses).
	ToClient
)

func (d Dir) String() string {
	if d == ToServer {
		return "to_server"
	}
	return "to_client"
}

func (d Dir) other() Dir { return 1 - d }

// Flags are the TCP flags of a recorded packet.
type Flags uint8

// TCP flags a tap emits.
const (
	SYN Flags = 1 << iota
	ACK
	FIN
	RST
	PSH
)

// Packet is one TCP segment recorded by a tap. Payload is only valid until
// the capture is written; it must not be modified.
type Packet struct {
	Time  time.Time
	Conn  *Conn
	Dir   Dir
	Flags Flags
	Seq   uint32
	Ack   uint32
	// Off is the stream offset, in direction Dir, of Payload's first byte
	// (0 is the first data byte after the SYN).
	Off     int64
	Payload []byte

	ipID uint16
}

// Link is the link-layer header written in front of each IPv4 packet.
type Link uint8

const (
	// LinkEthernet writes Ethernet II frames with made-up MACs.
	LinkEthernet Link = iota
	// LinkSLL2 writes Linux "cooked" v2 headers, as tcpdump -i any does.
	LinkSLL2
	// LinkNull writes BSD loopback headers (4-byte address family), as on
	// macOS lo0.
	LinkNull
)

func (l Link) String() string {
	switch l {
	case LinkSLL2:
		return "sll2"
	case LinkNull:
		return "null"
	}
	return "ethernet"
}

// ParseLink returns the Link named by s ("ethernet", "sll2", "null").
func ParseLink(s string) (Link, error) {
	for _, l := range []Link{LinkEthernet, LinkSLL2, LinkNull} {
		if strings.EqualFold(s, l.String()) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown link type %q: use ethernet, sll2 or null", s)
}

// LinkType is the pcap link type of l.
func (l Link) LinkType() layers.LinkType {
	switch l {
	case LinkSLL2:
		return layers.LinkTypeLinuxSLL2
	case LinkNull:
		return layers.LinkTypeNull
	}
	return layers.LinkTypeEthernet
}

var (
	clientMAC = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	serverMAC = []byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
)

// sll2 is a Linux cooked v2 header; gopacket decodes it but cannot
// serialize it. Layout: protocol, reserved, ifindex, ARPHRD type, packet
// type, address length, 8 address bytes (see pcap-linktype(7), LINKTYPE_LINUX_SLL2).
type sll2 struct{ outgoing bool }

func (s sll2) LayerType() gopacket.LayerType { return layers.LayerTypeLinuxSLL2 }

func (s sll2) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(20)
	if err != nil {
		return err
	}
	clear(h)
	binary.BigEndian.PutUint16(h[0:], uint16(layers.EthernetTypeIPv4))
	binary.BigEndian.PutUint32(h[4:], 1)   // ifindex of lo
	binary.BigEndian.PutUint16(h[8:], 772) // ARPHRD_LOOPBACK
	if s.outgoing {
		h[10] = 4 // PACKET_OUTGOING
	}
	h[11] = 6 // address length; the loopback address is all zeros
	return nil
}

// serialize builds the wire bytes of p with link-layer header l.
func serialize(buf gopacket.SerializeBuffer, l Link, p *Packet, mss int) error {
	c := p.Conn
	src, dst := c.Client, c.Server
	if p.Dir == ToClient {
		src, dst = dst, src
	}
	ip := &layers.IPv4{
		Version:  4,
		TTL:      64,
		Flags:    layers.IPv4DontFragment,
		Id:       p.ipID,
		Protocol: layers.IPProtocolTCP,
		SrcIP:    src.Addr().AsSlice(),
		DstIP:    dst.Addr().AsSlice(),
	}
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(src.Port()),
		DstPort: layers.TCPPort(dst.Port()),
		Seq:     p.Seq,
		Ack:     p.Ack,
		Window:  65535,
		SYN:     p.Flags&SYN != 0,
		ACK:     p.Flags&ACK != 0,
		FIN:     p.Flags&FIN != 0,
		RST:     p.Flags&RST != 0,
		PSH:     p.Flags&PSH != 0,
	}
	if tcp.SYN {
		tcp.Options = []layers.TCPOption{{
			OptionType:   layers.TCPOptionKindMSS,
			OptionLength: 4,
			OptionData:   binary.BigEndian.AppendUint16(nil, uint16(mss)),
		}}
	}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		return err
	}
	var link gopacket.SerializableLayer
	switch l {
	case LinkSLL2:
		link = sll2{outgoing: p.Dir == ToServer}
	case LinkNull:
		link = &layers.Loopback{Family: layers.ProtocolFamilyIPv4}
	default:
		e := &layers.Ethernet{SrcMAC: clientMAC, DstMAC: serverMAC, EthernetType: layers.EthernetTypeIPv4}
		if p.Dir == ToClient {
			e.SrcMAC, e.DstMAC = serverMAC, clientMAC
		}
		link = e
	}
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	return gopacket.SerializeLayers(buf, opts, link, ip, tcp, gopacket.Payload(p.Payload))
}
