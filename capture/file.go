package capture

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// readBufferSize is the read-ahead per file: large reads keep the cost of
// system calls far below the cost of the bytes. 1 MiB reads made a 100 MB
// analysis 10-15% slower than 256 KiB (less of it ran in parallel: 1.31
// CPUs used against 1.53), and a 1 GB one no faster. Packets larger than
// the buffer go to pcapgo, and the resync does not check them.
const readBufferSize = 256 << 10

// ctxCheckEvery is how many packets pass between checks of Run's context.
const ctxCheckEvery = 4096

// Files is a Source reading pcap and pcapng files (optionally gzipped).
// Several files are merged by packet timestamp, as if captured together:
// one capture per broker host is normal, and a packet captured on both
// hosts is dropped as a duplicate (Options.DedupeWindow) or, beyond the
// window, handled by reassembly as a retransmission.
type Files struct {
	readers []*fileReader
	asm     *Assembler // sink set by Run
	ran     bool
}

// fileReader is one open capture file and its next packet.
type fileReader struct {
	path    string
	f       *os.File
	pcap    *pcapgo.Reader
	ng      *pcapgo.NgReader
	link    layers.LinkType // of pcap files; pcapng gives it per packet
	records int
	rs      *resync     // skips damaged records before pcapgo reads them
	fast    *fastReader // reads plain records instead of pcapgo (file_fast.go)
	noFast  bool        // Options.ReferenceRead
	// damage is what rs skipped, copied once the file is done: Run's
	// goroutine reads it, not the reading one.
	damage fileDamage
	// lo and hi are the earliest and latest packet times so far; span
	// is their copy, made once the file is done, as damage is.
	lo, hi time.Time
	span   FileSpan

	// The next packet: data is owned by the reader, valid until next.
	data []byte
	ci   gopacket.CaptureInfo
	lt   layers.LinkType
	last time.Time // of the packet before
	done bool
	err  error // why reading stopped early, other than truncation
	cut  bool  // the file ends in the middle of a record
}

// File magics, as read little-endian from the first four bytes.
const (
	magicPcapMicro   = 0xa1b2c3d4
	magicPcapNano    = 0xa1b23c4d
	magicPcapMicroBE = 0xd4c3b2a1
	magicPcapNanoBE  = 0x4d3cb2a1
	magicPcapNG      = 0x0a0d0d0a
)

// OpenFiles opens capture files for reading. Each must be a pcap or pcapng
// file (gzip-compressed or not) of a supported link type (see
// SupportedLinkType). opts may be nil. On error nothing stays open.
func OpenFiles(paths []string, opts *Options) (*Files, error) {
	if len(paths) == 0 {
		return nil, errors.New("open: no capture files given")
	}
	fs := &Files{asm: NewAssembler(opts, nil)}
	fs.asm.repair, fs.asm.open = true, map[connKey]bool{} // a file may be damaged in transfer; live traffic is not
	if len(paths) > 1 && fs.asm.dedup != nil {            // merged: copies are apart by the clock skew
		fs.asm.dedup = newDedupe(fs.asm.opts.DedupeWindow, mergeSlots)
	}
	for _, p := range paths {
		r, err := openFile(p, opts != nil && opts.ReferenceRead)
		if err != nil {
			fs.Close()
			return nil, err
		}
		fs.readers = append(fs.readers, r)
	}
	return fs, nil
}

