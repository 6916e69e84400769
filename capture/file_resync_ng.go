package capture

import (
	"bufio"
	"encoding/binary"
	"io"

	"github.com/gopacket/gopacket/layers"
)

// pcapng block types (pcapng spec, section 11.1) and the byte-order magic.
const (
	ngSHB          = 0x0a0d0d0a
	ngIDB          = 1
	ngPB           = 2 // obsolete Packet Block
	ngSPB          = 3
	ngNRB          = 4
	ngISB          = 5
	ngEPB          = 6
	ngJournal      = 9
	ngDSB          = 0x0a
	ngCustom       = 0xbad
	ngCustomNoCopy = 0x40000bad
	ngBOM          = 0x1a2b3c4d
)

// ngKnown reports whether typ is a block type of the pcapng spec.
func ngKnown(typ uint32) bool {
	switch typ {
	case ngSHB, ngIDB, ngPB, ngSPB, ngNRB, ngISB, ngEPB, ngJournal, ngDSB, ngCustom, ngCustomNoCopy:
		return true
	}
	return false
}

// ngIface is what packets need of an Interface Description Block.
type ngIface struct {
	link   layers.LinkType
	snap   uint32
	mask   uint64 // timestamp units per second, as pcapgo computes it
	offset uint64 // if_tsoffset, seconds
	at     int64  // offset of its block in the file
}

// ngBlock is a pcapng block as checked.
type ngBlock struct {
	typ       uint32
	n         int    // total length
	big       bool   // byte order (of its section)
	trailerOK bool   // the length is repeated at the end
	exact     bool   // packet blocks: the length is the one the frame makes (no options)
	iface     int    // packet blocks: the interface
	missing   bool   // the interface is the one after the last known
	raw       uint64 // timed packet blocks: the timestamp
	wire      int    // timed packet blocks: the original length
	sec       int64  // timed packet blocks of a known interface
	data      []byte // packet blocks: the frame
	intf      ngIface
}

func (b *ngBlock) packet() bool { return b.typ == ngEPB || b.typ == ngPB || b.typ == ngSPB }
func (b *ngBlock) timed() bool  { return b.typ == ngEPB || b.typ == ngPB }

// newNgResync starts checking a pcapng file whose Section Header Block,
// not yet read, is at the start of br.
func newNgResync(br *bufio.Reader, src *spliced) *resync {
	r := &resync{br: br, src: src, ng: true}
	if h, _ := br.Peek(12); len(h) == 12 {
		r.big = binary.BigEndian.Uint32(h[8:]) == ngBOM
		r.pos = int64(r.u32(h[4:]))
	}
	return r
}

// fixSHB sets back a damaged Section Header Block at the start of the file,
// which pcapgo would refuse, failing the whole file: when its length, given
// at its start and its end in one byte order, is that of a block, it is
// replaced by a Section Header of that byte order without options (they
// are not used), counted as damage. The magic number itself may be the
// damage (the caller found the byte-order magic after it). It reports
// whether it replaced the block.
func (r *resync) fixSHB() bool {
	h, _ := r.br.Peek(12)
	if len(h) < 12 {
		return false
	}
	orig := r.big
	for _, big := range [...]bool{orig, !orig} {
		r.big = big
		n := int(r.u32(h[4:]))
		if n < 28 || n%4 != 0 || n > r.br.Size() {
			continue
		}
		b, _ := r.br.Peek(n)
		if len(b) < n || r.u32(b[n-4:]) != uint32(n) {
			continue
		}
		blk := ngBlock{typ: ngSHB, n: n, big: big}
		if binary.LittleEndian.Uint32(b) == ngSHB && r.u32(b[8:]) == ngBOM && r.ngCheck(&blk, b) {
			r.big = orig
			return false // a good one
		}
		shb := make([]byte, 28)
		put := r.order()
		put.PutUint32(shb, ngSHB)
		put.PutUint32(shb[4:], 28)
		put.PutUint32(shb[8:], ngBOM)
		put.PutUint16(shb[12:], 1)
		put.PutUint64(shb[16:], ^uint64(0)) // section length not given
		put.PutUint32(shb[24:], 28)
		r.br.Discard(n)
		r.unread(shb)
		r.pos = int64(n) // as if pcapgo had read the file's block
		r.dmg.at, r.dmg.resyncs = 0, r.dmg.resyncs+1
		return true
	}
	r.big = orig
	return false
}

