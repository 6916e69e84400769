package capture

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestPcapngWriter writes a conversation as raw IP and Ethernet frames,
// rotating files, and reads the files back: the same chunks as from the
// frames themselves.
func TestPcapngWriter(t *testing.T) {
	segs := []seg{
		{at: 0, flags: "S", seq: 99},
		{at: 1, toCli: true, flags: "SA", seq: 499},
		{at: 2, flags: "PA", seq: 100, data: "hello"},
		{at: 3, toCli: true, flags: "PA", seq: 500, data: "world"},
		{at: 4, v6: true, flags: "PA", seq: 7, data: "six"},
		{at: 5, flags: "FA", seq: 105},
		{at: 6, toCli: true, flags: "FA", seq: 505},
	}
	dir := t.TempDir()
	w, err := CreatePcapng(filepath.Join(dir, "out.pcapng"), "test0", 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		s.id = uint16(i + 1)
		lt := layers.LinkTypeRaw
		if i%2 == 1 {
			lt = layers.LinkTypeEthernet // a second interface block
		}
		data := frame(t, lt, s, 0)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(data), Length: len(data), InterfaceIndex: 7}
		if err := w.WritePacket(lt, ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := w.Files()
	if len(files) < 3 || files[1] != filepath.Join(dir, "out.1.pcapng") {
		t.Errorf("files %v: want rotation to out.1.pcapng, ...", files)
	}
	want := &recorder{}
	if _, err := runFiles(t, nil, want, pcapFile(t, layers.LinkTypeRaw, 0, segs...)); err != nil {
		t.Fatal(err)
	}
	fs, err := OpenFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := &recorder{}
	if err := fs.Run(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if d := diffLines(want.lines(true), got.lines(true)); d != "" {
		t.Errorf("read back (-want +got):\n%s", d)
	}
}
