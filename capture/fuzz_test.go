package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// FuzzReader reads arbitrary bytes as a capture file, as `kwire read`
// does: pcap, pcapng or gzip, damaged anywhere. The bytes go through the
// reader OpenFiles sets up (format detection, pcapgo, gzip) and Files.Run
// into the Assembler; only os.Open and the 1 MiB read-ahead are left out,
// to keep executions fast (TestReaderSeeds runs the seeds through
// OpenFiles itself). The Sink ignores some connections and swaps the
// sides of some guessed ones, as the decoder does.
//
// Invariants: no panic; opening and Run either succeed or return an error
// that names the file; every chunk's direction, kind and lengths are
// valid; nothing follows a direction's Close, and every connection that
// got a chunk gets exactly one Close per direction; the counters add up
// (each packet in exactly one class, no connection left open,
// DeliveredBytes the sum of the Data delivered, the file counted as read).
func FuzzReader(f *testing.F) {
	for _, s := range readerSeeds(f) {
		f.Add(s)
	}
	const path = "fuzz.pcap"
	f.Fuzz(func(t *testing.T, file []byte) {
		r := &fileReader{path: path}
		if err := r.open(bufio.NewReaderSize(bytes.NewReader(file), 4096), false); err != nil {
			return // open errors are wrapped with the path by openFile
		}
		// Small caps, so that the fuzzer reaches them.
		opts := &Options{Ports: brokerPort, MaxConns: 8, MaxBufferedPagesPerConn: 4, MaxBufferedPagesTotal: 16}
		fs := &Files{readers: []*fileReader{r}, asm: NewAssembler(opts, nil)}
		chk := &chunkChecker{t: t, dirs: map[*Conn]*[2]dirState{}}
		if err := fs.Run(context.Background(), chk); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("Run error does not name the file: %v", err)
		}
		chk.done(fs.Stats())
	})
}

// dirState is what chunkChecker knows of one direction.
type dirState struct {
	closed bool
	data   uint64
}

// chunkChecker is a Sink that checks the chunk contract as chunks arrive.
type chunkChecker struct {
	t         *testing.T
	dirs      map[*Conn]*[2]dirState
	delivered uint64
}

func (k *chunkChecker) Chunk(c *Chunk) {
	t := k.t
	if c.Conn == nil || c.Dir > ToClient || c.Kind > Close {
		t.Fatalf("bad chunk %+v", c)
	}
	d := k.dirs[c.Conn]
	if d == nil {
		if c.Conn.ID == 0 || !c.Conn.Client.IsValid() || !c.Conn.Server.IsValid() {
			t.Fatalf("bad conn %+v", c.Conn)
		}
		d = new([2]dirState)
		k.dirs[c.Conn] = d
		// Act as the decoder may, after this chunk: ignore some
		// connections, swap the sides of some guessed ones.
		defer func() {
			switch {
			case c.Conn.ID%5 == 1:
				c.Conn.Ignore = true
			case c.Conn.ID%5 == 2 && c.Conn.Role == RoleGuess:
				// Directions are relative to the sides: what was
				// ToServer is ToClient from now on.
				c.Conn.Swap()
				d[0], d[1] = d[1], d[0]
			}
		}()
	}
	s := &d[c.Dir]
	if s.closed {
		t.Fatalf("conn %d %s: %v chunk after close", c.Conn.ID, c.Dir, c.Kind)
	}
	switch c.Kind {
	case Data:
		if len(c.Data) == 0 {
			t.Fatalf("conn %d %s: empty data chunk", c.Conn.ID, c.Dir)
		}
		if c.Conn.Ignore {
			t.Fatalf("conn %d %s: data for an ignored connection", c.Conn.ID, c.Dir)
		}
		s.data += uint64(len(c.Data))
		k.delivered += uint64(len(c.Data))
	case Gap:
		if c.Len == 0 || c.Len < -1 {
			t.Fatalf("conn %d %s: gap of %d bytes", c.Conn.ID, c.Dir, c.Len)
		}
	case Close:
		if c.Reason > CloseEvict {
			t.Fatalf("conn %d %s: close reason %d", c.Conn.ID, c.Dir, c.Reason)
		}
		s.closed = true
	}
}

// done checks the end of a run: every direction closed, counters coherent.
func (k *chunkChecker) done(st Stats) {
	t := k.t
	for c, d := range k.dirs {
		if !d[0].closed || !d[1].closed {
			t.Errorf("conn %d: a direction was never closed (%+v)", c.ID, *d)
		}
	}
	if n := st.TCPPackets + st.SkippedNonIP + st.SkippedNonTCP + st.Fragments + st.Undecodable; n != st.Packets {
		t.Errorf("packets %d, but the classes add up to %d: %+v", st.Packets, n, st)
	}
	if st.ConnsOpen != 0 || uint64(len(k.dirs)) > st.ConnsSeen {
		t.Errorf("conns_open %d (want 0), conns_seen %d, conns with chunks %d", st.ConnsOpen, st.ConnsSeen, len(k.dirs))
	}
	if st.DeliveredBytes != k.delivered {
		t.Errorf("delivered_bytes %d, sink got %d", st.DeliveredBytes, k.delivered)
	}
	if st.FilesRead != 1 || st.FilesTruncated > 1 {
		t.Errorf("files_read, files_truncated = %d, %d; want 1, at most 1", st.FilesRead, st.FilesTruncated)
	}
}