// beforeNg checks the blocks pcapgo reads next, up to a packet: section
// and interface headers, which pcapgo reads along with the packet after
// them, then the packet block. A block dropped behind checked headers has
// them taken out and put back after it.
func (r *resync) beforeNg() {
	p := 0 // header blocks checked, ahead of the packet
	defer func() {
		if len(r.held) > 0 {
			r.unread(r.held)
			r.held = r.held[:0]
		}
	}()
	for {
		h, _ := r.br.Peek(p + 12)
		if len(h) < p+12 {
			return // the end, or a block cut short: pcapgo tells which
		}
		blk, ok := r.ngHeader(h[p:])
		if ok {
			b, err := r.br.Peek(p + blk.n)
			switch {
			case len(b) >= p+blk.n:
				ok = r.ngCheck(&blk, b[p:p+blk.n])
				if !ok && r.repairEPB(&blk, b[p:p+blk.n]) {
					ok = r.ngCheck(&blk, b[p:p+blk.n])
				}
			case err == bufio.ErrBufferFull && p > 0: // does not fit behind the headers
				p = r.hold(p)
				continue
			default: // past the end: cut short, unless a block follows
				if _, found := r.scan(r.ngCandidate, b[p:], 1, true); !found {
					return
				}
				ok = false
			}
		}
		if ok && !blk.trailerOK { // only the repeated length was hit?
			_, next := r.ngNext(p + blk.n)
			ok = blk.exact && next
		}
		if ok && blk.missing {
			if idb := r.synthIDB(&blk); idb != nil {
				p = r.hold(p)
				r.held = append(r.held, idb...)
				continue
			}
			ok = false
		}
		if ok && blk.timed() {
			ok = r.ngClock(p, &blk)
		}
		switch {
		case ok && blk.typ == ngIDB && r.wrongResolution(p, &blk):
			// Replaced by one with the resolution its packets need.
			p = r.hold(p)
			r.discard(blk.n)
			if r.dmg.resyncs == 0 {
				r.dmg.at = r.pos
			}
			r.dmg.resyncs++
			r.held = append(r.held, r.idb(blk.intf)...)
			continue
		case ok && (blk.typ == ngSHB || blk.typ == ngIDB):
			blk.intf.at = r.pos + int64(p)
			r.ngApply(&blk)
			p += blk.n
			continue
		case ok && blk.packet():
			r.pos += int64(p + blk.n)
			return
		}
		p = r.hold(p)
		if ok {
			r.discard(blk.n) // a block kwire does not use
		} else {
			r.skip(r.ngCandidate)
		}
	}
}

// ngClock applies the clock rule (see clock) to the checked packet block
// blk at offset p of br.
func (r *resync) ngClock(p int, blk *ngBlock) bool {
	if r.hasRef && absDiff(blk.sec, r.ref) < outlierJump {
		return r.clock(blk.sec, true, 0, false) // the usual: no need to look further
	}
	next, hasNext := r.ngNext(p + blk.n)
	hasNext = hasNext && next.timed() && !next.missing
	if hasNext && !r.hasRef && absDiff(next.sec, blk.sec) > maxClockJump {
		// The first two disagree: the third says which is right.
		third, ok := r.ngNext(p + blk.n + next.n)
		hasNext = !(ok && third.timed() && !third.missing && absDiff(third.sec, blk.sec) <= maxClockJump)
	}
	return r.clock(blk.sec, true, next.sec, hasNext)
}

// hold takes the p bytes of checked header blocks at the start of br out,
// to be put back in front of the packet after them, and returns 0.
func (r *resync) hold(p int) int {
	if p > 0 {
		b, _ := r.br.Peek(p)
		r.held = append(r.held, b...)
		r.discard(p)
	}
	return 0
}

// ngHeader reads a block's type and length (and, for a Section Header, its
// byte order), ok if they are possible.
func (r *resync) ngHeader(b []byte) (ngBlock, bool) {
	blk := ngBlock{big: r.big, typ: r.u32(b)}
	if blk.typ == ngSHB {
		switch {
		case binary.BigEndian.Uint32(b[8:]) == ngBOM:
			blk.big = true
		case binary.LittleEndian.Uint32(b[8:]) == ngBOM:
			blk.big = false
		default:
			return blk, false
		}
	}
	n := binary.LittleEndian.Uint32(b[4:])
	if blk.big {
		n = binary.BigEndian.Uint32(b[4:])
	}
	blk.n = int(n)
	return blk, n >= 12 && n%4 == 0 && int(n) <= r.br.Size()-12
}

