package capture

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/kwire/kwire/internal/captest"
)

// readAllPackets reads file through a fileReader, the fast reading of
// packet blocks on or off, and describes every packet and how reading
// ended; fast counts the packets read the fast way.
func readAllPackets(t testing.TB, file []byte, bufSize int, noFast bool) (out []string, fast int) {
	r := &fileReader{path: "f", noFast: noFast}
	if err := r.open(bufio.NewReaderSize(bytes.NewReader(file), bufSize), false); err != nil {
		return []string{"open: " + err.Error()}, 0
	}
	for r.next(); !r.done; r.next() {
		ci := r.ci
		out = append(out, fmt.Sprintf("%d %s cap=%d len=%d if=%d lt=%d data=%x", r.records, ci.Timestamp.Format("2006-01-02T15:04:05.999999999Z07:00"),
			ci.CaptureLength, ci.Length, ci.InterfaceIndex, r.lt, r.data))
	}
	if r.fast != nil {
		fast = r.fast.packets
	}
	d := r.rs.dmg
	return append(out, fmt.Sprintf("end: records=%d cut=%v err=%v damage=%+v", r.records, r.cut, r.err, d)), fast
}

// FuzzFastReader reads any file with pcapgo alone and with the fast
// reading of plain packet blocks beside it (file_fast.go), through read
// buffers of 4 KiB to 64 KiB: every packet (bytes, time, lengths,
// interface, link type) and the way reading ends (records, cut, error,
// damage skipped) must be the same.
func FuzzFastReader(f *testing.F) {
	for _, s := range fastReaderSeeds(f) {
		f.Add(uint8(0), s)
	}
	f.Fuzz(func(t *testing.T, size uint8, file []byte) {
		bufSize := 4096 << (size % 5)
		want, _ := readAllPackets(t, file, bufSize, true)
		got, _ := readAllPackets(t, file, bufSize, false)
		for i := range min(len(want), len(got)) {
			if want[i] != got[i] {
				t.Fatalf("packet %d:\n pcapgo %s\n fast   %s", i+1, want[i], got[i])
			}
		}
		if len(want) != len(got) {
			t.Fatalf("pcapgo read %d packets, fast %d", len(want)-1, len(got)-1)
		}
	})
}

// fastReaderSeeds are FuzzReader's, and pcapng files: written by pcapgo
// (two interfaces, a nanosecond and a binary resolution, an offset), the
// start of committed captures (cut inside a block) and damaged copies of
// them, as pcapng and as pcap.
func fastReaderSeeds(tb testing.TB) [][]byte {
	conv := conversation(false)
	seeds := append(readerSeeds(tb),
		ngFile(tb, []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL2}, conv),
		ngResolution(tb, 9, 0, conv),
		ngResolution(tb, 0x80|20, 1<<33, conv))
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.pcapng"))
	for i, name := range files {
		if i%6 != 0 {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		cut := b[:min(len(b), 6000)]
		seeds = append(seeds, cut, captest.FlipBytes(cut, 0.003, uint64(i)))
		if p, err := captest.ToPcap(b); err == nil {
			cut = p[:min(len(p), 6000)]
			seeds = append(seeds, cut, captest.FlipBytes(cut, 0.003, uint64(i)))
		}
	}
	return seeds
}

// ngResolution is a pcapng file of segs on one Ethernet interface whose
// timestamps have resolution res (if_tsresol) and offset off (seconds).
func ngResolution(tb testing.TB, res uint8, off uint64, segs []seg) []byte {
	var b bytes.Buffer
	in := pcapgo.NgInterface{LinkType: layers.LinkTypeEthernet, SnapLength: 262144,
		TimestampResolution: pcapgo.NgResolution(res), TimestampOffset: off}
	w, err := pcapgo.NewNgWriterInterface(&b, in, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		tb.Fatal(err)
	}
	for i, s := range segs {
		s.id = uint16(i + 1)
		data := frame(tb, layers.LinkTypeEthernet, s, 0)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// TestFastReaderCaptures reads every committed capture, and damaged and
// lossy copies, as pcapng and as pcap, both ways: FuzzFastReader's check
// on whole files.
func TestFastReaderCaptures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.pcapng"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in ../testdata (%v)", err)
	}
	fast, all := 0, 0
	defer func() {
		t.Logf("%d packets, %d of them read the fast way", all, fast)
		if fast == 0 || fast == all {
			t.Errorf("%d of %d packets fast: both ways must be exercised", fast, all)
		}
	}()
	for i, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		variants := map[string][]byte{"clean": src, "flipped": captest.FlipBytes(src, 0.002, uint64(i))}
		if d, err := captest.DropData(src, 0.05, uint64(i)); err == nil {
			variants["dropped"] = d
		}
		if p, err := captest.ToPcap(src); err == nil {
			variants["pcap"], variants["pcap-flipped"] = p, captest.FlipBytes(p, 0.002, uint64(i))
		}
		for v, b := range variants {
			t.Run(filepath.Base(name)+"/"+v, func(t *testing.T) {
				want, _ := readAllPackets(t, b, readBufferSize, true)
				got, n := readAllPackets(t, b, readBufferSize, false)
				fast, all = fast+n, all+len(want)-1
				if len(want) != len(got) {
					t.Fatalf("pcapgo read %d packets, fast %d", len(want)-1, len(got)-1)
				}
				for i := range want {
					if want[i] != got[i] {
						t.Fatalf("packet %d:\n pcapgo %s\n fast   %s", i+1, want[i], got[i])
					}
				}
			})
		}
	}
}
