package captest

import (
	"fmt"
	"math/rand/v2"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

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
	f, err := readCapture(src, "drop")
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d := &Dropped{Packets: len(f.recs)}
	var kept []record
	for _, r := range f.recs {
		if hasTCPPayload(r.link, r.data) {
			d.Candidates++
			if rng.Float64() < frac {
				d.Dropped++
				continue
			}
		}
		kept = append(kept, r)
	}
	if d.Data, err = f.write(kept, src); err != nil {
		return nil, fmt.Errorf("drop: %w", err)
	}
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

// DropResets returns src without its TCP packets that carry RST, and how
// many it left out: the same capture as if the resets had not been seen.
func DropResets(src []byte) ([]byte, int, error) {
	f, err := readCapture(src, "drop resets")
	if err != nil {
		return nil, 0, err
	}
	var kept []record
	for _, r := range f.recs {
		if s, ok := parseSegment(r); ok && s.flags&flagRST != 0 {
			continue
		}
		kept = append(kept, r)
	}
	out, err := f.write(kept, src)
	if err != nil {
		return nil, 0, fmt.Errorf("drop resets: %w", err)
	}
	return out, len(f.recs) - len(kept), nil
}
