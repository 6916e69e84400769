package capture

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestPcapngWriterRefuses: a capture file (raw payloads, SASL PLAIN
// passwords) is created 0600, and never through a symbolic link planted
// where it goes, nor over a file already there, rotated files included;
// before, -w truncated and wrote whatever the path led to, 0644.
func TestPcapngWriterRefuses(t *testing.T) {
	const victimText = "the victim's own data\n"
	for _, tc := range []struct {
		name   string
		plant  func(t *testing.T, dir, victim string) // before the writer is created
		rotate int64
		want   string // in the error; "" for none
	}{
		{"new file", nil, 0, ""},
		{"symlink", func(t *testing.T, dir, victim string) { plantLink(t, victim, filepath.Join(dir, "out.pcapng")) }, 0,
			"out.pcapng is a symbolic link (to VICTIM), and kwire never writes a capture through a link"},
		{"dangling symlink", func(t *testing.T, dir, victim string) {
			plantLink(t, filepath.Join(dir, "nowhere"), filepath.Join(dir, "out.pcapng"))
		}, 0, "out.pcapng is a symbolic link"},
		{"existing file", func(t *testing.T, dir, victim string) { plantFile(t, filepath.Join(dir, "out.pcapng"), "old") }, 0,
			"out.pcapng already exists, and kwire never overwrites"},
		{"stale rotated file", func(t *testing.T, dir, victim string) { plantLink(t, victim, filepath.Join(dir, "out.2.pcapng")) }, 100,
			"out.2.pcapng already exists (from an earlier capture?), and --rotate-mb would write"},
		{"rotation", nil, 100, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			plantFile(t, victim, victimText)
			if tc.plant != nil {
				tc.plant(t, dir, victim)
			}
			w, err := CreatePcapng(filepath.Join(dir, "out.pcapng"), "test0", &Rotation{Bytes: tc.rotate})
			if tc.want != "" {
				want := strings.ReplaceAll(tc.want, "VICTIM", victim)
				if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrPcapngExists) {
					t.Errorf("error %v, want one with %q wrapping ErrPcapngExists", err, want)
				}
				if w != nil {
					w.Close()
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				writeSomePackets(t, w, 6)
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if tc.rotate > 0 && len(w.Files()) < 2 {
					t.Fatalf("files %v: the test wants rotation", w.Files())
				}
				for _, f := range w.Files() {
					fi, err := os.Lstat(f)
					if err != nil {
						t.Fatal(err)
					}
					if got := fi.Mode(); got != 0o600 {
						t.Errorf("%s: mode %v, want -rw------- (0600)", filepath.Base(f), got)
					}
				}
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != victimText {
				t.Errorf("the link's target now holds %q (%v), want it untouched", b, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a dangling link's target was created (%v)", err)
			}
		})
	}
}

// TestPcapngRotateRefusesLink: a link planted during the capture, where
// the next rotated file goes, stops the writing with an error; the
// capture never writes through it.
func TestPcapngRotateRefusesLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	plantFile(t, victim, "mine")
	w, err := CreatePcapng(filepath.Join(dir, "out.pcapng"), "test0", &Rotation{Bytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	plantLink(t, victim, filepath.Join(dir, "out.1.pcapng"))
	err = nil
	for i := 0; i < 20 && err == nil; i++ {
		err = w.WritePacket(layers.LinkTypeRaw, gopacket.CaptureInfo{Timestamp: base}, make([]byte, 60))
	}
	if !errors.Is(err, ErrPcapngExists) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("rotating onto a link: error %v, want one saying it is a symbolic link", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "mine" {
		t.Errorf("the link's target now holds %q", b)
	}
}

// writeSomePackets writes n small raw-IP packets to w.
func writeSomePackets(t *testing.T, w *PcapngWriter, n int) {
	t.Helper()
	for i := range n {
		s := seg{at: 0, flags: "PA", seq: uint32(100 + 5*i), data: "hello", id: uint16(i + 1)}
		data := frame(t, layers.LinkTypeRaw, s, 0)
		if err := w.WritePacket(layers.LinkTypeRaw, gopacket.CaptureInfo{Timestamp: base.Add(s.at), Length: len(data)}, data); err != nil {
			t.Fatal(err)
		}
	}
}

func plantLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func plantFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
