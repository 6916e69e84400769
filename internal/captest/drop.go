package captest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// magicPcapNG is the pcapng Section Header Block type, read little-endian.
const magicPcapNG = 0x0a0d0d0a

// Dropped is what Drop did.
type Dropped struct {
	// Data is the capture without the dropped packets, in the format of
	// the input.
	Data []byte
	// Packets counts the records read; Candidates the TCP packets that
	// carry payload among them; Dropped those left out.
	Packets, Candidates, Dropped int
}

// DropData returns src without a fraction frac of its TCP data segments
// (see Drop).
func DropData(src []byte, frac float64, seed uint64) ([]byte, error) {
	d, err := Drop(src, frac, seed)
	if err != nil {
		return nil, err
	}
	return d.Data, nil
}

// Drop reads the capture src (pcap or pcapng) and leaves out each TCP
// packet that carries payload, in either direction, with probability frac,
// drawn from math/rand/v2's PCG seeded by seed: the same input, frac and
// seed drop the same packets. SYN, FIN and RST packets without payload,
// pure ACKs and anything that does not decode as TCP are always kept. The
// rest is written out in the input's format: pcap with its link type,
// snap length and timestamp resolution (little-endian), or pcapng with its
// interfaces (of the first section: later sections' interfaces are taken
// to be the same).
func Drop(src []byte, frac float64, seed uint64) (*Dropped, error) {
	if len(src) < 4 {
		return nil, errors.New("drop: input too short to be a capture")
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keep := func(d *Dropped, lt layers.LinkType, data []byte) bool {
		d.Packets++
		if !hasTCPPayload(lt, data) {
			return true
		}
		d.Candidates++
		if rng.Float64() < frac {
			d.Dropped++
			return false
		}
		return true
	}
	if binary.LittleEndian.Uint32(src) == magicPcapNG {
		return dropNg(src, keep)
	}
	return dropPcap(src, keep)
}

type keepFunc func(d *Dropped, lt layers.LinkType, data []byte) bool

func dropPcap(src []byte, keep keepFunc) (*Dropped, error) {
	r, err := pcapgo.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("drop: %w", err)
	}
	var out bytes.Buffer
	w := pcapgo.NewWriter(&out)
	if r.Resolution() == gopacket.TimestampResolutionNanosecond {
		w = pcapgo.NewWriterNanos(&out)
	}
	if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
		return nil, err
	}
	d := &Dropped{}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("drop: record %d: %w", d.Packets+1, err)
		}
		if keep(d, r.LinkType(), data) {
			if err := w.WritePacket(ci, data); err != nil {
				return nil, err
			}
		}
	}
	d.Data = out.Bytes()
	return d, nil
}

func dropNg(src []byte, keep keepFunc) (*Dropped, error) {
	r, err := pcapgo.NewNgReader(bytes.NewReader(src), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return nil, fmt.Errorf("drop: %w", err)
	}
	var out bytes.Buffer
	var w *pcapgo.NgWriter
	written := 0 // interfaces of r already added to w
	d := &Dropped{}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("drop: record %d: %w", d.Packets+1, err)
		}
		// The writer starts at the first packet: only then are the
		// interfaces before it known (WantMixedLinkType reads them lazily).
		for ; written < r.NInterfaces(); written++ {
			intf, _ := r.Interface(written)
			if w == nil {
				opts := pcapgo.DefaultNgWriterOptions
				opts.SectionInfo = r.SectionInfo()
				if w, err = pcapgo.NewNgWriterInterface(&out, intf, opts); err != nil {
					return nil, fmt.Errorf("drop: %w", err)
				}
			} else if _, err := w.AddInterface(intf); err != nil {
				return nil, fmt.Errorf("drop: %w", err)
			}
		}
		lt, _ := ci.AncillaryData[0].(layers.LinkType)
		if keep(d, lt, data) {
			ci.AncillaryData = nil
			if err := w.WritePacket(ci, data); err != nil {
				return nil, err
			}
		}
	}
	if w == nil { // no packets: nothing to drop
		d.Data = bytes.Clone(src)
		return d, nil
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	d.Data = out.Bytes()
	return d, nil
}

// hasTCPPayload reports whether data, a frame of link type lt, decodes down
// to a TCP segment with at least one byte of payload (link padding, beyond
// the IP length, is not payload).
func hasTCPPayload(lt layers.LinkType, data []byte) bool {
	p := gopacket.NewPacket(data, lt, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	return ok && len(tcp.Payload) > 0
}
