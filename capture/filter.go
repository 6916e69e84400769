package capture

import (
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/net/bpf"
)

// The kernel filter of a live capture is a classic BPF program built here
// from the broker ports (what tcpdump compiles from
// "tcp and (port 9092 or portrange 19092-19094)"), so that only Kafka
// traffic is copied to user space. Live sockets are SOCK_DGRAM: the program
// sees each packet from its network header on every interface, with VLAN
// tags already taken off by the kernel.

// maxFilterRanges bounds the port ranges compiled into the kernel filter:
// classic BPF jumps reach at most 255 instructions ahead. More ranges are
// filtered in user space behind a TCP-only kernel filter.
const maxFilterRanges = 48

// Linux constants the program compares with (ARPHRD_LOOPBACK from
// if_arp.h, PACKET_OUTGOING from if_packet.h).
const (
	arphrdLoopback = 772
	packetOutgoing = 4
)

// prog is a classic BPF program under construction, with symbolic jump
// targets resolved by assemble.
type prog struct {
	ins    []bpf.Instruction
	jt, jf []string // targets of conditional jumps ("" = next instruction)
	labels map[string]int
}

func (p *prog) emit(i bpf.Instruction) { p.jump(i, "", "") }

// jump appends i; for a bpf.JumpIf, jt and jf name the instructions it
// goes to when the condition holds or not ("" = the next one).
func (p *prog) jump(i bpf.Instruction, jt, jf string) {
	p.ins, p.jt, p.jf = append(p.ins, i), append(p.jt, jt), append(p.jf, jf)
}

func (p *prog) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.ins)
}

// resolve fills in the skips of the conditional jumps.
func (p *prog) resolve() ([]bpf.Instruction, error) {
	skip := func(i int, target string) (uint8, error) {
		if target == "" {
			return 0, nil
		}
		to, ok := p.labels[target]
		if !ok {
			return 0, fmt.Errorf("filter: no label %q", target)
		}
		d := to - i - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("filter: jump of %d instructions to %s", d, target)
		}
		return uint8(d), nil
	}
	out := make([]bpf.Instruction, len(p.ins))
	for i, in := range p.ins {
		j, ok := in.(bpf.JumpIf)
		if !ok {
			out[i] = in
			continue
		}
		var err error
		if j.SkipTrue, err = skip(i, p.jt[i]); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = skip(i, p.jf[i]); err != nil {
			return nil, err
		}
		out[i] = j
	}
	return out, nil
}

// filterProgram returns the program accepting TCP over IPv4 and IPv6 (no
// IPv6 extension headers, no non-first IPv4 fragments) with a source or
// destination port in ports (any port when ports is empty).
//
// For the kernel (kernel true) it starts by dropping the incoming copy of
// every packet on a loopback device: an AF_PACKET socket sees each packet
// there twice, once as PACKET_OUTGOING and once as received; the outgoing
// copy is kept. It tells IPv4 from IPv6 by the packet's protocol. These
// need BPF extensions, which the user-space VM of golang.org/x/net/bpf
// lacks: without kernel, the version nibble is used and no copy dropped.
func filterProgram(ports *Ports, kernel bool) ([]bpf.Instruction, error) {
	rs := ports.ranges()
	if len(rs) > maxFilterRanges {
		return nil, fmt.Errorf("filter: %d port ranges (at most %d in the kernel)", len(rs), maxFilterRanges)
	}
	p := &prog{}
	if kernel {
		p.emit(bpf.LoadExtension{Num: bpf.ExtLinkLayerType})
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: arphrdLoopback}, "", "ip")
		p.emit(bpf.LoadExtension{Num: bpf.ExtType})
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: packetOutgoing}, "", "drop0")
		p.label("ip")
		p.emit(bpf.LoadExtension{Num: bpf.ExtProto})
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x0800}, "v4", "")
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x86dd}, "v6", "drop0")
	} else {
		p.emit(bpf.LoadAbsolute{Off: 0, Size: 1})
		p.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0})
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x40}, "v4", "")
		p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0x60}, "v6", "drop0")
	}
	// Each block has its own returns: jumps reach 255 instructions ahead.
	p.label("drop0")
	p.emit(bpf.RetConstant{Val: 0})

	// IPv4: protocol TCP, fragment offset 0, ports behind the IHL.
	p.label("v4")
	p.emit(bpf.LoadAbsolute{Off: 9, Size: 1})
	p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 6}, "", "drop4")
	p.emit(bpf.LoadAbsolute{Off: 6, Size: 2})
	p.jump(bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff}, "drop4", "")
	p.emit(bpf.LoadMemShift{Off: 0})
	p.emit(bpf.LoadIndirect{Off: 0, Size: 2})
	matchPorts(p, rs, "accept4", "")
	p.emit(bpf.LoadIndirect{Off: 2, Size: 2})
	matchPorts(p, rs, "accept4", "drop4")
	p.label("accept4")
	p.emit(bpf.RetConstant{Val: 0xffffffff})
	p.label("drop4")
	p.emit(bpf.RetConstant{Val: 0})

	// IPv6: next header TCP right after the fixed 40-byte header.
	p.label("v6")
	p.emit(bpf.LoadAbsolute{Off: 6, Size: 1})
	p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: 6}, "", "drop")
	p.emit(bpf.LoadAbsolute{Off: 40, Size: 2})
	matchPorts(p, rs, "accept", "")
	p.emit(bpf.LoadAbsolute{Off: 42, Size: 2})
	matchPorts(p, rs, "accept", "drop")
	p.label("accept")
	p.emit(bpf.RetConstant{Val: 0xffffffff})
	p.label("drop")
	p.emit(bpf.RetConstant{Val: 0})
	return p.resolve()
}

