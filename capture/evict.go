package capture

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// Eviction of connections that carried no payload (issue #9). A SYN flood
// or a port scan opens connections that never send a byte; left alone they
// would hold the connection table (Options.MaxConns) until IdleTimeout,
// and real connections arriving meanwhile would not be tracked. So when
// the table is full, a new connection takes the place of the oldest open
// one that has carried no payload; only when there is none is the new one
// refused (ConnsOverCap). Evicting such a connection loses no byte: if it
// sends one later, its packets start a new connection, mid-stream.
//
// A real client sends its first request within a round trip of the
// handshake, so it is only evicted if MaxConns newer connections without
// payload arrive in between.

// quietList holds the open connections that have carried no payload yet,
// oldest first, linked through the streams: push, remove and finding the
// oldest are O(1), with no walk of the table.
type quietList struct{ head, tail *stream }

// push appends s, a connection just created.
func (l *quietList) push(s *stream) {
	s.quiet, s.prevQ, s.nextQ = true, l.tail, nil
	if l.tail != nil {
		l.tail.nextQ = s
	} else {
		l.head = s
	}
	l.tail = s
}

// remove takes s off the list, if it is on it.
func (l *quietList) remove(s *stream) {
	if !s.quiet {
		return
	}
	if s.prevQ != nil {
		s.prevQ.nextQ = s.nextQ
	} else {
		l.head = s.nextQ
	}
	if s.nextQ != nil {
		s.nextQ.prevQ = s.prevQ
	} else {
		l.tail = s.prevQ
	}
	s.quiet, s.prevQ, s.nextQ = false, nil, nil
}

// evictQuiet closes the oldest open connection without payload (a Close
// with CloseEvict for each direction), freeing its place in the table. It
// reports false when there is none.
func (a *Assembler) evictQuiet() bool {
	s := a.quiet.head
	if s == nil {
		return false
	}
	s.evicted = true
	for _, hi := range s.serverFirst() {
		s.close(hi, CloseEvict) // the second one takes s off the list
	}
	a.st.ConnsEvictedNoData++
	a.reap = append(a.reap, s)
	return true
}

// reapEvicted takes the connections evicted by the last packet out of the
// reassembly package's pool, which has no call for that: a RST made up
// for each direction ends it (Accept puts it at the sequence number the
// pool expects), and ReassemblyComplete then lets the pool drop it. Were
// they left in the pool until IdleTimeout, it would grow with every
// connection of a flood. (A connection from an endpoint to itself has one
// key for both directions: the idle flush drops it.) Called between
// packets, never from inside reassembly.
func (a *Assembler) reapEvicted() {
	a.reaping = true
	for i, s := range a.reap {
		a.reapFast(s)
		for hi := 0; hi < 2 && !s.reaped; hi++ {
			a.reset(s, hi)
		}
		a.reap[i] = nil
	}
	a.reap = a.reap[:0]
	a.reaping = false
}

// reset feeds reassembly a RST from the source of half hi of s to its peer.
func (a *Assembler) reset(s *stream, hi int) {
	src, dst := s.ep[hi], s.ep[1-hi]
	h := &a.rstHdr
	binary.BigEndian.PutUint16(h[0:], src.Port())
	binary.BigEndian.PutUint16(h[2:], dst.Port())
	h[12], h[13] = 5<<4, 0x04 // 20-byte header, RST; seq and ack 0
	if a.rstTCP.DecodeFromBytes(h[:], nf) != nil {
		return
	}
	// The pool's key is the network flow of the first packet as decoded:
	// 4-byte addresses for IPv4, 16 for IPv6 (IPv4-mapped ones included).
	var netFlow gopacket.Flow
	if s.v6 {
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		netFlow = gopacket.NewFlow(layers.EndpointIPv6, s16[:], d16[:])
	} else {
		s4, d4 := src.Addr().As4(), dst.Addr().As4()
		netFlow = gopacket.NewFlow(layers.EndpointIPv4, s4[:], d4[:])
	}
	a.rstCtx.ci = gopacket.CaptureInfo{Timestamp: a.now}
	a.asm.AssembleWithContext(netFlow, &a.rstTCP, &a.rstCtx)
}

// acceptReap lets reassembly take a RST made up by reset: at the next
// sequence number of the direction (nextSeq), or as its start if it saw
// none, so that it ends the direction instead of being dropped as out of
// window.
func (s *stream) acceptReap(tcp *layers.TCP, nextSeq reassembly.Sequence, start *bool) bool {
	*start = true
	if nextSeq >= 0 {
		tcp.Seq = uint32(nextSeq)
	}
	return true
}
