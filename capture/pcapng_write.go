package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// PcapngWriter is a PacketWriter saving packets to a pcapng file, and to
// numbered files after it when RotateBytes is set: cap.pcapng, then
// cap.1.pcapng, cap.2.pcapng... (kwire analyze merges them by time). Each
// link type gets an interface block the first time it is written. It is
// not safe for concurrent use.
type PcapngWriter struct {
	path        string
	iface       string
	rotateBytes int64

	f     *os.File
	bw    *bufio.Writer
	ng    *pcapgo.NgWriter
	ifIDs map[layers.LinkType]int
	size  int64 // bytes of packets in the current file
	files []string
}

// CreatePcapng creates path for writing packets captured on interface
// iface. With rotateBytes > 0, a new file is started once the current one
// holds that many bytes of packets.
//
// A capture holds raw payloads, SASL PLAIN passwords among them: every
// file is created new, readable by its owner only (0600), and never
// through a symbolic link or over an existing file (O_CREAT|O_EXCL): a
// link planted where the capture goes (in /tmp, say) would otherwise send
// it to a file of the planter's choosing, and an existing file would keep
// its owner and mode. The error wraps ErrPcapngExists then. With rotation,
// numbered files left by an earlier run are refused at the start, not
// when the capture reaches them.
func CreatePcapng(path, iface string, rotateBytes int64) (*PcapngWriter, error) {
	w := &PcapngWriter{path: path, iface: iface, rotateBytes: rotateBytes}
	if rotateBytes > 0 {
		if err := checkNumbered(path); err != nil {
			return nil, err
		}
	}
	if err := w.open(path); err != nil {
		return nil, err
	}
	return w, nil
}

// ErrPcapngExists is CreatePcapng's error for a path where a file or a
// symbolic link already is.
var ErrPcapngExists = errors.New("capture file already exists")

// existsError is an error that is ErrPcapngExists, with its own words.
type existsError string

func (e existsError) Error() string        { return string(e) }
func (e existsError) Is(target error) bool { return target == ErrPcapngExists }

// createNew creates path for writing, 0600, failing on anything already
// there: O_EXCL with O_CREAT fails on a symbolic link too, dangling or
// not, instead of following it (POSIX open).
func createNew(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return f, err
	}
	if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return nil, existsError(fmt.Sprintf("%s is a symbolic link (to %s), and kwire never writes a capture through a link "+
			"(it holds payloads and passwords): remove the link or give another path", path, target))
	}
	return nil, existsError(fmt.Sprintf("%s already exists, and kwire never overwrites a file with a capture: remove it or give another path", path))
}

// checkNumbered fails when a numbered file of path (path.1.pcapng...)
// exists: rotation would reach it during the capture.
func checkNumbered(path string) error {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(filepath.Base(path), ext) + "."
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil // creating path says what is wrong
	}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), stem)
		if !ok {
			continue
		}
		if n, ok = strings.CutSuffix(n, ext); !ok || n == "" || strings.Trim(n, "0123456789") != "" {
			continue
		}
		return existsError(fmt.Sprintf("%s already exists (from an earlier capture?), and --rotate-mb would write the numbered files after %s: remove them or give another path",
			filepath.Join(filepath.Dir(path), e.Name()), path))
	}
	return nil
}

func (w *PcapngWriter) open(path string) error {
	f, err := createNew(path)
	if err != nil {
		return err
	}
	w.f, w.bw = f, bufio.NewWriterSize(f, 1<<20)
	w.ng, w.ifIDs, w.size = nil, map[layers.LinkType]int{}, 0
	w.files = append(w.files, path)
	return nil
}

// WritePacket implements PacketWriter.
func (w *PcapngWriter) WritePacket(lt layers.LinkType, ci gopacket.CaptureInfo, data []byte) error {
	if w.f == nil {
		return errors.New("pcapng: write after close")
	}
	if w.rotateBytes > 0 && w.size >= w.rotateBytes {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	id, ok := w.ifIDs[lt]
	if !ok {
		var err error
		if id, err = w.addInterface(lt); err != nil {
			return fmt.Errorf("%s: %w", w.f.Name(), err)
		}
	}
	ci.InterfaceIndex = id
	ci.CaptureLength = len(data)
	ci.AncillaryData = nil
	ci.Length = max(ci.Length, len(data))
	if err := w.ng.WritePacket(ci, data); err != nil {
		return fmt.Errorf("%s: %w", w.f.Name(), err)
	}
	w.size += int64(len(data))
	return nil
}

func (w *PcapngWriter) addInterface(lt layers.LinkType) (int, error) {
	intf := pcapgo.NgInterface{Name: w.iface, LinkType: lt, OS: runtime.GOOS, TimestampResolution: 9}
	var id int
	var err error
	if w.ng == nil {
		opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "kwire live"}}
		w.ng, err = pcapgo.NewNgWriterInterface(w.bw, intf, opts)
	} else {
		id, err = w.ng.AddInterface(intf)
	}
	if err == nil {
		w.ifIDs[lt] = id
	}
	return id, err
}

// rotate closes the current file and opens the next one.
func (w *PcapngWriter) rotate() error {
	if err := w.closeFile(); err != nil {
		return err
	}
	return w.open(numbered(w.path, len(w.files)))
}

// numbered inserts n before the extension: cap.pcapng -> cap.1.pcapng.
func numbered(path string, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(path, ext), n, ext)
}

// Flush writes buffered packets to the file.
func (w *PcapngWriter) Flush() error {
	if w.f == nil {
		return nil
	}
	if w.ng != nil {
		if err := w.ng.Flush(); err != nil {
			return err
		}
	}
	return w.bw.Flush()
}

func (w *PcapngWriter) closeFile() error {
	err := w.Flush()
	if w.ng == nil && err == nil {
		// No packet: still write a valid, empty pcapng.
		if _, err = w.addInterface(layers.LinkTypeRaw); err == nil {
			err = w.Flush()
		}
	}
	err = errors.Join(err, w.f.Close())
	w.f = nil
	return err
}

// Files returns the names of the files written so far, in order.
func (w *PcapngWriter) Files() []string { return append([]string(nil), w.files...) }

// Close flushes and closes the current file.
func (w *PcapngWriter) Close() error {
	if w.f == nil {
		return nil
	}
	return w.closeFile()
}
