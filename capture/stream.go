package capture

import (
	"net/netip"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
)

// maxHoles bounds the snaplen holes remembered per direction; a cut packet
// beyond it is dropped whole, which reassembly then reports as a gap.
const maxHoles = 4096

// factory creates a stream per connection for the reassembly package.
type factory struct{ a *Assembler }

// New is called on the first packet of a connection (the one being
// assembled), so the decoder still holds its addresses.
func (f *factory) New(netFlow, tcpFlow gopacket.Flow, tcp *layers.TCP, ac reassembly.AssemblerContext) reassembly.Stream {
	a := f.a
	if s := a.adopt; s != nil { // a connection the fast path hands over (tcp_fast.go)
		a.adopt = nil
		return s
	}
	s := a.newStream(netFlow, tcpFlow, tcp, ac)
	if a.route != nil {
		a.routed, a.routedTo = true, s
	}
	if s == nil {
		return nil
	}
	return s
}

// newStream creates the stream of a new connection, or returns nil when
// the packet is not to start one.
func (a *Assembler) newStream(netFlow, tcpFlow gopacket.Flow, tcp *layers.TCP, ac reassembly.AssemblerContext) *stream {
	if a.reaping {
		return nil // a RST made up for a connection already gone
	}
	if a.portFix(tcp) {
		a.redo = true
		return nil // assembled again, in its own connection
	}
	if a.st.ConnsOpen >= uint64(a.opts.MaxConns) && !a.evictQuiet() {
		a.st.PacketsOverCap++
		k := [2]gopacket.Flow{netFlow, tcpFlow}
		_, seen := a.overCap[k]
		_, seenRev := a.overCap[[2]gopacket.Flow{netFlow.Reverse(), tcpFlow.Reverse()}]
		if !seen && !seenRev && len(a.overCap) < a.opts.MaxConns {
			a.overCap[k] = struct{}{}
			a.st.ConnsOverCap++
		}
		return nil // untracked: the reassembly package drops the packet
	}
	src := netip.AddrPortFrom(addrOf(a.dec.src), uint16(tcp.SrcPort))
	dst := netip.AddrPortFrom(addrOf(a.dec.dst), uint16(tcp.DstPort))
	a.nextID++
	a.st.ConnsSeen++
	a.st.ConnsOpen++
	// A connection first seen by its SYN is seen from its first byte.
	c := &Conn{ID: a.nextID, Start: ac.GetCaptureInfo().Timestamp, Handshake: tcp.SYN && !tcp.ACK}
	c.Client, c.Server, c.Role = roles(&a.opts.Ports, src, dst, tcp)
	s := &stream{a: a, conn: c, ep: [2]netip.AddrPort{src, dst}, last: c.Start, v6: a.dec.v6}
	a.quiet.push(s) // until Accept sees a payload
	if a.repair {
		a.open[connKey(s.ep)] = true
	}
	return s
}

func addrOf(b []byte) netip.Addr {
	if len(b) == 4 {
		return netip.AddrFrom4([4]byte(b))
	}
	return netip.AddrFrom16([16]byte(b)).Unmap()
}

// roles decides which endpoint is the broker from the first packet of a
// connection, sent by src to dst.
func roles(ports *Ports, src, dst netip.AddrPort, tcp *layers.TCP) (client, server netip.AddrPort, role Role) {
	synAck := isSynAck(tcp)
	syn := tcp.SYN && !synAck // SYN: src is the client
	lower := func() (netip.AddrPort, netip.AddrPort) {
		// The lower port is the server; on a tie, the destination.
		if src.Port() < dst.Port() {
			return dst, src
		}
		return src, dst
	}
	sp, dp := ports.Contains(src.Port()), ports.Contains(dst.Port())
	switch {
	case sp && !dp:
		return dst, src, RolePort
	case dp && !sp:
		return src, dst, RolePort
	case syn:
		client, server = src, dst
	case synAck:
		client, server = dst, src
	default:
		client, server = lower()
		if sp && dp {
			return client, server, RolePort
		}
		return client, server, RoleGuess
	}
	if sp && dp {
		return client, server, RolePort
	}
	return client, server, RoleSYN
}

