package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// fastOps turns fuzz input into TCP segments on three connections, 4
// bytes a segment:
//
//	op[0] bits 0-1 connection, 2 from the server, 3 SYN, 4 FIN, 5 RST,
//	      6 no ACK, 7 IPv6
//	op[1] bits 0-2 where: 0-3 next in order, 4 behind (a retransmission,
//	      op[1]>>3 bytes back), 5 ahead (a loss of op[1]>>3 bytes),
//	      6 anywhere, 7 the same as the last segment of the direction;
//	      bits 3-7 that many bytes
//	op[2] payload bytes (times 8 when op[3] bit 7 is set)
//	op[3] bits 0-4 time step (0: same time; k: 2^k microseconds, so that
//	      reordering and idle timeouts are crossed), bit 5 cut by the
//	      snaplen, bit 6 one byte of the frame flipped (at op[2])
//
// Each direction starts at its own sequence number, one of them near the
// 32-bit wrap.
func fastOps(in []byte) (frames [][]byte, cis []gopacket.CaptureInfo) {
	type dirSeq struct{ next, last uint32 }
	var seqs [3][2][2]dirSeq // connection, v6, direction
	for c := range seqs {
		for v := range seqs[c] {
			for d := range seqs[c][v] {
				isn := uint32(1000*(c+1) + 500000*d)
				if c == 2 && d == 1 {
					isn = 0xffffff00 // wraps
				}
				seqs[c][v][d] = dirSeq{isn, isn}
			}
		}
	}
	at := time.Duration(0)
	for len(in) >= 4 {
		op := in[:4]
		in = in[4:]
		c, toCli, v6 := int(op[0]&3)%3, op[0]&4 != 0, op[0]&0x80 != 0
		flags := ""
		for i, f := range "SFR" {
			if op[0]&(8<<i) != 0 {
				flags += string(f)
			}
		}
		if op[0]&0x40 == 0 {
			flags += "A"
		}
		n := int(op[2])
		if op[3]&0x80 != 0 {
			n *= 8
		}
		ds := &seqs[c][b2i(v6)][b2i(toCli)]
		k := uint32(op[1] >> 3)
		var seq uint32
		switch op[1] & 7 {
		case 4:
			seq = ds.next - k
		case 5:
			seq = ds.next + k
		case 6:
			seq = uint32(op[1])<<24 | uint32(op[2])<<8
		case 7:
			seq = ds.last
		default:
			seq = ds.next
		}
		end := seq + uint32(n)
		if op[0]&8 != 0 || op[0]&16 != 0 {
			end++
		}
		if int32(end-ds.next) > 0 {
			ds.next = end
		}
		ds.last = seq
		if step := op[3] & 31; step > 0 {
			at += time.Microsecond << step
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(seq + uint32(i)) // the same byte at the same place, sent again or not
		}
		s := seg{at: at, c: c, toCli: toCli, seq: seq, flags: flags, data: string(data), v6: v6, id: uint16(len(frames) + 1)}
		b := rawFrame(s)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(at), CaptureLength: len(b), Length: len(b)}
		if op[3]&0x20 != 0 && n > 0 {
			cut := n / 2
			ci.CaptureLength -= n - cut
			b = b[:ci.CaptureLength]
		}
		if op[3]&0x40 != 0 {
			b[int(op[2])%len(b)] ^= 0x5a
		}
		frames, cis = append(frames, b), append(cis, ci)
	}
	return frames, cis
}