func openFile(path string, noFast bool) (*fileReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := &fileReader{path: path, f: f, noFast: noFast}
	if err := r.open(f, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return r, nil
}

// open detects the format from the magic number and starts its reader on
// rd, behind a read buffer of readBufferSize (of rd's size if rd is a
// bufio.Reader: fuzzing keeps it small). pcapgo reads that buffer directly
// (a bufio.Reader at least as large as its own), which is what lets the
// resync check records in it before pcapgo reads them.
func (r *fileReader) open(rd io.Reader, inGzip bool) error {
	size := readBufferSize
	if b, ok := rd.(*bufio.Reader); ok {
		size = max(b.Size(), 4096)
	}
	src := &spliced{r: rd}
	br := bufio.NewReaderSize(src, size)
	head, err := br.Peek(4)
	if len(head) == 0 {
		return errors.New("file is empty; kwire reads pcap and pcapng files")
	}
	if err != nil {
		return fmt.Errorf("file too short (%d bytes) to be a capture; kwire reads pcap and pcapng files", len(head))
	}
	pcapFixed := fixPcapHeader(br) // a damaged pcap header? (file_resync.go)
	head, _ = br.Peek(4)
	switch magic := binary.LittleEndian.Uint32(head); {
	case head[0] == 0x1f && head[1] == 0x8b && !inGzip:
		z, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("bad gzip data: %w", err)
		}
		return r.open(z, true)
	case magic == magicPcapNG || ngBOMAt(br):
		r.rs = newNgResync(br, src)
		r.rs.fixSHB() // a damaged section header (file_resync_ng.go)
		r.ng, err = pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return fmt.Errorf("bad pcapng header: %w", err)
		}
	case magic == magicPcapMicro || magic == magicPcapNano || magic == magicPcapMicroBE || magic == magicPcapNanoBE:
		r.rs = newPcapResync(br, src)
		if pcapFixed {
			r.rs.dmg.resyncs = 1 // at 0
		}
		r.pcap, err = pcapgo.NewReader(br)
		if err != nil {
			return fmt.Errorf("bad pcap header: %w", err)
		}
		r.link = r.pcap.LinkType()
		r.rs.setPcapHeader(r.pcap.Snaplen(), r.link)
		if !SupportedLinkType(r.link) {
			r.link = r.rs.pcapFirstLink(r.link) // a damaged header?
		}
		if !SupportedLinkType(r.link) {
			return fmt.Errorf("link type %d (%s) is not supported; kwire reads Ethernet, Linux cooked (SLL, SLL2), BSD loopback and raw IP captures", r.link, r.link)
		}
	default:
		return fmt.Errorf("not a pcap or pcapng file (magic 0x%08x); kwire reads pcap and pcapng", binary.BigEndian.Uint32(head))
	}
	if !r.noFast {
		r.fast = &fastReader{}
	}
	return nil
}

// ngBOMAt reports whether br starts with what a pcapng Section Header has
// after its block type and length: the byte-order magic, in either order.
// A file whose type was damaged is still read as pcapng.
func ngBOMAt(br *bufio.Reader) bool {
	h, _ := br.Peek(12)
	return len(h) == 12 && (binary.LittleEndian.Uint32(h[8:]) == ngBOM || binary.BigEndian.Uint32(h[8:]) == ngBOM)
}

// next reads the following packet into r.data, r.ci and r.lt, or sets
// r.done.
func (r *fileReader) next() {
	r.rs.before()
	var err error
	fast := r.fast != nil && r.fast.next(r) // the record pcapgo would read, read the same way
	switch {
	case r.pcap != nil:
		if !fast {
			r.data, r.ci, err = r.pcap.ZeroCopyReadPacketData()
		}
		r.lt = r.link
	default:
		if !fast {
			r.data, r.ci, err = r.ng.ZeroCopyReadPacketData()
			if r.fast != nil {
				r.fast.forget() // it may have read interfaces or a section
			}
		}
		r.lt = layers.LinkTypeNull
		if len(r.ci.AncillaryData) > 0 {
			r.lt, _ = r.ci.AncillaryData[0].(layers.LinkType)
		}
	}
	if err == nil && !SupportedLinkType(r.lt) {
		r.lt = r.rs.fixLink(r.lt, r.data) // a damaged interface's link type?
	}
	switch {
	case err == nil:
		r.records++
		if r.rs.fixTime { // a damaged time: keep the packet, in its place
			r.ci.Timestamp = r.last
		}
		if r.ci.Length < r.ci.CaptureLength {
			r.rs.dmg.origShort++ // as origBelowCap counts pcap's
		}
		if r.ci.Length < r.ci.CaptureLength || r.ci.Length > maxWireLen {
			// An original length that cannot be right (pcapgo takes it
			// from a pcapng block as it is): the captured one will do.
			r.ci.Length = r.ci.CaptureLength
		}
		r.last = r.ci.Timestamp
		if r.records == 1 || r.last.Before(r.lo) {
			r.lo = r.last
		}
		if r.last.After(r.hi) {
			r.hi = r.last
		}
		return
	case err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		r.cut = true
	default:
		r.err = fmt.Errorf("read %s: record %d: %w; the records before it were used, the rest of the file was skipped", r.path, r.records+1, err)
	}
	r.done = true
}

