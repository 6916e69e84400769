package capture

import (
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// fastReader reads the records of a capture file that have the plain
// shape straight from the read buffer, as pcapgo would read them: the same
// bytes and CaptureInfo, without pcapgo's small reads and its copy of
// every packet. Plain: a pcap record whose lengths pcapgo accepts, or a
// pcapng Enhanced Packet Block without options on an interface pcapgo
// knows; either whole in the buffer. Every other record or block
// (headers, options, statistics, damage) is left to pcapgo, which stays
// the reference: the two read from the same buffer in turn, and the
// resync (file_resync*.go) checks each record first either way.
// FuzzFastReader holds the two to the same packets; Options.ReferenceRead
// turns this off.
//
// On the 300 MB bulk benchmark capture this reads with a fifth less CPU as
// pcapng, a quarter less as pcap (BenchmarkFileRead).
type fastReader struct {
	// conv is the time conversion of pcapgo's interfaces, read from it
	// when first needed and forgotten whenever pcapgo reads a block
	// itself (it may be an Interface Description or a Section Header).
	conv []ngConv
	// packets counts the packets read here (for the tests).
	packets int
}

// ngConv is what pcapgo's convertTime and ancillary data use of an
// interface.
type ngConv struct {
	known                               bool
	secondMask, scaleUp, scaleDown, off uint64
	link                                []any // CaptureInfo.AncillaryData: the link type
}

// forget drops what was read of pcapgo's interfaces.
func (f *fastReader) forget() { f.conv = f.conv[:0] }

// next reads the next record into r.data and r.ci if it is a plain one,
// and reports whether it did; if not, nothing was read.
func (f *fastReader) next(r *fileReader) bool {
	if r.pcap != nil {
		return f.nextPcap(r)
	}
	return f.nextNg(r)
}

// nextPcap reads a pcap record as pcapgo's Reader does.
func (f *fastReader) nextPcap(r *fileReader) bool {
	rs := r.rs
	h, _ := rs.br.Peek(pcapRecHdr)
	if len(h) < pcapRecHdr {
		return false
	}
	capLen, wire := rs.u32(h[8:]), rs.u32(h[12:])
	if capLen > rs.maxCap || capLen > wire {
		return false // pcapgo's errors
	}
	n := pcapRecHdr + int(capLen)
	b, _ := rs.br.Peek(n)
	if len(b) < n {
		return false // cut short, or larger than the buffer
	}
	factor := uint32(1000) // pcapgo multiplies in 32 bits
	if rs.nano {
		factor = 1
	}
	r.ci = gopacket.CaptureInfo{Timestamp: time.Unix(int64(rs.u32(h)), int64(rs.u32(h[4:])*factor)).UTC(),
		CaptureLength: int(capLen), Length: int(wire)}
	r.data = b[pcapRecHdr:n]
	rs.br.Discard(n) // the bytes stay in the buffer until the next read
	f.packets++
	return true
}

// nextNg reads a pcapng Enhanced Packet Block as pcapgo's NgReader does.
func (f *fastReader) nextNg(r *fileReader) bool {
	rs := r.rs
	h, _ := rs.br.Peek(32)
	if len(h) < 32 || rs.u32(h) != ngEPB {
		return false
	}
	n, iface, capLen := int(rs.u32(h[4:])), int(rs.u32(h[8:])), int(rs.u32(h[20:]))
	if n != 32+capLen+(4-capLen&3)&3 || iface >= r.ng.NInterfaces() {
		return false // options, or an unknown interface: pcapgo's errors
	}
	b, _ := rs.br.Peek(n)
	if len(b) < n {
		return false // cut short: pcapgo says how
	}
	c := f.iface(r.ng, iface)
	if !c.known {
		return false
	}
	ts := uint64(rs.u32(h[12:]))<<32 | uint64(rs.u32(h[16:]))
	r.ci = gopacket.CaptureInfo{
		Timestamp:     time.Unix(int64(ts/c.secondMask+c.off), int64(ts%c.secondMask*c.scaleUp/c.scaleDown)).UTC(),
		CaptureLength: capLen, Length: int(rs.u32(h[24:])), InterfaceIndex: iface, AncillaryData: c.link,
	}
	r.data = b[28 : 28+capLen]
	rs.br.Discard(n) // the bytes stay in the buffer until the next read
	f.packets++
	return true
}

// iface returns the conversion of pcapgo's interface i.
func (f *fastReader) iface(ng *pcapgo.NgReader, i int) *ngConv {
	for len(f.conv) <= i {
		f.conv = append(f.conv, ngConv{})
	}
	c := &f.conv[i]
	if c.known {
		return c
	}
	in, err := ng.Interface(i)
	if err != nil {
		return c
	}
	// As pcapgo's readInterfaceDescriptor computes them.
	res := in.TimestampResolution
	if res == 0 {
		res = 6
	}
	if res.Exponent() > 63 {
		return c // pcapgo refused the interface; never here
	}
	mask := uint64(1)
	if res.Binary() {
		mask = 1 << res.Exponent()
	} else {
		for range res.Exponent() {
			mask *= 10
		}
	}
	*c = ngConv{known: true, secondMask: mask, scaleUp: 1, scaleDown: 1, off: in.TimestampOffset, link: []any{in.LinkType}}
	if mask < 1e9 {
		c.scaleUp = 1e9 / mask
	} else {
		c.scaleDown = mask / 1e9
	}
	return c
}