// rawFrame builds s as an Ethernet frame, checksums right, the way frame
// does but without gopacket's serialization: the fuzz target builds one
// per segment, and frame would be most of its time.
func rawFrame(s seg) []byte {
	src, dst := s.endpoints()
	b := make([]byte, 0, 74+len(s.data))
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1) // MACs
	tcpLen := 20 + len(s.data)
	var pseudo uint64
	if s.v6 {
		b = append(b, 0x86, 0xdd, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(tcpLen))
		b = append(b, 6, 64)
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		b = append(append(b, s16[:]...), d16[:]...)
		pseudo = sum16(sum16(0, s16[:]), d16[:])
	} else {
		ip := len(b) + 2
		b = append(b, 0x08, 0x00, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(20+tcpLen))
		b = binary.BigEndian.AppendUint16(b, s.id)
		b = append(b, 0x40, 0, 64, 6, 0, 0)
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		b = append(append(b, s4[:]...), d4[:]...)
		binary.BigEndian.PutUint16(b[ip+10:], ^uint16(fold(sum16(0, b[ip:ip+20]))))
		pseudo = sum16(sum16(0, s4[:]), d4[:])
	}
	t := len(b)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint32(b, s.seq)
	var flags byte
	for i, f := range "FSRPA" {
		if strings.ContainsRune(s.flags, f) {
			flags |= 1 << i
		}
	}
	if flags&0x10 != 0 && !s.ack0 {
		b = binary.BigEndian.AppendUint32(b, 1)
	} else {
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	b = append(b, 5<<4, flags, 0xff, 0xff, 0, 0, 0, 0)
	b = append(b, s.data...)
	pseudo += 6 + uint64(tcpLen)
	binary.BigEndian.PutUint16(b[t+16:], ^uint16(fold(sum16(pseudo, b[t:]))))
	for len(b) < 60 { // Ethernet's shortest frame, as gopacket pads it
		b = append(b, 0)
	}
	return b
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// assembleAll feeds frames to an Assembler, the fast path on or off, as a
// capture file's or a live capture's (repair), and returns every chunk
// (each with its connection as it was then) and the stats.
func assembleAll(frames [][]byte, cis []gopacket.CaptureInfo, opts Options, repair, reference bool) ([]Chunk, Stats) {
	opts.ReferenceTCP = reference
	rec := &recorder{}
	a, done := reusedAssembler(&opts, rec)
	defer done()
	if repair {
		a.repair, a.open = true, map[connKey]bool{}
	}
	for i, b := range frames {
		a.Packet(layers.LinkTypeEthernet, slices.Clone(b), cis[i]) // repairs write to it
	}
	a.Close()
	return rec.chunks, a.Stats()
}

// sameChunks reports whether two runs gave the same chunks, and if not
// shows them side by side.
func sameChunks(want, got []Chunk) (string, bool) {
	if slices.EqualFunc(want, got, func(x, y Chunk) bool {
		return *x.Conn == *y.Conn && x.Dir == y.Dir && x.Kind == y.Kind && x.Time.Equal(y.Time) &&
			x.Len == y.Len && x.Reason == y.Reason && bytes.Equal(x.Data, y.Data)
	}) {
		return "", true
	}
	show := func(cs []Chunk) (out []string) {
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s %+v %s %v %d %s len=%d %x", c.Time.Sub(base), *c.Conn, c.Dir, c.Kind, c.Len, c.Reason, len(c.Data), c.Data))
		}
		return out
	}
	return diffLines(show(want), show(got)), false
}

// spare holds gopacket's reassembly of Assemblers that are done, for the
// next: a StreamPool allocates 1024 connections when it first grows, which
// was most of FuzzTCPFast's time.
var spare struct {
	sync.Mutex
	r []*reassemblyOf
}

// reusedAssembler returns a new Assembler with the reassembly of one that
// is done, if there is one, and what gives its own back once it is done
// (Close called): its connections, all closed, dropped from the pool.
func reusedAssembler(opts *Options, sink Sink) (*Assembler, func()) {
	spare.Lock()
	var r *reassemblyOf
	if n := len(spare.r); n > 0 {
		r, spare.r = spare.r[n-1], spare.r[:n-1]
	}
	spare.Unlock()
	a := newAssembler(opts, sink, r)
	return a, func() {
		far := time.Unix(1<<40, 0)
		a.asm.FlushWithOptions(reassembly.FlushOptions{T: far, TC: far})
		spare.Lock()
		spare.r = append(spare.r, &reassemblyOf{a.fac, a.pool, a.asm})
		spare.Unlock()
	}
}