// Run reads all files to their end, merging them by timestamp (ties go to
// the file named first), and delivers the chunks to sink. At the end every
// connection still open gets CloseEOF. A file that ends in the middle of a
// record is not an error: the records before the cut are used and
// Stats().FilesTruncated counts it. Nor is a damaged record (a flipped
// byte in a transferred file): it is skipped with the bytes after it, up
// to the next plausible record, and reading goes on; Stats counts the
// files (FilesResynced) and bytes (FileBytesSkipped), and Damage says
// where. A read error (of a damaged gzip stream, say) stops its file and
// Run returns an error naming it, after using everything else. If ctx is
// done, Run stops reading, closes what is open with CloseEOF and returns
// ctx.Err(). Run closes the files; it may be called once.
//
// Reading and parsing the files runs on a goroutine of its own, a batch of
// packets ahead, so that it overlaps with reassembly and everything
// downstream; the sink is still called from the calling goroutine only, in
// the same order.
func (fs *Files) Run(ctx context.Context, sink Sink) error {
	if fs.ran {
		return errors.New("capture: Files.Run called twice")
	}
	fs.ran = true
	defer fs.Close()
	fs.asm.sink = sink
	full, free := make(chan *batch, batchesInFlight), make(chan *batch, batchesInFlight)
	for range batchesInFlight {
		free <- &batch{buf: make([]byte, 0, batchStartBytes)}
	}
	stop := make(chan struct{})
	defer close(stop)
	go fs.read(full, free, stop)
	for n := 0; ; n++ {
		if n%(ctxCheckEvery/batchPackets+1) == 0 && ctx.Err() != nil {
			fs.asm.Close()
			return ctx.Err()
		}
		b, ok := <-full
		if !ok {
			break
		}
		for i := range b.pkts {
			p := &b.pkts[i]
			fs.asm.Packet(p.lt, b.buf[p.off:p.off+p.n], p.info())
		}
		for _, r := range b.done {
			fs.fileDone(r)
		}
		b.buf, b.pkts, b.done = b.buf[:0], b.pkts[:0], b.done[:0]
		free <- b
	}
	fs.asm.Close()
	var errs []error
	for _, r := range fs.readers {
		errs = append(errs, r.err)
	}
	return errors.Join(errs...)
}

// Read-ahead: batches of packets copied out of the readers' buffers. A
// batch of 256 packets is a tenth of a millisecond of reassembly: enough
// to make the handover cheap, small enough that the batches' memory (each
// page of which is a page fault the first time it is written, in a short
// run a good part of the system time) stays at 1 MiB. Each batch's buffer
// starts at batchStartBytes and grows as it is filled, to about
// batchBytes, and is kept: made at full size up front, the 1 MiB counted
// towards the garbage collector's first goal (4 MB) in runs on small
// captures that touch a tenth of it, and a collection there scans the
// binary's globals, a good part of such a run.
const (
	batchesInFlight = 4
	batchBytes      = 256 << 10
	batchStartBytes = 64 << 10
	batchPackets    = 256
)

// batch is packets read ahead, their bytes packed in buf.
type batch struct {
	buf  []byte
	pkts []packedPacket
	done []*fileReader // files that ended after these packets
}

// packedPacket is one packet of a batch: its bytes are buf[off:off+n].
// It holds no pointers and is 48 bytes, not the 96 of a gopacket.CaptureInfo
// with its link type: every packet's header crosses from the reading core
// to the reassembling one, and the cache lines that carry it are the cost.
type packedPacket struct {
	sec          int64 // timestamp: time.Unix(sec, nsec).UTC()
	nsec         int32
	capLen, wire uint32 // CaptureInfo.CaptureLength and Length (uint32 in both formats)
	iface        uint32 // CaptureInfo.InterfaceIndex
	off, n       int    // a packet can be larger than 2 GiB in a crafted file
	lt           layers.LinkType
}

func packPacket(lt layers.LinkType, ci *gopacket.CaptureInfo, off, n int) packedPacket {
	return packedPacket{sec: ci.Timestamp.Unix(), nsec: int32(ci.Timestamp.Nanosecond()),
		capLen: uint32(ci.CaptureLength), wire: uint32(ci.Length), iface: uint32(ci.InterfaceIndex),
		off: off, n: n, lt: lt}
}

// info is the packet's CaptureInfo, as the reader gave it.
func (p *packedPacket) info() gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: time.Unix(p.sec, int64(p.nsec)).UTC(),
		CaptureLength: int(p.capLen), Length: int(p.wire), InterfaceIndex: int(p.iface)}
}

// read merges the files by timestamp into batches sent on full, taking
// empty ones from free, until every file ends or stop closes. It closes
// full when done. It touches only the readers, never the Assembler.
func (fs *Files) read(full, free chan *batch, stop chan struct{}) {
	defer close(full)
	var b *batch
	take := func() bool {
		select {
		case b = <-free:
			return true
		case <-stop:
			return false
		}
	}
	send := func() bool {
		select {
		case full <- b:
			b = nil
			return true
		case <-stop:
			return false
		}
	}
	if !take() {
		return
	}
	for _, r := range fs.readers {
		if r.next(); r.done {
			b.done = append(b.done, r)
		}
	}
	for {
		r := fs.earliest()
		if r == nil {
			break
		}
		if len(b.pkts) == batchPackets || (len(b.buf)+len(r.data) > batchBytes && len(b.pkts) > 0) {
			if !send() || !take() {
				return
			}
		}
		off := len(b.buf)
		b.buf = append(b.buf, r.data...)
		b.pkts = append(b.pkts, packPacket(r.lt, &r.ci, off, len(r.data)))
		if r.next(); r.done {
			b.done = append(b.done, r)
		}
	}
	if len(b.pkts) > 0 || len(b.done) > 0 {
		send()
	}
}