// ngCheck checks that the contents of the whole block b are within it as
// pcapgo reads them, and fills in blk. Whether the length is repeated at
// the end is left to the caller (blk.trailerOK).
func (r *resync) ngCheck(blk *ngBlock, b []byte) bool {
	if blk.big != r.big { // a Section Header of the other byte order
		r.big = blk.big
		defer func() { r.big = !blk.big }()
	}
	blk.trailerOK = r.u32(b[len(b)-4:]) == uint32(blk.n)
	switch blk.typ {
	case ngSHB:
		return blk.n >= 28 && r.u16(b[12:]) == 1 && r.u16(b[14:]) == 0 && r.optionsOK(b[24:], nil)
	case ngIDB:
		if blk.n < 20 {
			return false
		}
		blk.intf = ngIface{link: layers.LinkType(r.u16(b[8:])), snap: r.u32(b[12:]), mask: 1e6}
		return r.optionsOK(b[16:], &blk.intf)
	case ngEPB, ngPB:
		if blk.n < 32 {
			return false
		}
		blk.iface = int(r.u32(b[8:]))
		if blk.typ == ngPB {
			blk.iface = int(r.u16(b[8:]))
		}
		capLen := int(r.u32(b[20:]))
		if capLen > blk.n || 28+capLen+(4-capLen&3)&3 > blk.n-4 || blk.iface > len(r.ifaces) ||
			!r.optionsOK(b[28+capLen+(4-capLen&3)&3:], nil) {
			return false
		}
		blk.exact = blk.n == 32+capLen+(4-capLen&3)&3
		blk.data, blk.raw = b[28:28+capLen], uint64(r.u32(b[12:]))<<32|uint64(r.u32(b[16:]))
		blk.wire = int(r.u32(b[24:]))
		if blk.missing = blk.iface == len(r.ifaces); !blk.missing {
			in := &r.ifaces[blk.iface]
			blk.sec = int64(blk.raw/in.mask + in.offset) // as pcapgo computes it
		}
		return true
	case ngSPB:
		if blk.n < 16 {
			return false
		}
		capLen := int(r.u32(b[8:]))
		if blk.missing = len(r.ifaces) == 0; !blk.missing && r.ifaces[0].snap != 0 {
			capLen = min(capLen, int(r.ifaces[0].snap))
		}
		if capLen > blk.n || 12+capLen+(4-capLen&3)&3 > blk.n-4 {
			return false
		}
		blk.data, blk.exact = b[12:12+capLen], blk.n == 16+capLen+(4-capLen&3)&3
		return true
	}
	return ngKnown(blk.typ) // blocks kwire does not use; an unknown type is damage
}

// optionsOK walks options as pcapgo reads them, b running to the block's
// end: each within the block, ending with a zero-length end of options or
// at the trailing length. For an interface it also reads the timestamp
// resolution and offset, as pcapgo does.
func (r *resync) optionsOK(b []byte, in *ngIface) bool {
	for len(b) > 4 {
		code, n := r.u16(b), int(r.u16(b[2:]))
		if code == 0 {
			return n == 0
		}
		adv := 4 + n + (4-n&3)&3
		if adv > len(b)-4 {
			return false
		}
		switch {
		case in != nil && code == 9 && n >= 1 && b[4] != 0: // if_tsresol
			exp, base := int(b[4]&0x7f), uint64(10)
			if b[4]&0x80 != 0 {
				base = 2
			}
			if exp > 63 {
				return false // pcapgo gives up on the file
			}
			in.mask = 1
			for range exp {
				in.mask *= base
			}
		case in != nil && code == 14 && n >= 8: // if_tsoffset
			in.offset = binary.LittleEndian.Uint64(b[4:])
			if r.big {
				in.offset = binary.BigEndian.Uint64(b[4:])
			}
		}
		b = b[adv:]
	}
	return true
}

// ngApply takes in a checked Section Header or Interface Description.
func (r *resync) ngApply(blk *ngBlock) {
	if blk.typ == ngSHB {
		r.big, r.ifaces = blk.big, r.ifaces[:0]
		return
	}
	r.ifaces = append(r.ifaces, blk.intf)
}