// isSynAck reports whether tcp is a SYN-ACK. A SYN-ACK acknowledges the
// SYN's sequence number, never 0 but for one ISN in 2^32: a SYN with the
// ACK flag and a zero acknowledgement field (as stacks send a SYN) had its
// flags hit by a flipped byte of a damaged file, and is a SYN.
func isSynAck(tcp *layers.TCP) bool {
	return tcp.SYN && tcp.ACK && tcp.Ack != 0
}

// hole is a range of sequence space filled with zeros because the capture
// cut the packet there (see Assembler.padCut).
type hole struct {
	seq reassembly.Sequence
	n   int
}

// halfState is one direction of a stream. Index 0 is the direction of the
// connection's first packet (reassembly's TCPDirClientToServer), 1 the
// other; which of them is ToServer is decided per chunk from Conn.Client.
type halfState struct {
	pos     reassembly.Sequence // sequence number of the next byte to deliver
	started bool                // pos is known
	synNext reassembly.Sequence // when it began with a SYN (not a SYN-ACK): the sequence number after it, else 0
	synAcks reassembly.Sequence // when it began with a SYN-ACK: what it acknowledged (the other's start), else 0
	closed  bool                // its Close was produced
	fin     bool                // a FIN was seen at finSeq (maybe ahead of pos)
	finSeq  reassembly.Sequence
	// resetDue: the other side reset (resetOther); this direction ends
	// then, its last bytes let in until that time.
	resetDue time.Time
	holes    []hole              // sorted by seq, none wholly before pos
	sums     checksums           // what its segments showed of the capture's checksums
	maxEnd   reassembly.Sequence // the end of the furthest data seen
	hdr      int                 // header length of its latest data segment
	// ahead are the segments that came before the bytes preceding them
	// (a lost or reordered segment), sorted by seq, with their capture
	// times: when reassembly delivers them later, at once, each keeps its
	// own time rather than that of the latest packet, unless bytes before
	// it came later still (see emitData).
	ahead []segTime
	// dataT is the time of the latest Data emitted: a direction's chunk
	// times never go back.
	dataT time.Time
	// ack is the acknowledgement of its latest packet (ackOK: it has
	// one), held the chunks waiting for the other direction's bytes it
	// acknowledges, heldBytes their bytes (xdir.go).
	ack       reassembly.Sequence
	ackOK     bool
	otherAt   reassembly.Sequence // begun with a SYN: the first ack it sent, else 0
	held      []waitChunk
	heldBytes int
}

// segTime is a segment buffered ahead of pos and its capture time.
type segTime struct {
	seq reassembly.Sequence
	n   int
	t   time.Time
}

// maxAhead bounds the segment times remembered per direction; past it,
// later segments take the time of the latest packet.
const maxAhead = 4096

// stream is the reassembly.Stream of one connection.
type stream struct {
	a    *Assembler
	conn *Conn
	ep   [2]netip.AddrPort // source endpoint of half 0 and half 1
	last time.Time         // capture time of the latest packet
	half [2]halfState
	v6   bool      // IPv6 addresses: to rebuild the reassembly key (evict.go)
	fc   *fastConn // the fast path's entry, while it has one (tcp_fast.go)

	// quiet: open, and no packet with payload seen; on Assembler.quiet.
	quiet        bool
	prevQ, nextQ *stream
	evicted      bool // closed by evictQuiet, or its 4-tuple reused (reusedBy): to drop from the pool
	reaped       bool // and dropped by the reassembly pool
	delivered    bool // a chunk went to the Sink
	waiting      bool // on Assembler.waiting: a direction holds chunks
	oneWay       bool // the capture has one direction only: hold nothing
}

func halfIndex(dir reassembly.TCPFlowDirection) int {
	if dir == reassembly.TCPDirClientToServer {
		return 0
	}
	return 1
}

