package capture

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"slices"

	"github.com/gopacket/gopacket/layers"
)

// A capture file damaged in place (a flipped byte in a transferred file)
// is read past the damage. pcapgo stays the reader: a resync looks at the
// record (pcap) or blocks (pcapng) that pcapgo is about to read, in the
// read buffer pcapgo reads from, and drops those that are damaged before
// pcapgo sees them, with the bytes after them up to the next plausible
// record. pcapgo cannot do it itself: it stops at a header with impossible
// lengths, and a pcapng block length that is merely wrong makes it read the
// rest of the file as one block, which looks like a truncated file.
//
// A record is damaged when its framing cannot be right: pcap lengths above
// the snap length or the original length; a pcapng block of an unknown
// type, whose length is not a multiple of 4 or larger than the read
// buffer, whose options or packet overrun it, that names an interface the
// section lacks, or a Section Header of another version. A pcapng block
// whose length is not repeated at its end is damaged too, unless it is a
// packet block without options, as long as its frame makes it, with a
// plausible block after it: then only the repeat was hit. The next record
// is looked for byte by byte: plausible framing, a time near the last
// good one, a frame that decodes as IP for its link type, and a plausible
// record (or the end of the file) right after it.
//
// Time: a packet more than maxClockJump from the one before it, or with a
// fraction of a second of a second or more, keeps its bytes but gets the
// time of the packet before it, if the record after it is plausible and
// does not agree with it (if it agrees, the clock was set). The first
// packet has none before it: if the second disagrees, the third decides.
// Nearer jumps, of outlierJump or more, are damage too when the packet
// after goes back to the time before: a capture's clock does not step out
// and back (a flipped bit in the seconds would close every connection as
// idle, or hold every stream as reordered).
//
// A packet block naming the interface after the last one known (its
// Interface Description was damaged and skipped) gets one made up: the
// link type its frame decodes as, the timestamp resolution that puts it
// near the packets before it. Blocks kwire does not use (name resolution,
// statistics, decryption secrets, custom blocks) are dropped here, not
// counted: pcapgo never parses them, and never fails on them. A file that
// ends in the middle of a record is still cut, not damaged, unless a
// plausible record follows the one that claims to run past the end.

const (
	// maxClockJump is how far from the packet before it a packet's time
	// may be without being taken as damage.
	maxClockJump = 24 * 60 * 60 // seconds
	// outlierJump is the least step out and back taken as damage.
	outlierJump = 2 // seconds
	// maxWireLen bounds the original length of a pcap record.
	maxWireLen = 1 << 24
	// pcapRecHdr is the size of a pcap record header.
	pcapRecHdr = 16
	// scanWindow is how much is looked at, at first, for the next record.
	scanWindow = 64 << 10
)

// fileDamage counts what a file's resync skipped.
type fileDamage struct {
	at      int64 // offset of the first damaged record
	resyncs int
	skipped int64
	// origShort counts records whose original length is below their
	// captured one: no damage, a quirk of some writers (see origBelowCap).
	origShort int
}

// resync checks what pcapgo reads next from br and skips damage.
type resync struct {
	br  *bufio.Reader // what pcapgo reads from, directly
	src *spliced      // under br
	ng  bool
	big bool  // byte order of the file (pcap) or the section (pcapng)
	pos int64 // offset in the file of br's next byte, bytes put back aside

	// pcap
	nano   bool
	maxCap uint32
	link   layers.LinkType

	// pcapng
	ifaces []ngIface // of the current section
	held   []byte    // checked header blocks taken out to drop what follows

	ref     int64 // time (seconds) of the last packet with a good time
	hasRef  bool
	fixTime bool // the packet pcapgo reads next gets the time before it
	dec     decoder
	dmg     fileDamage
	links   map[layers.LinkType]linkFix // damaged link types (fixLink)
}

// linkFix is what fixLink made of a link type kwire does not read.
type linkFix struct {
	lt    layers.LinkType // the one its frames decode with, once found
	found bool
	tries int // frames tried without finding one
}

// maxLinkTries bounds the frames fixLink tries for one link type: a
// capture of a link kwire does not read is left as it is after them.
const maxLinkTries = 16