// ngNext checks the block at offset off of br: whole in the buffer, of a
// known type, its length repeated at its end, its contents within it. The
// end of the file right there counts as plausible too (a zero ngBlock).
func (r *resync) ngNext(off int) (ngBlock, bool) {
	h, err := r.br.Peek(off + 12)
	if len(h) == off && err == io.EOF {
		return ngBlock{}, true
	}
	if len(h) < off+12 || !ngKnown(r.u32(h[off:])) {
		return ngBlock{}, false
	}
	blk, ok := r.ngHeader(h[off:])
	if !ok {
		return blk, false
	}
	b, _ := r.br.Peek(off + blk.n)
	ok = len(b) == off+blk.n && r.ngCheck(&blk, b[off:]) && blk.trailerOK
	return blk, ok
}

// ngCandidate tells whether b starts with a plausible block: see scan.
func (r *resync) ngCandidate(b []byte, eof bool) candidate {
	if len(b) < 12 {
		return more(eof)
	}
	if !ngKnown(r.u32(b)) {
		return notRecord
	}
	blk, ok := r.ngHeader(b)
	if !ok {
		return notRecord
	}
	if len(b) < blk.n {
		return more(eof)
	}
	if !r.ngCheck(&blk, b[:blk.n]) || !blk.trailerOK {
		return notRecord
	}
	switch {
	case blk.typ == ngIDB && !SupportedLinkType(blk.intf.link):
		return notRecord
	case blk.missing:
		if _, ok := r.guessIface(&blk); !ok {
			return notRecord
		}
	case blk.packet():
		lt := r.ifaces[min(blk.iface, len(r.ifaces)-1)].link
		if !r.frameOK(lt, blk.data) || blk.timed() && (!r.nearRef(blk.sec) || blk.wire < len(blk.data) || blk.wire > maxWireLen) {
			return notRecord
		}
	}
	rest := b[blk.n:]
	if len(rest) < 12 {
		if eof {
			return isRecord
		}
		return needMore
	}
	big := r.big
	r.big = blk.big
	next, ok := r.ngHeader(rest)
	ok = ok && ngKnown(next.typ)
	r.big = big
	switch {
	case !ok:
		return notRecord
	case len(rest) >= next.n:
		if binary.LittleEndian.Uint32(rest[next.n-4:]) != binary.LittleEndian.Uint32(rest[4:]) {
			return notRecord
		}
	case !eof:
		return needMore
	}
	return isRecord
}

// guessIface makes up the interface of a packet block whose Interface
// Description was lost: the link type its frame decodes as TCP with (that
// of the interface before, if any, tried first), and the timestamp
// resolution (ns or µs) that puts it near the packets before it, or in
// this century.
func (r *resync) guessIface(blk *ngBlock) (ngIface, bool) {
	var prev []layers.LinkType
	if n := len(r.ifaces); n > 0 {
		prev = append(prev, r.ifaces[n-1].link)
	}
	in := ngIface{mask: 1e6}
	var found bool
	if in.link, found = r.tcpLink(blk.data, false, prev...); !found {
		return in, false
	}
	if blk.timed() {
		for _, mask := range [...]uint64{1e9, 1e6} {
			sec := int64(blk.raw / mask)
			if r.hasRef && absDiff(sec, r.ref) <= maxClockJump || !r.hasRef && sec > 946684800 && sec < 4102444800 {
				in.mask = mask
				break
			}
		}
	}
	return in, true
}

// synthIDB returns the Interface Description Block guessIface makes up
// for blk, and takes it in; nil if there is none.
func (r *resync) synthIDB(blk *ngBlock) []byte {
	in, ok := r.guessIface(blk)
	if !ok {
		return nil
	}
	return r.idb(in)
}

// idb returns an Interface Description Block for in (its link type, snap
// length and timestamp resolution, ns or µs), and takes it in.
func (r *resync) idb(in ngIface) []byte {
	res := byte(6)
	if in.mask == 1e9 {
		res = 9
	}
	order := r.order()
	b := make([]byte, 32) // header, link type, snap length, if_tsresol, end of options, length
	order.PutUint32(b, ngIDB)
	order.PutUint32(b[4:], 32)
	order.PutUint16(b[8:], uint16(in.link))
	order.PutUint32(b[12:], in.snap)
	order.PutUint16(b[16:], 9)
	order.PutUint16(b[18:], 1)
	b[20] = res
	order.PutUint32(b[28:], 32)
	r.ifaces = append(r.ifaces, in)
	return b
}