// Accept sees every packet of the connection before reassembly does.
func (s *stream) Accept(tcp *layers.TCP, ci gopacket.CaptureInfo, dir reassembly.TCPFlowDirection, nextSeq reassembly.Sequence, start *bool, ac reassembly.AssemblerContext) bool {
	if accept, ok := s.a.accepted(start); ok {
		return accept
	}
	if s.a.reaping {
		return s.acceptReap(tcp, nextSeq, start)
	}
	if s.quiet && len(tcp.Payload) > 0 {
		s.a.quiet.remove(s)
	}
	if ci.Timestamp.After(s.last) {
		s.last = ci.Timestamp
	}
	hi := halfIndex(dir)
	h := &s.half[hi]
	if s.reusedBy(hi, tcp) {
		s.a.reuse = s
		return false
	}
	if h.closed {
		s.resetAfterFIN(hi, tcp)
		return false
	}
	h.noteAck(reassembly.Sequence(tcp.Ack), tcp.ACK && !tcp.RST)
	if s.conn.Ignore {
		s.acceptIgnored(hi, tcp)
		return false
	}
	if x := s.a.hole; x.n > 0 && !s.addHole(h, x) {
		return false // too many holes to track: let this segment be a gap
	}
	if s.a.repair && (s.headerFix(h, tcp, nextSeq) || noACK(tcp, nextSeq)) { // tcp_repair.go
		s.a.st.RepairedPackets++
	}
	seq, n := reassembly.Sequence(tcp.Seq), len(tcp.Payload)
	// A packet that would end the stream, or put data far ahead of where
	// it is, is checked (checksum.go): a damaged one is dropped, losing
	// only its own bytes. (Data a little ahead is ordinary reordering; a
	// wrong checksum there is more likely a damaged payload, which the
	// decoder copes with.) The others teach what the capture's checksums
	// are like.
	if nextSeq < 0 && tcp.SYN && n == 0 && damagedSYN(&s.a.dec) {
		s.a.st.DamagedPackets++
		return false
	}
	if nextSeq >= 0 && (tcp.RST || tcp.FIN || tcp.SYN || n > 0 && h.maxEnd.Difference(seq) > farAhead) {
		if h.sums.damaged(&s.a.dec) {
			s.a.st.DamagedPackets++
			return false
		}
	} else {
		h.sums.learn(&s.a.dec)
	}
	if end := seq.Add(n); n > 0 && (nextSeq < 0 || h.maxEnd.Difference(end) > 0) {
		h.maxEnd = end
	}
	if n > 0 {
		h.hdr = len(tcp.Contents)
	}
	if nextSeq < 0 && s.offStart(tcp, hi) {
		s.a.st.DamagedPackets++
		return false
	}
	if nextSeq < 0 {
		// First packet of this direction. Without a SYN the reassembly
		// package would wait for one forever: start the stream here, so
		// connections open before the capture began are assembled too.
		*start = true
		h.pos, h.started = seq, true
		if !tcp.SYN && s.lostSYN(tcp, hi) {
			tcp.SYN = true
			s.a.st.RepairedPackets++
		}
		if tcp.SYN {
			h.pos = seq.Add(1)
		}
		switch {
		case isSynAck(tcp):
			h.synAcks = reassembly.Sequence(tcp.Ack)
		case tcp.SYN:
			h.synNext = h.pos
			s.synLate(hi)
		}
		h.maxEnd = h.pos
		if o := &s.half[1-hi]; len(o.held) > 0 && !s.a.flushing {
			// What the other direction holds for bytes before this
			// start will not get them (xdir.go).
			s.releaseReady(1-hi, true)
		}
	} else if n > 0 {
		switch d := nextSeq.Difference(seq); {
		case d < 0:
			s.a.st.Retransmitted++
		case d > 0:
			s.a.st.OutOfOrder++
			h.noteAhead(segTime{seq, n, ci.Timestamp})
		}
	}
	if tcp.FIN {
		h.fin, h.finSeq = true, seq.Add(n)
	}
	return true
}

// lostSYN reports whether tcp, the first packet of direction hi, is the
// SYN-ACK answering the other direction's SYN with its SYN flag lost to a
// flipped byte of a damaged file: no payload, ACK, no FIN or RST, and it
// acknowledges exactly the SYN. (A client's handshake ACK acknowledges a
// SYN-ACK, which sets no synNext.) Taken for a plain ACK, it would start its
// direction one byte early, before a byte that never comes.
func (s *stream) lostSYN(tcp *layers.TCP, hi int) bool {
	other := &s.half[1-hi]
	return len(tcp.Payload) == 0 && tcp.ACK && !tcp.FIN && !tcp.RST &&
		other.synNext != 0 && reassembly.Sequence(tcp.Ack) == other.synNext
}

