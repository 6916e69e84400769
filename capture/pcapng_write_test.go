package capture

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	w, err := CreatePcapng(filepath.Join(dir, "out.pcapng"), "test0", &Rotation{Bytes: 100})
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

// TestPcapngRotationCap: with Rotation.Keep and MaxAge, the oldest files
// the writer finished are deleted (tcpdump's -W), whatever else is in the
// directory is not, and a file the operator deleted first is no error.
// Every packet starts a new file (Bytes: 1); the clock moves a minute
// between packets.
func TestPcapngRotationCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keep    int
		maxAge  time.Duration
		packets int
		later   time.Duration // then the clock moves this far and Flush runs
		want    []int         // files left: 0 is out.pcapng, n out.n.pcapng
	}{
		{"no cap", 0, 0, 6, time.Hour, []int{0, 1, 2, 3, 4, 5}},
		{"keep 3", 3, 0, 10, 0, []int{7, 8, 9}},
		{"keep 1", 1, 0, 4, 0, []int{3}},
		// Finished at minutes 1..4; at minute 4, those of minutes 1 and
		// 2 are 90 s old or more.
		{"max age", 0, 90 * time.Second, 5, 0, []int{2, 3, 4}},
		{"max age, later", 0, 90 * time.Second, 5, 10 * time.Minute, []int{4}},
		{"keep and max age", 2, 90 * time.Second, 5, 0, []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantFile(t, filepath.Join(dir, "notes.txt"), "not the writer's\n")
			now := base
			w, err := CreatePcapng(filepath.Join(dir, "out.pcapng"), "test0",
				&Rotation{Bytes: 1, Keep: tc.keep, MaxAge: tc.maxAge, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.packets {
				if i == 1 && tc.want[0] != 0 {
					os.Remove(filepath.Join(dir, "out.pcapng")) // the operator was first: no error
				}
				writeSomePackets(t, w, 1)
				now = now.Add(time.Minute)
			}
			now = now.Add(tc.later - time.Minute)
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := []string{"notes.txt"}
			for _, n := range tc.want {
				want = append(want, filepath.Base(numberedOrFirst(filepath.Join(dir, "out.pcapng"), n)))
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			slices.Sort(got)
			slices.Sort(want)
			if d := diffLines(want, got); d != "" {
				t.Errorf("files in the directory (-want +got):\n%s", d)
			}
			if len(w.Files()) != len(tc.want) || w.Deleted() != tc.packets-len(tc.want) {
				t.Errorf("Files %v, Deleted %d: want %d files kept, %d deleted", w.Files(), w.Deleted(), len(tc.want), tc.packets-len(tc.want))
			}
		})
	}
}

// numberedOrFirst is the name of the writer's file n of path.
func numberedOrFirst(path string, n int) string {
	if n == 0 {
		return path
	}
	return numbered(path, n)
}
