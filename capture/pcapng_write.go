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
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// PcapngWriter is a PacketWriter saving packets to a pcapng file, and to
// numbered files after it when Rotation.Bytes is set: cap.pcapng, then
// cap.1.pcapng, cap.2.pcapng... (kwire analyze merges them by time). Each
// link type gets an interface block the first time it is written. It is
// not safe for concurrent use.
type PcapngWriter struct {
	path  string
	iface string
	rot   Rotation

	f     *os.File
	bw    *bufio.Writer
	ng    *pcapgo.NgWriter
	ifIDs map[layers.LinkType]int
	size  int64       // bytes of packets in the current file
	files []string    // on disk: the finished ones, oldest first, then the current one
	ended []time.Time // when each finished file of files was finished
	gone  int         // files deleted by Rotation.Keep and MaxAge
}

// Rotation says when a PcapngWriter starts a new file and which of the
// files it finished it deletes, as tcpdump's -C and -W do, so that a
// capture left running cannot fill the disk. The zero Rotation writes
// one file.
type Rotation struct {
	// Bytes starts a new file once the current one holds that many bytes
	// of packets (0: never).
	Bytes int64
	// Keep is the most files kept on disk, the one being written
	// included: the oldest are deleted first (0: all are kept).
	Keep int
	// MaxAge deletes a file once it has been finished for that long,
	// looked at on every rotation and Flush (0: never).
	MaxAge time.Duration
	// Now is the clock MaxAge is measured by (nil: time.Now).
	Now func() time.Time
}

// CreatePcapng creates path for writing packets captured on interface
// iface, rotating as rot says (nil: one file). Only files the writer
// created are ever deleted.
//
// A capture holds raw payloads, SASL PLAIN passwords among them: every
// file is created new, readable by its owner only (0600), and never
// through a symbolic link or over an existing file (O_CREAT|O_EXCL): a
// link planted where the capture goes (in /tmp, say) would otherwise send
// it to a file of the planter's choosing, and an existing file would keep
// its owner and mode. The error wraps ErrPcapngExists then. With rotation,
// numbered files left by an earlier run are refused at the start, not
// when the capture reaches them.
func CreatePcapng(path, iface string, rot *Rotation) (*PcapngWriter, error) {
	w := &PcapngWriter{path: path, iface: iface}
	if rot != nil {
		w.rot = *rot
	}
	if w.rot.Now == nil {
		w.rot.Now = time.Now
	}
	if w.rot.Keep < 0 || w.rot.MaxAge < 0 {
		return nil, errors.New("pcapng: negative Rotation.Keep or MaxAge")
	}
	if w.rot.Bytes > 0 {
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
	if w.rot.Bytes > 0 && w.size >= w.rot.Bytes {
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

// rotate closes the current file, opens the next one and deletes what
// Rotation says is too many or too old.
func (w *PcapngWriter) rotate() error {
	if err := w.closeFile(); err != nil {
		return err
	}
	w.ended = append(w.ended, w.rot.Now())
	if err := w.open(numbered(w.path, w.gone+len(w.files))); err != nil {
		return err
	}
	return w.prune()
}

// prune deletes the oldest finished files while there are more than
// Rotation.Keep, and those finished longer than Rotation.MaxAge ago. A
// file already gone (deleted by the operator) is fine; any other failure
// is an error, which stops the writing: a cap that no longer holds must
// not fill the disk.
func (w *PcapngWriter) prune() error {
	now := w.rot.Now()
	for len(w.ended) > 0 {
		tooMany := w.rot.Keep > 0 && len(w.files) > w.rot.Keep
		tooOld := w.rot.MaxAge > 0 && now.Sub(w.ended[0]) >= w.rot.MaxAge
		if !tooMany && !tooOld {
			return nil
		}
		if err := os.Remove(w.files[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete the oldest capture file: %w", err)
		}
		w.files, w.ended = w.files[1:], w.ended[1:]
		w.gone++
	}
	return nil
}

// numbered inserts n before the extension: cap.pcapng -> cap.1.pcapng.
func numbered(path string, n int) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(path, ext), n, ext)
}

// Flush writes buffered packets to the file, and deletes the files
// finished longer than Rotation.MaxAge ago.
func (w *PcapngWriter) Flush() error {
	if w.f == nil {
		return nil
	}
	if w.ng != nil {
		if err := w.ng.Flush(); err != nil {
			return err
		}
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	return w.prune()
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

// Files returns the names of the files written and not deleted, in order.
func (w *PcapngWriter) Files() []string { return append([]string(nil), w.files...) }

// Deleted counts the files written and deleted (Rotation.Keep, MaxAge).
func (w *PcapngWriter) Deleted() int { return w.gone }

// Close flushes and closes the current file.
func (w *PcapngWriter) Close() error {
	if w.f == nil {
		return nil
	}
	return w.closeFile()
}
