package capture

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/kwire/kwire/internal/captest"
)

// TestExternalOrigLenShort reads go-sniffer's kafka.pcap, as its project
// committed it: every record header gives an original length 16 bytes
// below the captured one, the captured bytes padded with zeros after the
// frame. tshark reads it with the captured lengths (libpcap refuses it).
// Every packet must be read so, the quirk counted once for the file, no
// damage reported, and the TCP payloads be those tshark shows (a Metadata
// v0 exchange on one connection, a Produce v1 on the other).
func TestExternalOrigLenShort(t *testing.T) {
	path := captest.External(t, "go-sniffer/kafka.pcap")
	fs, err := OpenFiles([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[connDir]int{}
	if err := fs.Run(context.Background(), SinkFunc(func(c *Chunk) {
		if c.Kind == Data {
			got[connDir{c.Conn.ID, c.Dir}] += len(c.Data)
		}
	})); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	want := map[connDir]int{{1, ToServer}: 47, {1, ToClient}: 79, {2, ToServer}: 1124, {2, ToClient}: 40}
	if d := diffLines(streamLines(want), streamLines(got)); d != "" {
		t.Errorf("payload bytes per connection and direction (-want +got):\n%s", d)
	}
	st := fs.Stats()
	if st.Packets != 20 || st.OrigLenShort != 20 || st.FilesResynced != 0 || st.FileBytesSkipped != 0 || st.Undecodable != 0 {
		t.Errorf("stats: %d packets, orig_len_short %d, files_resynced %d, file_bytes_skipped %d, undecodable %d: want 20, 20, 0, 0, 0",
			st.Packets, st.OrigLenShort, st.FilesResynced, st.FileBytesSkipped, st.Undecodable)
	}
	if got, want := fmt.Sprint(fs.Quirks()), fmt.Sprint([]FileQuirk{{Path: path, OrigLenShort: 20}}); got != want {
		t.Errorf("Quirks = %s, want %s", got, want)
	}
	if d := fs.Damage(); d != nil {
		t.Errorf("Damage = %+v, want none", d)
	}
}

type connDir struct {
	conn uint64
	dir  Dir
}

// streamLines lists bytes per stream as sorted lines, for diffLines.
func streamLines(m map[connDir]int) []string {
	var out []string
	for s, n := range m {
		out = append(out, fmt.Sprintf("conn %d %s: %d bytes", s.conn, s.dir, n))
	}
	slices.Sort(out)
	return out
}