// wrongResolution reports whether the Interface Description blk, at
// offset p of br, says a timestamp resolution (or offset) that its first
// packet's time contradicts: damage to its if_tsresol option, which would
// put every packet of the interface centuries away (ns read as µs), the
// reassembly's timeouts with them. That time is checked against the
// packets before, or this century; when the other usual resolution (ns,
// µs) fits, blk's is set to it.
func (r *resync) wrongResolution(p int, blk *ngBlock) bool {
	next, ok := r.ngNext(p + blk.n)
	if !ok || !next.timed() || next.iface != len(r.ifaces) {
		return false
	}
	fits := func(mask uint64) bool {
		sec := int64(next.raw/mask + blk.intf.offset)
		if r.hasRef {
			return absDiff(sec, r.ref) <= maxClockJump
		}
		return sec > 946684800 && sec < 4102444800
	}
	if fits(blk.intf.mask) {
		return false
	}
	for _, mask := range [...]uint64{1e9, 1e6} {
		if fits(mask) {
			blk.intf.mask = mask
			return true
		}
	}
	return false
}

// repairEPB repairs an enhanced packet block b whose captured length was
// damaged while its framing is intact (its total length, given twice,
// agrees): the captured length that fills the block exactly (no options),
// and whose frame decodes, the original length first, is written back in
// pcapgo's buffer, and the packet is kept: counted as damage, with no byte
// skipped. It reports whether it repaired b.
func (r *resync) repairEPB(blk *ngBlock, b []byte) bool {
	n := len(b)
	if blk.typ != ngEPB || n < 32 || r.u32(b[4:]) != r.u32(b[n-4:]) {
		return false
	}
	iface := int(r.u32(b[8:]))
	if iface >= len(r.ifaces) {
		return r.repairIface(b)
	}
	wire := int(r.u32(b[24:]))
	for _, c := range [5]int{wire, n - 32, n - 33, n - 34, n - 35} {
		if c <= 0 || 32+c+(4-c&3)&3 != n || !r.frameOK(r.ifaces[iface].link, b[28:28+c]) {
			continue
		}
		r.put32(b[20:], uint32(c))
		if wire < c || wire > maxWireLen {
			r.put32(b[24:], uint32(c))
		}
		if r.dmg.resyncs == 0 {
			r.dmg.at = r.pos
		}
		r.dmg.resyncs++
		return true
	}
	return false
}

// repairIface repairs an enhanced packet block b whose interface id was
// damaged (none such in the section) while its framing is intact: the
// first interface whose link type its frame decodes with and with which
// the block checks whole is written back in pcapgo's buffer, and the
// packet is kept, counted as damage. (The clock rule still judges its
// timestamp.) It reports whether it repaired b.
func (r *resync) repairIface(b []byte) bool {
	old := [4]byte(b[8:])
	for j := range r.ifaces {
		r.put32(b[8:], uint32(j))
		blk, ok := r.ngHeader(b)
		if ok && r.ngCheck(&blk, b) && blk.trailerOK && !blk.missing && r.frameOK(r.ifaces[j].link, blk.data) {
			if r.dmg.resyncs == 0 {
				r.dmg.at = r.pos
			}
			r.dmg.resyncs++
			return true
		}
	}
	copy(b[8:], old[:])
	return false
}

// ngFixBlock sets back the header of b, a damaged block followed by a
// plausible one, when its damage was its type or leading length only:
// its repeated length, at its end, says b's length, and with the type of
// a packet block and that length, its contents check as one. A packet
// whose block header lost a byte is then read instead of skipped. b is
// changed in place (pcapgo's buffer) only when it reports true.
func (r *resync) ngFixBlock(b []byte) bool {
	n := len(b)
	if n < 32 || n%4 != 0 || r.u32(b[n-4:]) != uint32(n) {
		return false
	}
	old := [8]byte(b)
	order := r.order()
	order.PutUint32(b, ngEPB)
	order.PutUint32(b[4:], uint32(n))
	if [8]byte(b) == old {
		return false // nothing to set back: the damage is elsewhere
	}
	blk, ok := r.ngHeader(b)
	if ok && r.ngCheck(&blk, b) && blk.trailerOK && blk.exact && !blk.missing &&
		r.frameOK(r.ifaces[blk.iface].link, blk.data) {
		return true
	}
	copy(b, old[:])
	return false
}
