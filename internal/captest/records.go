package captest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// magicPcapNG is the pcapng Section Header Block type, read little-endian.
const magicPcapNG = 0x0a0d0d0a

// record is one packet record of a capture file.
type record struct {
	ci   gopacket.CaptureInfo
	data []byte
	link layers.LinkType
}

// capFile is a capture read whole: its format's parameters and records,
// so that a rewrite can write the records back, edited, in the same form.
type capFile struct {
	ng      bool
	snaplen uint32
	link    layers.LinkType // pcap
	nanos   bool            // pcap
	section pcapgo.NgSectionInfo
	intfs   []pcapgo.NgInterface // pcapng, of the first section
	recs    []record
}

// readCapture reads every record of src, pcap or pcapng; op names the
// caller in errors.
func readCapture(src []byte, op string) (*capFile, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%s: input too short to be a capture", op)
	}
	if binary.LittleEndian.Uint32(src) == magicPcapNG {
		return readNg(src, op)
	}
	r, err := pcapgo.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	f := &capFile{snaplen: r.Snaplen(), link: r.LinkType(), nanos: r.Resolution() == gopacket.TimestampResolutionNanosecond}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", op, len(f.recs)+1, err)
		}
		f.recs = append(f.recs, record{ci: ci, data: data, link: r.LinkType()})
	}
}

func readNg(src []byte, op string) (*capFile, error) {
	r, err := pcapgo.NewNgReader(bytes.NewReader(src), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	f := &capFile{ng: true}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", op, len(f.recs)+1, err)
		}
		lt, _ := ci.AncillaryData[0].(layers.LinkType)
		ci.AncillaryData = nil
		f.recs = append(f.recs, record{ci: ci, data: data, link: lt})
	}
	// Interfaces are read lazily (WantMixedLinkType): all are known now.
	f.section = r.SectionInfo()
	for i := range r.NInterfaces() {
		intf, _ := r.Interface(i)
		f.intfs = append(f.intfs, intf)
	}
	return f, nil
}

// write returns recs written in f's format: pcap with its link type, snap
// length and timestamp resolution (little-endian), or pcapng with its
// interfaces. A pcapng capture without interfaces is orig unchanged.
func (f *capFile) write(recs []record, orig []byte) ([]byte, error) {
	var out bytes.Buffer
	if !f.ng {
		w := pcapgo.NewWriter(&out)
		if f.nanos {
			w = pcapgo.NewWriterNanos(&out)
		}
		if err := w.WriteFileHeader(f.snaplen, f.link); err != nil {
			return nil, err
		}
		for _, r := range recs {
			if err := w.WritePacket(r.ci, r.data); err != nil {
				return nil, err
			}
		}
		return out.Bytes(), nil
	}
	if len(f.intfs) == 0 {
		return bytes.Clone(orig), nil
	}
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo = f.section
	w, err := pcapgo.NewNgWriterInterface(&out, f.intfs[0], opts)
	if err != nil {
		return nil, err
	}
	for _, intf := range f.intfs[1:] {
		if _, err := w.AddInterface(intf); err != nil {
			return nil, err
		}
	}
	for _, r := range recs {
		if err := w.WritePacket(r.ci, r.data); err != nil {
			return nil, err
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