// readerSeeds are small captures: synthetic conversations of every link
// type and container, damaged ones, and the first packets of committed
// captures (real client bytes), rewritten small.
func readerSeeds(tb testing.TB) [][]byte {
	conv := conversation(false)
	lossy := cat(handshake(1, 0), []seg{
		{at: 1, c: 1, seq: 1, flags: "PA", data: "aaaa"},
		{at: 2, c: 1, seq: 9, flags: "PA", data: "cccc"}, // a gap, then its fill
		{at: 3, c: 1, seq: 5, flags: "PA", data: "bbbb"},
		{at: 4, c: 1, toCli: true, seq: 1, flags: "PA", data: "resp", snap: 2},
		{at: 5, c: 1, seq: 13, flags: "RA"},
	})
	seeds := [][]byte{
		pcapFile(tb, layers.LinkTypeEthernet, 0, conv...),
		pcapFile(tb, layers.LinkTypeEthernet, 2, conversation(true)...),
		pcapFile(tb, layers.LinkTypeLinuxSLL, 0, lossy...),
		pcapFile(tb, layers.LinkTypeLinuxSLL2, 0, conv...),
		pcapFile(tb, layers.LinkTypeNull, 0, lossy...),
		pcapFile(tb, layers.LinkTypeRaw, 0, conversation(true)...),
		ngFile(tb, []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL2}, conv),
		gzBytes(tb, pcapFile(tb, layers.LinkTypeEthernet, 0, conv...)),
	}
	// Damaged: cut inside a record, and a record longer than the file.
	full := pcapFile(tb, layers.LinkTypeEthernet, 0, lossy...)
	seeds = append(seeds, full[:len(full)-9])
	long := append([]byte(nil), full...)
	long[24+8], long[24+9], long[24+10], long[24+11] = 0xff, 0xff, 0xff, 0x0f // caplen of record 1
	seeds = append(seeds, long)
	for _, name := range []string{"group.pcapng", "midstream.pcapng", "sasl.pcapng"} {
		if s := firstPackets(tb, filepath.Join("..", "testdata", name), 12); s != nil {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// firstPackets rewrites the first n packets of a capture (of one link
// type) as a pcap file of at most 512 bytes per packet (the rest cut, as a
// snaplen would).
func firstPackets(tb testing.TB, path string, n int) []byte {
	fs, err := OpenFiles([]string{path}, nil)
	if err != nil {
		return nil
	}
	defer fs.Close()
	r := fs.readers[0]
	var b bytes.Buffer
	w := pcapgo.NewWriterNanos(&b)
	for i := 0; i < n; i++ {
		if r.next(); r.done {
			break
		}
		if i == 0 {
			if err := w.WriteFileHeader(512, r.lt); err != nil {
				tb.Fatal(err)
			}
		}
		ci := r.ci
		data := r.data[:min(len(r.data), 512)]
		ci.CaptureLength, ci.InterfaceIndex, ci.AncillaryData = len(data), 0, nil
		if err := w.WritePacket(ci, data); err != nil {
			tb.Fatal(err)
		}
	}
	return b.Bytes()
}

// ngFile is pcapngFile for any testing.TB: segs through one interface per
// link type, in turn.
func ngFile(tb testing.TB, lts []layers.LinkType, segs []seg) []byte {
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{LinkType: lts[0], SnapLength: 262144}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		tb.Fatal(err)
	}
	for _, lt := range lts[1:] {
		if _, err := w.AddInterface(pcapgo.NgInterface{LinkType: lt, SnapLength: 262144}); err != nil {
			tb.Fatal(err)
		}
	}
	for i, s := range segs {
		s.id = uint16(i + 1)
		data := frame(tb, lts[i%len(lts)], s, 0)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(data), Length: len(data), InterfaceIndex: i % len(lts)}
		if err := w.WritePacket(ci, data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func gzBytes(tb testing.TB, b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return z.Bytes()
}

// TestReaderSeeds checks that the seeds are what they claim: readable
// captures (but the damaged ones) with Kafka-port TCP in them, so that the
// fuzzer starts from the interesting paths.
func TestReaderSeeds(t *testing.T) {
	for i, s := range readerSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			fs, err := OpenFiles([]string{writeTemp(t, "s.pcap", s)}, &Options{Ports: brokerPort})
			if err != nil {
				t.Fatal(err)
			}
			chk := &chunkChecker{t: t, dirs: map[*Conn]*[2]dirState{}}
			err = fs.Run(context.Background(), chk)
			st := fs.Stats()
			chk.done(st)
			if st.TCPPackets == 0 && err == nil {
				t.Errorf("seed %d: no TCP packet: %+v", i, st)
			}
		})
	}
}