// synLate marks the connection as seen from its first byte when the SYN
// that starts direction hi came after the SYN-ACK that answers it: where
// each direction has a path of its own (a SPAN port, a tap with one feed
// per direction, a cloud traffic mirror), the answer can be captured
// first. Both directions then start at their first byte, as when the SYN
// comes first, provided nothing was delivered yet.
func (s *stream) synLate(hi int) {
	if !s.conn.Handshake && !s.delivered && s.half[1-hi].synAcks != 0 && s.half[1-hi].synAcks == s.half[hi].synNext {
		s.conn.Handshake = true
	}
}

// offStart reports whether tcp, the first packet of direction hi, would
// start its stream somewhere else than the other direction's SYN-ACK
// acknowledged, without a byte to show for it: a segment without payload
// (the client's handshake ACK, its SYN lost) whose sequence number was hit
// by a flipped byte of a damaged file. Started there, the direction would
// take every byte after it for an old retransmission. It is dropped, and
// the direction starts at its next segment.
func (s *stream) offStart(tcp *layers.TCP, hi int) bool {
	at := s.half[1-hi].synAcks
	return at != 0 && len(tcp.Payload) == 0 && !tcp.SYN && !tcp.FIN && !tcp.RST && reassembly.Sequence(tcp.Seq) != at
}

// noteAhead remembers the time of a segment buffered ahead of pos.
func (h *halfState) noteAhead(x segTime) {
	if len(h.ahead) >= maxAhead {
		return
	}
	h.ahead = insertBySeq(h.ahead, x, func(x segTime) reassembly.Sequence { return x.seq })
}

// insertBySeq inserts x into s, sorted by seq, after those it ties with.
func insertBySeq[T any](s []T, x T, seq func(T) reassembly.Sequence) []T {
	i := len(s)
	for i > 0 && seq(x).Difference(seq(s[i-1])) > 0 {
		i--
	}
	s = append(s, x)
	copy(s[i+1:], s[i:])
	s[i] = x
	return s
}

// resetAfterFIN ends the other direction at a RST sent after its sender's
// FIN: a client that closed (a TLS close_notify, then FIN) answers the
// broker's last bytes with a bare RST, and the broker, reset, never sends
// a FIN of its own. Without this, the broker's direction would stay open
// to the end of the capture, and the requests it never answered with it.
// The RST must be where a RST after that FIN is (its sequence the FIN's,
// or one past it) and pass the checksum check a FIN or RST passes. The
// other direction ends resetGrace after it, not at once: the RST answers
// bytes of it that a tap with one feed per direction may deliver after
// the RST (a Fetch response the closed client never read).
func (s *stream) resetAfterFIN(hi int, tcp *layers.TCP) {
	h, o := &s.half[hi], &s.half[1-hi]
	if !tcp.RST || !h.fin || o.closed || !o.started {
		return
	}
	if d := h.finSeq.Difference(reassembly.Sequence(tcp.Seq)); d < 0 || d > 1 {
		return
	}
	if h.sums.damaged(&s.a.dec) {
		s.a.st.DamagedPackets++
		return
	}
	s.resetOther(hi)
}

// resetOther ends the direction other than hi, whose sender reset the
// connection: resetGrace later, so that the bytes it sent before the RST
// reached it, which a tap with one feed per direction may deliver after
// the RST, are still read. The RST's own direction, if still open, ends
// with it (the decoder ends a connection at its first RST).
func (s *stream) resetOther(hi int) {
	if o := &s.half[1-hi]; !o.closed && o.resetDue.IsZero() {
		o.resetDue = s.last.Add(min(resetGrace, s.a.opts.ReorderTimeout))
		s.a.resets = append(s.a.resets, s)
	}
}

// resetGrace is how long after a RST that followed its sender's FIN the
// other direction's bytes are still let in: the skew of one tap feed
// behind the other.
const resetGrace = 200 * time.Millisecond