// fixLink returns the link type to decode a frame of link type lt with.
// A link type kwire does not read is damage (a flipped byte in a pcap
// header or an Interface Description Block) when its frames decode as
// TCP over IP, with a right IPv4 header checksum, with one it reads
// (tcpLink): that one is used from then on, for the interfaces that
// gave lt too, counted as damage once. A capture of another link keeps
// its link type: its packets are skipped and counted, as before.
func (r *resync) fixLink(lt layers.LinkType, data []byte) layers.LinkType {
	f := r.links[lt]
	if f.found {
		return f.lt
	}
	if f.tries >= maxLinkTries {
		return lt
	}
	if r.links == nil {
		r.links = map[layers.LinkType]linkFix{}
	}
	got, ok := r.tcpLink(data, true)
	if !ok {
		f.tries++
		r.links[lt] = f
		return lt
	}
	r.links[lt] = linkFix{lt: got, found: true}
	at := r.pos
	for i := range slices.Backward(r.ifaces) {
		if r.ifaces[i].link == lt {
			r.ifaces[i].link, at = got, r.ifaces[i].at
		}
	}
	if !r.ng {
		r.link, at = got, 0 // the file header
	}
	if r.dmg.resyncs == 0 {
		r.dmg.at = at
	}
	r.dmg.resyncs++
	return got
}

// readLinks are the link types a frame of a damaged or lost link type is
// tried with, the most common first.
var readLinks = [...]layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL2, layers.LinkTypeLinuxSLL,
	layers.LinkTypeNull, layers.LinkTypeLoop, layers.LinkTypeRaw}

// tcpLink returns the link type a frame decodes as TCP with: those of
// first (the interface before), then readLinks. headerRight also wants its
// IPv4 header checksum right (an IPv6 header has none).
func (r *resync) tcpLink(data []byte, headerRight bool, first ...layers.LinkType) (layers.LinkType, bool) {
	for _, try := range [2][]layers.LinkType{first, readLinks[:]} {
		for _, lt := range try {
			if r.dec.decode(lt, data) == pktTCP &&
				(!headerRight || r.dec.v6 || len(r.dec.ip4.Contents) >= 20 && fold(sum16(0, r.dec.ip4.Contents)) == 0xffff) {
				return lt, true
			}
		}
	}
	return 0, false
}

// spliced is the reader under a file's read buffer: bytes put back, then
// the file.
type spliced struct {
	front []byte
	r     io.Reader
}

func (s *spliced) Read(p []byte) (int, error) {
	if len(s.front) > 0 {
		n := copy(p, s.front)
		s.front = s.front[n:]
		return n, nil
	}
	return s.r.Read(p)
}

