package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what is written to tty, a real
// terminal to kwire, is read from pty.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no pseudo-terminal: %v", err)
		}
		t.Skipf("no pseudo-terminal (%v): the note on a terminal's stderr is not tested", err)
	}
	t.Cleanup(func() { pty.Close() })
	fd := int(pty.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pty, tty
}

// TestNoteNDJSON: kwire analyze piped to less writes NDJSON, as a pipe
// gets; with stderr on the terminal it says so, once, and how to get the
// report. Not when a flag chose the format, nor to a stderr that is no
// terminal (a CI log).
func TestNoteNDJSON(t *testing.T) {
	file := filepath.Join(testdataDir(), "group.pcapng")
	for _, tt := range []struct {
		flags []string
		note  bool
	}{{nil, true}, {[]string{"--json"}, false}, {[]string{"--text"}, false}} {
		pty, tty := openPTY(t)
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		code := run(append(append([]string{"analyze"}, tt.flags...), file), out, tty)
		tty.Close()
		var got bytes.Buffer
		io.Copy(&got, pty) // to EIO, once tty is closed and read
		out.Close()
		if code != 0 {
			t.Fatalf("kwire analyze %v: exit %d: %s", tt.flags, code, got.String())
		}
		note := strings.Count(got.String(), "writing NDJSON because stdout is not a terminal: --text for the report")
		if (note == 1) != tt.note || note > 1 {
			t.Errorf("kwire analyze %v to a file, stderr a terminal: the note %d times, want it: %v (stderr: %q)", tt.flags, note, tt.note, got.String())
		}
		stdout := string(readFile(t, out.Name()))
		if isJSON := strings.HasPrefix(stdout, `{"v":`); isJSON == slices.Contains(tt.flags, "--text") {
			t.Errorf("kwire analyze %v to a file: output begins %q", tt.flags, stdout[:min(40, len(stdout))])
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"analyze", file}, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
		t.Errorf("kwire analyze with neither stdout nor stderr a terminal: exit %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}