// releaseResets ends the directions whose resetDue has passed (all of them
// with all), in order of connection ID.
func (a *Assembler) releaseResets(all bool) {
	if len(a.resets) == 0 {
		return
	}
	slices.SortFunc(a.resets, func(x, y *stream) int { return cmpUint64(x.conn.ID, y.conn.ID) })
	keep := a.resets[:0]
	for _, s := range a.resets {
		due := false
		for hi := range 2 {
			h := &s.half[hi]
			if h.resetDue.IsZero() || h.closed {
				continue
			}
			if all || !a.now.Before(h.resetDue) {
				s.endReset(hi)
				continue
			}
			due = true
		}
		if due {
			keep = append(keep, s)
		}
	}
	clear(a.resets[len(keep):])
	a.resets = keep
}

// endReset ends direction hi, whose peer reset the connection, with what
// the other direction held for its bytes.
func (s *stream) endReset(hi int) {
	if o := &s.half[1-hi]; len(o.held) > 0 {
		s.releaseAll(1 - hi)
	}
	s.close(hi, CloseRST)
}

// reusedBy reports whether tcp, a packet of direction hi, is the SYN (or
// SYN-ACK) of a new connection on the 4-tuple of s, which has ended: both
// directions closed, or ending after a RST (resetDue). No TIME_WAIT follows
// a RST, so the client's kernel may give its next connect() the same port
// at once (and one that closed first may reuse the 4-tuple out of
// TIME_WAIT); gopacket's pool starts a new connection on a SYN only once
// each direction sent its own FIN or RST, and the peer of a RST sends
// neither. Where the directions were captured apart, the new connection's
// SYN-ACK may come first. The connection's own SYN or SYN-ACK again (a
// copy, or late behind the peer's answer: the sequence numbers they
// acknowledge), or a damaged segment, is no new connection. The new one
// replaces s (Assembler.reuse), which ends now if a direction was waiting
// for its resetDue.
func (s *stream) reusedBy(hi int, tcp *layers.TCP) bool {
	if !tcp.SYN || tcp.RST || tcp.FIN {
		return false
	}
	for i := range s.half {
		if h := &s.half[i]; !h.closed && h.resetDue.IsZero() {
			return false
		}
	}
	h, o := &s.half[hi], &s.half[1-hi]
	if isSynAck(tcp) {
		if ack := reassembly.Sequence(tcp.Ack); h.synAcks != 0 && ack == h.synAcks || o.synNext != 0 && ack == o.synNext {
			return false // it answers the connection's own SYN
		}
	} else if tcp.ACK {
		return false
	} else if next := reassembly.Sequence(tcp.Seq).Add(1); h.synNext != 0 && next == h.synNext || o.synAcks != 0 && next == o.synAcks {
		return false // the connection's own SYN, which the peer's SYN-ACK acknowledged
	}
	if h.sums.damaged(&s.a.dec) {
		s.a.st.DamagedPackets++
		return false
	}
	for _, i := range s.serverFirst() {
		if !s.half[i].closed {
			s.endReset(i)
		}
	}
	s.evicted = true // dropped from the pool like an evicted connection
	return true
}

// acceptIgnored handles a packet of a connection the Sink ignores: nothing
// is buffered, only FIN and RST end directions.
func (s *stream) acceptIgnored(hi int, tcp *layers.TCP) {
	switch {
	case tcp.RST:
		s.close(hi, CloseRST)
		s.close(1-hi, CloseRST)
	case tcp.FIN:
		s.close(hi, CloseFIN)
	}
}

// addHole records a snaplen hole unless it lies before pos (the segment is
// then a retransmission reassembly drops). It fails when too many are held.
func (s *stream) addHole(h *halfState, x hole) bool {
	if h.started && h.pos.Difference(x.seq.Add(x.n)) <= 0 {
		return true
	}
	if len(h.holes) >= maxHoles {
		return false
	}
	h.holes = insertBySeq(h.holes, x, func(x hole) reassembly.Sequence { return x.seq })
	return true
}