// earliest returns the reader whose next packet is the oldest, nil when
// all are done. There are few files, so a scan beats a heap.
func (fs *Files) earliest() *fileReader {
	var best *fileReader
	for _, r := range fs.readers {
		if !r.done && (best == nil || r.ci.Timestamp.Before(best.ci.Timestamp)) {
			best = r
		}
	}
	return best
}

// fileDone counts a file that just ended.
func (fs *Files) fileDone(r *fileReader) {
	if !r.done {
		return
	}
	st := &fs.asm.st
	st.FilesRead++
	if r.cut {
		st.FilesTruncated++
	}
	r.damage = r.rs.dmg
	if r.records > 0 {
		r.span = FileSpan{Path: r.path, First: r.lo, Last: r.hi}
	}
	st.OrigLenShort += uint64(r.damage.origShort)
	if r.damage.resyncs > 0 {
		st.FilesResynced++
		st.FileBytesSkipped += uint64(r.damage.skipped)
	}
}

// FileDamage is what Run skipped of one damaged capture file.
type FileDamage struct {
	Path string
	// Offset is where the first damaged record starts, in bytes from the
	// start of the file (of its decompressed bytes, for a gzipped file).
	Offset int64
	// Resyncs counts the places of damage: at each, a damaged record was
	// skipped with the bytes after it, up to the next plausible record.
	Resyncs int
	// Skipped counts the bytes skipped, damaged records included.
	Skipped int64
}

// Damage lists the files Run read to their end past damage, in the order
// they were given. Call it after Run returns, from the same goroutine.
func (fs *Files) Damage() []FileDamage {
	var out []FileDamage
	for _, r := range fs.readers {
		if d := r.damage; d.resyncs > 0 {
			out = append(out, FileDamage{Path: r.path, Offset: d.at, Resyncs: d.resyncs, Skipped: d.skipped})
		}
	}
	return out
}

// FileQuirk is a file's records that Run read otherwise than their headers
// say, as tshark reads them: not damage.
type FileQuirk struct {
	Path string
	// OrigLenShort counts the records whose original length is below
	// their captured length (a quirk of some writers): read with the
	// captured length.
	OrigLenShort int
}

// Quirks lists the files with such records, in the order they were
// given. Call it after Run returns, from the same goroutine.
func (fs *Files) Quirks() []FileQuirk {
	var out []FileQuirk
	for _, r := range fs.readers {
		if n := r.damage.origShort; n > 0 {
			out = append(out, FileQuirk{Path: r.path, OrigLenShort: n})
		}
	}
	return out
}

// FileSpan is the time a capture file covers: its earliest and latest
// packet times.
type FileSpan struct {
	Path        string
	First, Last time.Time
}

// Apart returns, when the files were not captured together, the first
// stretch of time longer than minGap that none of them covers, between
// two of them: before is the file that covered the time up to it, after
// the one that covers the time from it. Files with no packet do not
// count; ok is false when there is no such stretch (one file, files that
// overlap, or rotated files that follow each other). Call it after Run
// returns, from the same goroutine.
func (fs *Files) Apart(minGap time.Duration) (before, after FileSpan, ok bool) {
	var spans []FileSpan
	for _, r := range fs.readers {
		if r.span.Path != "" {
			spans = append(spans, r.span)
		}
	}
	slices.SortStableFunc(spans, func(a, b FileSpan) int { return a.First.Compare(b.First) })
	for i := 1; i < len(spans); i++ {
		// before: of the files so far, the one that ends last.
		if i == 1 || spans[i-1].Last.After(before.Last) {
			before = spans[i-1]
		}
		if spans[i].First.Sub(before.Last) > minGap {
			return before, spans[i], true
		}
	}
	return FileSpan{}, FileSpan{}, false
}

// Stats returns the counters so far; see Source.
func (fs *Files) Stats() Stats { return fs.asm.Stats() }

// Close closes the files. Run does it when it returns; call it when a
// Files is opened but never run.
func (fs *Files) Close() error {
	var errs []error
	for _, r := range fs.readers {
		if r.f != nil {
			errs = append(errs, r.f.Close())
			r.f = nil
		}
	}
	return errors.Join(errs...)
}
