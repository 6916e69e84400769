package captest

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

var captures = []string{"group.pcapng", "lossy.pcapng"}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// packet is one record as read back.
type packet struct {
	ci   gopacket.CaptureInfo
	lt   layers.LinkType
	data []byte
}

// readAll reads every record of a pcap or pcapng capture.
func readAll(t *testing.T, b []byte) []packet {
	t.Helper()
	f, err := readCapture(b, "test")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]packet, len(f.recs))
	for i, r := range f.recs {
		out[i] = packet{r.ci, r.link, r.data}
	}
	return out
}

// toPcap converts a pcapng capture of one link type to classic pcap.
func toPcap(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := ToPcap(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDrop(t *testing.T) {
	for _, name := range captures {
		for _, format := range []string{"pcapng", "pcap"} {
			t.Run(name+"/"+format, func(t *testing.T) {
				src := readTestdata(t, name)
				if format == "pcap" {
					src = toPcap(t, src)
				}
				orig := readAll(t, src)
				const frac = 0.1
				d, err := Drop(src, frac, 1)
				if err != nil {
					t.Fatal(err)
				}
				again, err := DropData(src, frac, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(d.Data, again) {
					t.Error("the same seed gave different output")
				}
				other, err := DropData(src, frac, 2)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(d.Data, other) {
					t.Error("seeds 1 and 2 gave the same output")
				}
				if d.Packets != len(orig) {
					t.Errorf("packets = %d, want %d", d.Packets, len(orig))
				}
				// Binomial: 4 standard deviations either side.
				want := frac * float64(d.Candidates)
				if sd := math.Sqrt(want * (1 - frac)); math.Abs(float64(d.Dropped)-want) > 4*sd+1 {
					t.Errorf("dropped %d of %d data packets, want about %.0f", d.Dropped, d.Candidates, want)
				}
				if d.Dropped == 0 {
					t.Error("nothing dropped")
				}
				got := readAll(t, d.Data)
				if len(got) != len(orig)-d.Dropped {
					t.Fatalf("read back %d packets, want %d", len(got), len(orig)-d.Dropped)
				}
				// What is kept is the original, in order, minus data
				// segments only.
				i := 0
				for _, p := range orig {
					if i < len(got) && bytes.Equal(got[i].data, p.data) && got[i].ci.Timestamp.Equal(p.ci.Timestamp) && got[i].lt == p.lt {
						i++
						continue
					}
					if !hasTCPPayload(p.lt, p.data) {
						t.Fatalf("packet at %v without payload was dropped", p.ci.Timestamp)
					}
				}
				if i != len(got) {
					t.Errorf("only %d of %d kept packets match the original in order", i, len(got))
				}
			})
		}
	}
}

func TestDropNothing(t *testing.T) {
	src := readTestdata(t, "group.pcapng")
	d, err := Drop(src, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if d.Dropped != 0 || len(readAll(t, d.Data)) != d.Packets {
		t.Errorf("frac 0: dropped %d, read back %d of %d", d.Dropped, len(readAll(t, d.Data)), d.Packets)
	}
}

func TestDropNotACapture(t *testing.T) {
	for _, src := range [][]byte{nil, []byte("abc"), []byte("not a capture file at all")} {
		if _, err := Drop(src, 0.5, 1); err == nil {
			t.Errorf("Drop(%q): no error", src)
		}
	}
}

func TestFlipBytes(t *testing.T) {
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			src := readTestdata(t, name)
			orig := bytes.Clone(src)
			const frac = 0.002
			got := FlipBytes(src, frac, 1)
			if !bytes.Equal(src, orig) {
				t.Fatal("FlipBytes changed its input")
			}
			if len(got) != len(src) {
				t.Fatalf("len = %d, want %d", len(got), len(src))
			}
			if !bytes.Equal(got, FlipBytes(src, frac, 1)) {
				t.Error("the same seed gave different output")
			}
			if bytes.Equal(got, FlipBytes(src, frac, 2)) {
				t.Error("seeds 1 and 2 gave the same output")
			}
			if !bytes.Equal(got[:FileHeaderBytes], src[:FileHeaderBytes]) {
				t.Error("the file header was changed")
			}
			diff := 0
			for i := range got {
				if got[i] != src[i] {
					diff++
				}
			}
			if want := int(math.Round(frac * float64(len(src)))); diff != want {
				t.Errorf("%d bytes differ, want %d", diff, want)
			}
			// Still recognised as a capture.
			if _, err := pcapgo.NewNgReader(bytes.NewReader(got), pcapgo.DefaultNgReaderOptions); err != nil {
				t.Errorf("flipped file not recognised: %v", err)
			}
		})
	}
}

func TestFlipBytesSmall(t *testing.T) {
	tests := []struct {
		name string
		n    int
		frac float64
		want int // bytes changed
	}{
		{"empty", 0, 0.5, 0},
		{"header only", FileHeaderBytes, 1, 0},
		{"all past the header", FileHeaderBytes + 10, 1, 10},
		{"none", 1000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := make([]byte, tt.n)
			got := FlipBytes(src, tt.frac, 3)
			diff := 0
			for _, b := range got {
				if b != 0 {
					diff++
				}
			}
			if diff != tt.want {
				t.Errorf("%d bytes changed, want %d", diff, tt.want)
			}
		})
	}
}

func TestToPcap(t *testing.T) {
	src := readTestdata(t, "group.pcapng")
	b, err := ToPcap(src)
	if err != nil {
		t.Fatal(err)
	}
	want, got := readAll(t, src), readAll(t, b)
	if len(got) != len(want) {
		t.Fatalf("%d packets, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].data, want[i].data) || !got[i].ci.Timestamp.Equal(want[i].ci.Timestamp) || got[i].lt != want[i].lt {
			t.Fatalf("packet %d differs", i+1)
		}
	}
	again, err := ToPcap(b)
	if err != nil || !bytes.Equal(again, b) {
		t.Errorf("ToPcap of a pcap: changed it (err %v)", err)
	}
}

func TestSpareFraming(t *testing.T) {
	for _, format := range []string{"pcapng", "pcap"} {
		t.Run(format, func(t *testing.T) {
			src := readTestdata(t, "group.pcapng")
			if format == "pcap" {
				src = toPcap(t, src)
			}
			damaged := FlipBytes(src, 0.01, 1)
			spared, err := SpareFraming(src, damaged)
			if err != nil {
				t.Fatal(err)
			}
			// The framing is intact: every record reads back, each frame
			// as damaged.
			orig, got := readAll(t, src), readAll(t, spared)
			if len(got) != len(orig) {
				t.Fatalf("%d packets, want %d", len(got), len(orig))
			}
			changed := 0
			for i := range orig {
				if !got[i].ci.Timestamp.Equal(orig[i].ci.Timestamp) || len(got[i].data) != len(orig[i].data) {
					t.Fatalf("packet %d: framing changed", i+1)
				}
				if !bytes.Equal(got[i].data, orig[i].data) {
					changed++
				}
			}
			if changed == 0 {
				t.Error("no frame kept its damage")
			}
			if _, err := SpareFraming(src, src[:len(src)-1]); err == nil {
				t.Error("lengths differ: no error")
			}
		})
	}
}