// ReassembledSG receives the next bytes of one direction, in order.
func (s *stream) ReassembledSG(sg reassembly.ScatterGather, ac reassembly.AssemblerContext) {
	dir, _, end, skip := sg.Info()
	hi := halfIndex(dir)
	if s.half[hi].closed {
		return
	}
	avail, _ := sg.Lengths()
	var data []byte
	if avail > 0 {
		data = sg.Fetch(avail)
	}
	s.reassembled(hi, data, skip, end)
}

// reassembled delivers data, the next bytes of direction hi after skip
// missing ones (negative: data starts that many bytes before pos), and
// ends the direction with end.
func (s *stream) reassembled(hi int, data []byte, skip int, end bool) {
	if s.half[hi].closed {
		return
	}
	switch {
	case skip > 0:
		s.gap(hi, skip)
		if !s.a.flushing {
			// Reassembly skips while a packet is assembled only when a
			// buffer limit made it give up on the missing bytes.
			s.a.st.BufferLimitGaps++
		}
	case skip < 0:
		// Bytes before the next expected one: already delivered.
		data = data[min(-skip, len(data)):]
	}
	s.data(hi, data)
	if o := &s.half[1-hi]; len(o.held) > 0 && !s.a.flushing {
		s.releaseReady(1-hi, skip <= 0) // what waited for these bytes (xdir.go)
	}
	if end {
		if s.a.rst && !s.a.flushing {
			// The peer drops everything after a reset: both directions
			// end, resetGrace later (resetOther), together.
			s.resetOther(hi)
			switch h, o := &s.half[hi], &s.half[1-hi]; {
			case o.closed || o.resetDue.IsZero():
				s.close(hi, CloseRST)
			case h.resetDue.IsZero():
				h.resetDue = o.resetDue
			}
		} else {
			s.close(hi, CloseFIN)
		}
	}
}

// data delivers bytes at pos, as Gaps where they fall in snaplen holes.
func (s *stream) data(hi int, b []byte) {
	h := &s.half[hi]
	for len(b) > 0 {
		if len(h.holes) == 0 {
			s.emitData(hi, b)
			h.pos = h.pos.Add(len(b))
			return
		}
		x := h.holes[0]
		off := h.pos.Difference(x.seq) // hole start relative to pos
		switch {
		case off+x.n <= 0: // behind us
			h.holes = h.holes[1:]
		case off > 0:
			k := min(off, len(b))
			s.emitData(hi, b[:k])
			h.pos, b = h.pos.Add(k), b[k:]
		default:
			k := min(off+x.n, len(b))
			s.emit(hi, Gap, nil, k, 0)
			h.pos, b = h.pos.Add(k), b[k:]
		}
	}
}

