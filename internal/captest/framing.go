package captest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ToPcap converts a capture to classic pcap (little-endian, nanosecond
// timestamps, snap length 262144): a pcapng capture's interfaces must all
// have the same link type. Tests use it to get a pcap of each committed
// pcapng capture.
func ToPcap(src []byte) ([]byte, error) {
	if len(src) < 4 || binary.LittleEndian.Uint32(src) != magicPcapNG {
		return bytes.Clone(src), nil
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(src), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return nil, fmt.Errorf("to pcap: %w", err)
	}
	var out bytes.Buffer
	w := pcapgo.NewWriterNanos(&out)
	var link layers.LinkType
	for n := 0; ; n++ {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("to pcap: record %d: %w", n+1, err)
		}
		lt, _ := ci.AncillaryData[0].(layers.LinkType)
		if n == 0 {
			link = lt
			if err := w.WriteFileHeader(262144, lt); err != nil {
				return nil, err
			}
		} else if lt != link {
			return nil, fmt.Errorf("to pcap: packet %d has link type %s, the first %s", n+1, lt, link)
		}
		ci.AncillaryData = nil
		if err := w.WritePacket(ci, data); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// SpareFraming returns damaged with every byte outside packet data put
// back as it is in orig: the file header, pcap record headers, pcapng
// blocks other than the frames of packet blocks. That is the same damage
// minus what hits the file's framing: what a reader that resynchronises
// perfectly would see. damaged must be orig with bytes changed in place.
func SpareFraming(orig, damaged []byte) ([]byte, error) {
	if len(orig) != len(damaged) {
		return nil, errors.New("spare framing: lengths differ")
	}
	out := bytes.Clone(orig)
	keep := func(from, n int) error {
		if from < 0 || n < 0 || from+n > len(orig) {
			return fmt.Errorf("spare framing: packet data at %d+%d past the end", from, n)
		}
		copy(out[from:from+n], damaged[from:from+n])
		return nil
	}
	if len(orig) < 24 {
		return nil, errors.New("spare framing: not a capture")
	}
	if binary.LittleEndian.Uint32(orig) != magicPcapNG {
		order := binary.ByteOrder(binary.LittleEndian)
		if m := binary.BigEndian.Uint32(orig); m == 0xa1b2c3d4 || m == 0xa1b23c4d {
			order = binary.BigEndian
		}
		for off := 24; off+16 <= len(orig); {
			n := int(order.Uint32(orig[off+8:]))
			if err := keep(off+16, n); err != nil {
				return nil, err
			}
			off += 16 + n
		}
		return out, nil
	}
	var order binary.ByteOrder = binary.LittleEndian
	for off := 0; off+12 <= len(orig); {
		typ := order.Uint32(orig[off:])
		if typ == magicPcapNG {
			order = binary.LittleEndian
			if binary.BigEndian.Uint32(orig[off+8:]) == 0x1a2b3c4d {
				order = binary.BigEndian
			}
		}
		n := int(order.Uint32(orig[off+4:]))
		if n < 12 {
			return nil, fmt.Errorf("spare framing: block at %d of length %d", off, n)
		}
		var err error
		switch typ {
		case 2, 6: // Packet Block, Enhanced Packet Block
			err = keep(off+28, int(order.Uint32(orig[off+20:])))
		case 3: // Simple Packet Block: the frame runs to the padding
			err = keep(off+12, n-16)
		}
		if err != nil {
			return nil, err
		}
		off += n
	}
	return out, nil
}