// FuzzTCPFast holds the in-order fast path to gopacket's reassembly: any
// segments (in order or not, lost, sent again, cut, damaged, SYN, FIN and
// RST anywhere, idle gaps, more connections than the table holds) must
// give the same chunks, connection by connection, and the same stats with
// the fast path as with gopacket alone.
func FuzzTCPFast(f *testing.F) {
	for _, s := range tcpFastSeeds() {
		f.Add(uint8(0), s)
		f.Add(uint8(3), s)
	}
	f.Fuzz(func(t *testing.T, mode uint8, in []byte) {
		if len(in) > 4*128 {
			return
		}
		frames, cis := fastOps(in)
		// No dedupe: copies of a segment go to reassembly, as retransmissions.
		opts := Options{IdleTimeout: 40 * time.Millisecond, ReorderTimeout: 10 * time.Millisecond, DedupeWindow: -1}
		if mode&2 != 0 {
			opts.MaxConns = 2 // eviction and drops over the cap
		}
		if mode&4 != 0 {
			opts.MaxBufferedPagesPerConn, opts.MaxBufferedPagesTotal = 2, 3 // gaps at the buffer limits
		}
		repair := mode&1 != 0
		want, wantSt := assembleAll(frames, cis, opts, repair, true)
		got, gotSt := assembleAll(frames, cis, opts, repair, false)
		if diff, ok := sameChunks(want, got); !ok {
			t.Fatalf("fast path differs from gopacket's reassembly (-gopacket +fast):\n%s", diff)
		}
		if wantSt != gotSt {
			t.Fatalf("stats differ:\n gopacket %+v\n fast     %+v", wantSt, gotSt)
		}
	})
}

// tcpFastSeeds are conversations to start from: a handshake, data both
// ways in order, a loss, a retransmission, a FIN; and the same mid-stream.
func tcpFastSeeds() [][]byte {
	op := func(conn, dirFlags, where, n, step byte) []byte { return []byte{conn | dirFlags, where, n, step} }
	const srv, syn, fin, rst, noAck = 4, 8, 16, 32, 64
	hs := slices.Concat(op(0, syn|noAck, 0, 0, 1), op(0, srv|syn, 0, 0, 1), op(0, 0, 0, 0, 1))
	data := slices.Concat(op(0, 0, 0, 40, 1), op(0, srv, 0, 0, 1), op(0, srv, 0, 90, 2), op(0, 0, 0, 0, 1))
	return [][]byte{
		slices.Concat(hs, data, op(0, fin, 0, 0, 3), op(0, srv|fin, 0, 0, 3)),
		slices.Concat(data, op(0, 0, 5|8<<3, 30, 2), op(0, 0, 0, 20, 2), op(0, 0, 4|8<<3, 20, 20)),
		slices.Concat(hs, op(1, syn|noAck, 0, 0, 1), op(1, srv, 0, 10, 1), data, op(1, 0, 0, 7, 1), op(0, rst, 0, 0, 1)),
		slices.Concat(op(2, srv, 0, 200, 1|0x80), op(2, 0, 0, 0, 1), op(2, srv, 0, 200, 1|0x80), op(2, srv, 0, 10, 0x20|1), op(1, 0, 0, 10, 25)),
		slices.Concat(hs, data, op(0, 0, 0, 33, 0x40|1), op(0, srv, 7, 0, 1), op(0, 0, 0, 1, 1)),
		// Reset by the server, then the 4-tuple reused by a new SYN: at
		// once, and after the RST's grace.
		slices.Concat(hs, data, op(0, srv|rst, 0, 0, 1), op(0, syn|noAck, 5|8<<3, 0, 1), op(0, 0, 0, 20, 1), op(0, srv, 0, 10, 1)),
		slices.Concat(hs, data, op(0, srv|rst, 0, 0, 1), op(0, syn|noAck, 5|8<<3, 0, 15), op(0, srv|syn, 0, 0, 1), op(0, 0, 0, 20, 1)),
	}
}

// TestRawFrame holds rawFrame to frame: the same bytes.
func TestRawFrame(t *testing.T) {
	for _, s := range []seg{
		{c: 1, seq: 7, flags: "SA", data: "hello"},
		{c: 2, toCli: true, seq: 0xfffffff0, flags: "PA", data: "odd", id: 9, v6: true},
		{flags: "R", id: 3},
		{flags: "FA", data: "x", ack0: true, id: 4},
	} {
		if got, want := rawFrame(s), frame(t, layers.LinkTypeEthernet, s, 0); !slices.Equal(got, want) {
			t.Errorf("%+v:\n got  %x\n want %x", s, got, want)
		}
	}
}
