package capture

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/kwire/kwire/internal/captest"
)

// benchCapture writes a pcap of about size bytes into dir: conns
// connections (Ethernet framing, as Linux captures lo) sending segments of
// payload bytes in turn, every tenth one answered by a small segment the
// other way.
func benchCapture(b *testing.B, dir string, size, conns, payload int) string {
	b.Helper()
	path := filepath.Join(dir, "bench.pcap")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		b.Fatal(err)
	}
	big, small := make([]byte, payload), []byte("ack-ish response")
	for i := range big {
		big[i] = byte(i)
	}
	seqs := make([][2]uint32, conns)
	at := time.Duration(0)
	write := func(s seg, data []byte) {
		s.data = string(data)
		frameBytes := frame(b, layers.LinkTypeEthernet, s, 0)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(at), CaptureLength: len(frameBytes), Length: len(frameBytes)}
		if err := w.WritePacket(ci, frameBytes); err != nil {
			b.Fatal(err)
		}
		at += 20 * time.Microsecond
	}
	for n, written := 0, 0; written < size; n++ {
		c := n % conns
		write(seg{c: c, seq: seqs[c][0], flags: "PA", id: uint16(n)}, big)
		seqs[c][0] += uint32(payload)
		written += payload
		if n%10 == 0 {
			write(seg{c: c, toCli: true, seq: seqs[c][1], flags: "PA", id: uint16(n)}, small)
			seqs[c][1] += uint32(len(small))
		}
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkFiles measures Files alone (no-op sink) on a ~200 MB capture
// of 4 connections: loopback-like 64 KiB segments (65483 bytes: the lo MTU
// minus IPv4, TCP and timestamp headers), and Ethernet-MTU segments for
// the per-packet cost.
func BenchmarkFiles(b *testing.B) {
	for _, bc := range []struct {
		name    string
		payload int
	}{{"seg=64KiB", 65483}, {"seg=1448", 1448}} {
		b.Run(bc.name, func(b *testing.B) {
			path := benchCapture(b, b.TempDir(), 200<<20, 4, bc.payload)
			benchFile(b, path)
		})
	}
}

func benchFile(b *testing.B, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	sink := SinkFunc(func(*Chunk) {})
	b.ResetTimer()
	for b.Loop() {
		fs, err := OpenFiles([]string{path}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := fs.Run(context.Background(), sink); err != nil {
			b.Fatal(err)
		}
		if st := fs.Stats(); st.Gaps != 0 || st.DeliveredBytes < uint64(fi.Size())*8/10 {
			b.Fatalf("stats %+v: want no gaps and most bytes delivered", st)
		}
	}
}

// BenchmarkFileRead measures reading the records of the capture named by
// KWIRE_BENCH_CAPTURE (make bench-capture writes one), the work of Files'
// reading goroutine: with pcapgo alone, and with the fast reading of
// plain packet blocks beside it (file_fast.go).
func BenchmarkFileRead(b *testing.B) {
	path := os.Getenv("KWIRE_BENCH_CAPTURE")
	if path == "" {
		b.Skip("KWIRE_BENCH_CAPTURE is not set: run `make bench` (or `make bench-capture` and point it at the file)")
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Skipf("KWIRE_BENCH_CAPTURE=%s: %v", path, err)
	}
	for _, bc := range []struct {
		name   string
		noFast bool
	}{{"reader=pcapgo", true}, {"reader=fast", false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(fi.Size())
			for b.Loop() {
				r, err := openFile(path, bc.noFast)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for r.next(); !r.done; r.next() {
					n += len(r.data)
				}
				r.f.Close()
				if r.err != nil || n == 0 {
					b.Fatalf("read %d bytes: %v", n, r.err)
				}
			}
		})
	}
}

// BenchmarkFilesTestdata measures Files (no-op sink) on real captures of
// the testdata directory, as captured and with one feed 5 ms late
// (captest.CrossReorder: the chunks that acknowledge bytes not yet
// captured are held).
func BenchmarkFilesTestdata(b *testing.B) {
	for _, name := range []string{"g_848", "compress"} {
		src, err := os.ReadFile(filepath.Join("..", "testdata", name+".pcapng"))
		if err != nil {
			b.Fatal(err)
		}
		for _, skew := range []bool{false, true} {
			data := src
			if skew {
				r, err := captest.Reorder(src, &captest.CrossReorder, 1)
				if err != nil {
					b.Fatal(err)
				}
				data = r.Data
			}
			b.Run(fmt.Sprintf("capture=%s/skew=%v", name, skew), func(b *testing.B) {
				path := filepath.Join(b.TempDir(), name+".pcapng")
				if err := os.WriteFile(path, data, 0o600); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(data)))
				sink := SinkFunc(func(*Chunk) {})
				for b.Loop() {
					fs, err := OpenFiles([]string{path}, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := fs.Run(context.Background(), sink); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAssemblerTestdata measures the Assembler alone (packets in
// memory, no-op sink, one goroutine) on the captures of
// BenchmarkFilesTestdata: the per-packet cost of reassembly, with and
// without one feed late.
func BenchmarkAssemblerTestdata(b *testing.B) {
	for _, name := range []string{"g_848", "compress"} {
		src, err := os.ReadFile(filepath.Join("..", "testdata", name+".pcapng"))
		if err != nil {
			b.Fatal(err)
		}
		for _, skew := range []bool{false, true} {
			data := src
			if skew {
				r, err := captest.Reorder(src, &captest.CrossReorder, 1)
				if err != nil {
					b.Fatal(err)
				}
				data = r.Data
			}
			r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
			if err != nil {
				b.Fatal(err)
			}
			type packet struct {
				data []byte
				ci   gopacket.CaptureInfo
			}
			var pkts []packet
			n := 0
			for {
				d, ci, err := r.ReadPacketData()
				if err != nil {
					break
				}
				pkts = append(pkts, packet{d, ci})
				n += len(d)
			}
			lt := r.LinkType()
			b.Run(fmt.Sprintf("capture=%s/skew=%v", name, skew), func(b *testing.B) {
				b.SetBytes(int64(n))
				sink := SinkFunc(func(*Chunk) {})
				for b.Loop() {
					a := NewAssembler(nil, sink)
					for _, p := range pkts {
						a.Packet(lt, p.data, p.ci)
					}
					a.Close()
				}
			})
		}
	}
}