// emitData emits b, the bytes at pos, as Data: bytes that were buffered
// ahead (noteAhead) with their own segments' capture times, the others
// with the latest packet's. A byte is readable only when every byte
// before it has come, so no chunk is dated before the one it follows: a
// segment that arrived ahead of the one it follows (swapped on the way,
// or held behind a retransmission) takes the later time, the moment the
// receiver could read it. After a gap, held bytes keep their own times.
func (s *stream) emitData(hi int, b []byte) {
	h := &s.half[hi]
	pos := h.pos
	for len(b) > 0 && len(h.ahead) > 0 {
		x := h.ahead[0]
		if pos.Difference(x.seq.Add(x.n)) <= 0 {
			h.ahead = h.ahead[1:] // wholly delivered
			continue
		}
		k, t := len(b), s.last
		if start := pos.Difference(x.seq); start > 0 {
			k = min(start, k) // up to the segment
		} else {
			k, t = min(pos.Difference(x.seq.Add(x.n)), k), x.t
		}
		t = later(h.dataT, t)
		h.dataT = t
		s.emitAt(hi, Data, b[:k], t)
		pos, b = pos.Add(k), b[k:]
	}
	if len(h.ahead) == 0 {
		h.ahead = nil
	}
	if len(b) > 0 {
		h.dataT = later(h.dataT, s.last)
		s.emitAt(hi, Data, b, h.dataT)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// gap reports n missing bytes at pos.
func (s *stream) gap(hi, n int) {
	h := &s.half[hi]
	s.emit(hi, Gap, nil, n, 0)
	h.pos = h.pos.Add(n)
}

// close produces the Close of a direction, once.
func (s *stream) close(hi int, reason CloseReason) {
	h := &s.half[hi]
	if h.closed {
		return
	}
	h.closed, h.holes, h.ahead = true, nil, nil
	s.emit(hi, Close, nil, 0, reason)
	if s.half[1-hi].closed {
		s.a.st.ConnsOpen--
		delete(s.a.open, connKey(s.ep))
		s.a.quiet.remove(s)
	}
}

// ReassemblyComplete is called when reassembly has closed both directions:
// after FIN or RST on both, or in a flush (idle timeout, end of input).
func (s *stream) ReassemblyComplete(ac reassembly.AssemblerContext) bool {
	if s.evicted {
		// Both directions were closed when it was evicted: let the pool
		// drop it now (see reapEvicted).
		s.reaped = true
		s.gone()
		return true
	}
	flushed := false
	for _, hi := range s.serverFirst() {
		h := &s.half[hi]
		if h.closed {
			continue
		}
		flushed = true
		if h.fin && h.started {
			// The FIN came, but bytes before it never did.
			if n := h.pos.Difference(h.finSeq); n > 0 {
				s.gap(hi, n)
			}
			s.close(hi, CloseFIN)
			continue
		}
		s.close(hi, s.a.flushReason)
	}
	// A connection closed by its own packets stays in the pool until it has
	// been idle for IdleTimeout, like TIME_WAIT: late copies of its packets
	// (from a second capture file) then hit the closed connection instead
	// of starting a new one.
	if flushed {
		s.gone()
	}
	return flushed
}

// serverFirst returns the half indexes, the ToServer direction first.
func (s *stream) serverFirst() [2]int {
	if s.ep[0] == s.conn.Client && (s.ep[0] != s.ep[1] || !s.conn.swapped) {
		return [2]int{0, 1}
	}
	return [2]int{1, 0}
}

// emit delivers a chunk now, or queues it during a flush.
func (s *stream) emit(hi int, kind Kind, data []byte, n int, reason CloseReason) {
	s.emitChunk(hi, kind, data, n, reason, s.last)
}

// emitAt emits Data (kind) bytes captured at t.
func (s *stream) emitAt(hi int, kind Kind, data []byte, t time.Time) {
	s.emitChunk(hi, kind, data, 0, 0, t)
}

func (s *stream) emitChunk(hi int, kind Kind, data []byte, n int, reason CloseReason, t time.Time) {
	if kind != Close && s.conn.Ignore {
		return
	}
	if s.a.flushing {
		if data != nil {
			data = append([]byte(nil), data...)
		}
		s.a.pending = append(s.a.pending, pendingChunk{s: s, half: hi, kind: kind, data: data, n: n, reason: reason, t: t})
		return
	}
	s.deliver(hi, kind, data, n, reason, t)
}

// send hands one chunk to the Sink. The direction is computed here,
// not when the chunk was made, because the Sink may have swapped the
// connection's sides since.
func (s *stream) send(hi int, kind Kind, data []byte, n int, reason CloseReason, t time.Time) {
	a := s.a
	if kind != Close && s.conn.Ignore {
		return
	}
	dir := ToClient
	switch {
	case s.ep[0] == s.ep[1]:
		// A connection from an endpoint to itself (a TCP self-connect,
		// or forged) has both halves at Client: tell them apart by half,
		// so that each direction gets its own Close, and Swap still
		// swaps them.
		if (hi == 0) != s.conn.swapped {
			dir = ToServer
		}
	case s.ep[hi] == s.conn.Client:
		dir = ToServer
	}
	switch kind {
	case Data:
		a.st.DeliveredBytes += uint64(len(data))
	case Gap:
		a.st.Gaps++
		if n > 0 {
			a.st.GapBytes += uint64(n)
		}
	}
	s.delivered = true
	a.chunk = Chunk{Conn: s.conn, Dir: dir, Kind: kind, Time: t, Data: data, Len: n, Reason: reason}
	a.sink.Chunk(&a.chunk)
}