// matchPorts compares the port in A with each range: a match jumps to
// yes; no match falls through to the next instruction, or jumps to no
// when no is set. With no ranges every port matches the last test (the
// one with no set), so both ports must be in the packet.
func matchPorts(p *prog, rs [][2]uint16, yes, no string) {
	if len(rs) == 0 {
		if no != "" {
			p.jump(bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: 0}, yes, yes)
		}
		return
	}
	for i, r := range rs {
		miss := ""
		if i == len(rs)-1 {
			miss = no
		}
		if r[0] == r[1] {
			p.jump(bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(r[0])}, yes, miss)
			continue
		}
		// lo <= A <= hi: A < lo skips the second test.
		next := fmt.Sprintf("r%d_%d", len(p.ins), i)
		if miss != "" {
			next = miss
		}
		p.jump(bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(r[0])}, "", next)
		p.jump(bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: uint32(r[1])}, miss, yes)
		if miss == "" {
			p.label(next)
		}
	}
}

// ranges returns the set as ascending runs of consecutive ports.
func (p *Ports) ranges() [][2]uint16 {
	var out [][2]uint16
	for port := 0; port < 65536; {
		if p.bits[port>>6] == 0 {
			port = (port | 63) + 1
			continue
		}
		if !p.Contains(uint16(port)) {
			port++
			continue
		}
		lo := port
		for port < 65536 && p.Contains(uint16(port)) {
			port++
		}
		out = append(out, [2]uint16{uint16(lo), uint16(port - 1)})
	}
	return out
}

// filterText describes the kernel filter like a tcpdump expression.
func filterText(ports *Ports) string {
	rs := ports.ranges()
	if len(rs) == 0 {
		return "tcp"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		if r[0] == r[1] {
			parts[i] = fmt.Sprintf("port %d", r[0])
		} else {
			parts[i] = fmt.Sprintf("portrange %d-%d", r[0], r[1])
		}
	}
	if len(parts) == 1 {
		return "tcp " + parts[0]
	}
	return "tcp and (" + strings.Join(parts, " or ") + ")"
}

// wantRaw is the port filter in user space, for a packet that starts at
// its IP header: whether it is TCP with a source or destination port in
// ports (any port when ports is empty). It is applied to packets queued
// before the kernel filter was attached, and to every packet when no
// kernel port filter could be.
func wantRaw(b []byte, ports *Ports, anyPort bool) bool {
	var tcp []byte
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		if b[9] != 6 || binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
			return false
		}
		tcp = b[min(int(b[0]&0xf)*4, len(b)):]
	case len(b) >= 40 && b[0]>>4 == 6:
		if b[6] != 6 {
			return false
		}
		tcp = b[40:]
	default:
		return false
	}
	if len(tcp) < 4 {
		return false
	}
	return anyPort || ports.Contains(binary.BigEndian.Uint16(tcp)) || ports.Contains(binary.BigEndian.Uint16(tcp[2:]))
}