// order is the byte order of the file (pcap) or the section (pcapng).
func (r *resync) order() binary.ByteOrder {
	if r.big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

func (r *resync) u16(b []byte) uint16 {
	if r.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *resync) u32(b []byte) uint32 {
	if r.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// newPcapResync starts checking a pcap file whose 24-byte header, not yet
// read, is at the start of br; setPcapHeader completes it once pcapgo has
// read that header.
func newPcapResync(br *bufio.Reader, src *spliced) *resync {
	r := &resync{br: br, src: src, pos: 24}
	h, _ := br.Peek(4)
	magic := binary.LittleEndian.Uint32(h)
	r.big = magic == magicPcapMicroBE || magic == magicPcapNanoBE
	r.nano = magic == magicPcapNano || magic == magicPcapNanoBE
	return r
}

// fixPcapHeader sets back, in br's buffer, a pcap file header whose magic
// number or version a flipped byte damaged (pcapgo refuses the file): a
// magic one byte off one of the four is that one, when the version then
// reads 2.4; a version other than 2.4 under a magic is 2.4. It reports
// whether it changed the header.
func fixPcapHeader(br *bufio.Reader) bool {
	h, _ := br.Peek(24)
	if len(h) < 24 {
		return false
	}
	magics := [...]uint32{magicPcapMicro, magicPcapNano, magicPcapMicroBE, magicPcapNanoBE}
	version := func(m uint32) []byte {
		if m == magicPcapMicroBE || m == magicPcapNanoBE {
			return []byte{0, 2, 0, 4}
		}
		return []byte{2, 0, 4, 0}
	}
	magic := binary.LittleEndian.Uint32(h)
	if slices.Contains(magics[:], magic) {
		if v := version(magic); !bytes.Equal(h[4:8], v) {
			copy(h[4:8], v)
			return true
		}
		return false
	}
	for _, m := range magics {
		off := 0
		for i := range 4 {
			if byte(magic>>(8*i)) != byte(m>>(8*i)) {
				off++
			}
		}
		if off == 1 && bytes.Equal(h[4:8], version(m)) {
			binary.LittleEndian.PutUint32(h, m)
			return true
		}
	}
	return false
}

// pcapFirstLink returns the link type to read a pcap file whose header
// gives lt, one kwire does not read, with: fixLink's judgement of the
// first packet's frame, still in br.
func (r *resync) pcapFirstLink(lt layers.LinkType) layers.LinkType {
	h, _ := r.br.Peek(16)
	if len(h) < 16 {
		return lt
	}
	b, _ := r.br.Peek(16 + int(min(r.u32(h[8:]), 1<<16)))
	return r.fixLink(lt, b[16:])
}

// setPcapHeader takes in the snap length and link type of a pcap file.
func (r *resync) setPcapHeader(snaplen uint32, link layers.LinkType) {
	r.maxCap, r.link = max(snaplen, 262144), link // pcapgo's limit
}

// before checks the record or blocks pcapgo reads next, and skips damage.
func (r *resync) before() {
	r.fixTime = false
	if r.ng {
		r.beforeNg()
	} else {
		r.beforePcap()
	}
}

// beforePcap checks the record pcapgo reads next.
func (r *resync) beforePcap() {
	for {
		b, _ := r.br.Peek(pcapRecHdr)
		if len(b) < pcapRecHdr {
			return // the end, or a header cut short: pcapgo tells which
		}
		if r.origBelowCap(b) {
			continue // its original length set to the captured one
		}
		b, _ = r.br.Peek(pcapRecHdr) // again: origBelowCap's Peek may have moved the bytes
		sec, n, ok, secOK := r.pcapHeader(b)
		if ok {
			b, err := r.br.Peek(n + pcapRecHdr) // and the next header
			switch {
			case len(b) >= n:
				nsec, n2, nextOK, nextSecOK := r.pcapHeader(b[n:])
				hasNext := nextOK && nextSecOK
				if hasNext && !r.hasRef && absDiff(nsec, sec) > maxClockJump {
					// The first two disagree: the third says which is right.
					b, _ = r.br.Peek(n + n2 + pcapRecHdr)
					s3, _, ok3, secOK3 := r.pcapHeader(b[min(n+n2, len(b)):])
					hasNext = !(ok3 && secOK3 && absDiff(s3, sec) <= maxClockJump)
				}
				if !(hasNext && absDiff(nsec, sec) <= maxClockJump) && r.pcapShorten(b, n) {
					continue // its lengths set back: check it again
				}
				if r.clock(sec, secOK, nsec, hasNext) {
					r.pos += int64(n)
					return
				}
			case err == bufio.ErrBufferFull: // larger than the buffer: unchecked
				r.pos += int64(n)
				return
			default: // past the end: cut short, unless a record follows
				if _, found := r.scan(r.pcapCandidate, b, 1, true); !found {
					return
				}
			}
		}
		if r.repairPcapLen() {
			continue // check it again, repaired
		}
		r.skip(r.pcapCandidate)
	}
}

// origBelowCap takes a record whose original length is smaller than its
// captured length, as some capture libraries write them, the way tshark
// does: with the captured length, when that length ends where the next
// record (or the file) does. The original length is set to it in pcapgo's
// buffer (pcapgo refuses such a record) and counted (origShort), not as
// damage. It reports whether it set a record so.
func (r *resync) origBelowCap(h []byte) bool {
	capLen, wire := r.u32(h[8:]), r.u32(h[12:])
	if wire >= capLen || capLen > r.maxCap {
		return false
	}
	if r.pcapRecordAt(pcapRecHdr + int(wire)) {
		return false // a record ends at the original length: the captured one was damaged (repairPcapLen)
	}
	n := pcapRecHdr + int(capLen)
	b, err := r.br.Peek(n + pcapRecHdr)
	switch {
	case len(b) == n && err == io.EOF:
	case len(b) == n+pcapRecHdr:
		var next [pcapRecHdr]byte // the next may be written so too
		copy(next[:], b[n:])
		if nc, nw := r.u32(next[8:]), r.u32(next[12:]); nw < nc {
			r.put32(next[12:], nc)
		}
		if !r.plausibleAt(next[:]) {
			return false
		}
	default:
		return false
	}
	r.put32(b[12:], capLen) // b, not h: the Peek may have moved the bytes
	r.dmg.origShort++
	return true
}

// pcapRecordAt reports whether a record starts off bytes into br: a whole
// one (pcapCandidate), its frame decoding, not merely a header whose
// lengths are possible. Some writers pad the captured bytes after the
// frame with zeros (go-sniffer's kafka.pcap: 16 of them, each record's
// original length 16 below its captured one), and zeros read as a header
// with possible lengths; the record's captured length is then right.
func (r *resync) pcapRecordAt(off int) bool {
	b, _ := r.br.Peek(off + pcapRecHdr)
	if len(b) < off+pcapRecHdr {
		return false
	}
	_, n, ok, _ := r.pcapHeader(b[off:])
	if !ok {
		return false
	}
	b, err := r.br.Peek(min(off+n+pcapRecHdr, r.br.Size()))
	return len(b) > off && r.pcapCandidate(b[off:], err != nil) == isRecord
}

// repairPcapLen repairs the record pcapgo reads next when one of its two
// lengths (captured, original) was damaged and the other is right: the
// frame that length gives decodes, and a plausible record (or the end of
// the file) follows it. Both lengths are set to it, in pcapgo's buffer, and
// the packet is kept: counted as damage, with no byte skipped. It reports
// whether it repaired the record.
func (r *resync) repairPcapLen() bool {
	b, _ := r.br.Peek(pcapRecHdr)
	if len(b) < pcapRecHdr {
		return false
	}
	capLen, wire := r.u32(b[8:]), r.u32(b[12:])
	for _, l := range [2]uint32{wire, capLen} {
		if l == 0 || l > r.maxCap || capLen == wire {
			continue
		}
		n := pcapRecHdr + int(l)
		rec, err := r.br.Peek(n + pcapRecHdr)
		if len(rec) < n || !r.frameOK(r.link, rec[pcapRecHdr:n]) {
			continue
		}
		if len(rec) == n && err == io.EOF || len(rec) >= n+pcapRecHdr && r.plausibleAt(rec[n:]) {
			r.put32(rec[8:], l) // rec, not b: the Peek may have moved the bytes
			r.put32(rec[12:], l)
			if r.dmg.resyncs == 0 {
				r.dmg.at = r.pos
			}
			r.dmg.resyncs++
			return true
		}
	}
	return false
}

// pcapShorten repairs the record at the start of b (n bytes with its
// header, all in b, and the next header unless at the end) when what follows it is not a record header and a
// plausible record starts inside it instead: both its lengths were
// damaged upwards (one alone is repairPcapLen's), and it would take the
// records after it as its data. Its lengths are set to end where that
// record starts, if its frame decodes so; counted as damage, no byte
// skipped. Records that run on past their end are not shortened: the
// header after them is more likely the damaged one.
func (r *resync) pcapShorten(b []byte, n int) bool {
	for m := pcapRecHdr + 20; m+pcapRecHdr <= n; m++ {
		if r.pcapCandidate(b[m:], len(b) < n+pcapRecHdr) != isRecord || !r.frameOK(r.link, b[pcapRecHdr:m]) {
			continue
		}
		r.put32(b[8:], uint32(m-pcapRecHdr))
		r.put32(b[12:], uint32(m-pcapRecHdr))
		if r.dmg.resyncs == 0 {
			r.dmg.at = r.pos
		}
		r.dmg.resyncs++
		return true
	}
	return false
}

// plausibleAt reports whether b starts with a record header whose lengths
// are possible and whose time is near the last good one.
func (r *resync) plausibleAt(b []byte) bool {
	sec, _, ok, secOK := r.pcapHeader(b)
	return ok && secOK && r.nearRef(sec)
}

func (r *resync) put32(b []byte, v uint32) {
	if r.big {
		binary.BigEndian.PutUint32(b, v)
		return
	}
	binary.LittleEndian.PutUint32(b, v)
}

// pcapHeader reads a pcap record header: its time (secOK if the fraction
// is under a second) and the record's size (ok if its lengths are possible).
func (r *resync) pcapHeader(b []byte) (sec int64, n int, ok, secOK bool) {
	if len(b) < pcapRecHdr {
		return 0, 0, false, false
	}
	frac, capLen, wire := r.u32(b[4:]), r.u32(b[8:]), r.u32(b[12:])
	fracMax := uint32(1e6)
	if r.nano {
		fracMax = 1e9
	}
	ok = capLen <= r.maxCap && capLen <= wire && wire <= maxWireLen
	return int64(r.u32(b)), pcapRecHdr + int(capLen), ok, frac < fracMax
}

// pcapCandidate tells whether b starts with a plausible record: see scan.
func (r *resync) pcapCandidate(b []byte, eof bool) candidate {
	if len(b) < pcapRecHdr {
		return more(eof)
	}
	sec, n, ok, secOK := r.pcapHeader(b)
	if !ok || !secOK || n == pcapRecHdr || !r.nearRef(sec) {
		return notRecord
	}
	if n+pcapRecHdr > r.br.Size() {
		return isRecord // too large to check further
	}
	if len(b) < n {
		return more(eof)
	}
	if !r.frameOK(r.link, b[pcapRecHdr:n]) {
		return notRecord
	}
	if len(b) < n+pcapRecHdr {
		if eof {
			return isRecord // the last record, or the last but a cut one
		}
		return needMore
	}
	nsec, _, ok, secOK := r.pcapHeader(b[n:])
	if ok && secOK && absDiff(nsec, sec) <= maxClockJump {
		return isRecord
	}
	return notRecord
}

// clock applies the clock rule to the packet pcapgo reads next, at sec
// (secOK if its time is possible at all), followed by a plausible packet
// at next if hasNext. It returns false if the packet is damaged; it sets
// fixTime if the packet is kept with the time before it.
func (r *resync) clock(sec int64, secOK bool, next int64, hasNext bool) bool {
	agrees := secOK && hasNext && absDiff(next, sec) <= maxClockJump
	switch {
	case secOK && hasNext && r.hasRef && absDiff(sec, r.ref) >= outlierJump && absDiff(next, r.ref) < outlierJump:
		r.fixTime = true // out and back: this one is damaged
		return true
	case secOK && (!r.hasRef && !hasNext || agrees || r.hasRef && absDiff(sec, r.ref) <= maxClockJump):
		r.ref, r.hasRef = sec, true
		return true
	case r.hasRef && hasNext:
		r.fixTime = true
		return true
	}
	return false
}

func (r *resync) nearRef(sec int64) bool {
	return !r.hasRef || absDiff(sec, r.ref) <= maxClockJump
}

// frameOK reports whether a frame decodes as IP for link type lt.
func (r *resync) frameOK(lt layers.LinkType, data []byte) bool {
	switch r.dec.decode(lt, data) {
	case pktTCP, pktNonTCP, pktFragment:
		return true
	}
	return false
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// candidate is what a look at a possible record start found.
type candidate uint8

const (
	notRecord candidate = iota
	isRecord
	needMore // more bytes are needed to tell
)

func more(eof bool) candidate {
	if eof {
		return notRecord
	}
	return needMore
}

// scan looks for a plausible record in w from offset from on: it returns
// the offset of the first, found, or where the bytes in w ran out to tell.
// eof says w runs to the end of the file.
func (r *resync) scan(cand func(b []byte, eof bool) candidate, w []byte, from int, eof bool) (int, bool) {
	for i := from; i < len(w); i++ {
		switch cand(w[i:], eof) {
		case isRecord:
			return i, true
		case needMore:
			return i, false
		}
	}
	return len(w), false
}

// skip drops the damaged record at the start of br and the bytes after it,
// up to the next plausible record or the end of the file. It looks at what
// is buffered, or scanWindow, and more only when a candidate needs it:
// filling the whole buffer at each damage would copy it each time.
func (r *resync) skip(cand func(b []byte, eof bool) candidate) {
	if r.dmg.resyncs == 0 {
		r.dmg.at = r.pos
	}
	r.dmg.resyncs++
	from, want := 1, scanWindow
	for {
		w, err := r.br.Peek(min(max(want, r.br.Buffered()), r.br.Size()))
		eof := err != nil
		i, found := r.scan(cand, w, from, eof)
		if found && from == 1 && r.ng && r.ngFixBlock(w[:i]) {
			return // its header set back: read as it is now
		}
		if !found && !eof && i == 0 {
			if len(w) < r.br.Size() {
				want = 2 * len(w)
				continue
			}
			found = true // a candidate larger than the buffer
		}
		r.discard(i)
		r.dmg.skipped += int64(i)
		if found || eof {
			return
		}
		from, want = 0, scanWindow
	}
}

// discard drops n bytes of br.
func (r *resync) discard(n int) {
	d, _ := r.br.Discard(n)
	r.pos += int64(d)
}

// unread puts b back in front of what br reads next. It copies what br
// holds: it is for rare events.
func (r *resync) unread(b []byte) {
	rest, _ := r.br.Peek(r.br.Buffered())
	front := make([]byte, 0, len(b)+len(rest)+len(r.src.front))
	front = append(append(append(front, b...), rest...), r.src.front...)
	r.br.Discard(len(rest))
	r.src.front = front
	r.br.Reset(r.src)
}
