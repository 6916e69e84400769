package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestHandoverRecord: what an owner commits of a partition, and what its
// successor leaves out with it.
func TestHandoverRecord(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type line struct {
		pos int // seconds after t0
		fp  uint64
	}
	tests := []struct {
		name      string
		lines     []line // accounted by the previous owner
		pos       int    // its handover position
		wantFrom  time.Time
		wantLines int
	}{
		{name: "window of 30 s", lines: []line{{0, 1}, {40, 2}, {50, 3}, {60, 3}}, pos: 60, wantFrom: at(30), wantLines: 3},
		{name: "nothing accounted", pos: 60, wantFrom: at(30)},
		{name: "too many lines: from moves on", pos: 100, lines: func() (ls []line) {
			for i := range handoverMaxLines + 10 {
				ls = append(ls, line{90 + i/100, uint64(i)}) // 100 lines a second
			}
			return ls
		}(), wantFrom: at(90).Add(time.Nanosecond), wantLines: 260}, // the cut fell among the lines of 90 s: from after them
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &groupAgg{}
			ps := &partState{}
			for _, l := range tt.lines {
				g.account(ps, at(l.pos), at(l.pos), l.fp)
			}
			meta := ps.record(at(tt.pos), true)
			if len(meta) > 4096 {
				t.Errorf("record of %d bytes", len(meta))
			}
			h, err := parseHandover(meta)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range h.lines {
				n += c
			}
			got := fmt.Sprint(h.clean, h.pos, h.from, n)
			want := fmt.Sprint(true, at(tt.pos), tt.wantFrom, tt.wantLines)
			if got != want {
				t.Errorf("clean, pos, from, lines:\n-%s\n+%s", want, got)
			}
		})
	}

	// The successor: before from, left out; at or after, left out once
	// per copy fingerprinted; the rest written.
	prev := &partState{}
	g := &groupAgg{}
	for _, l := range []struct {
		pos int
		fp  uint64
	}{{10, 1}, {40, 2}, {50, 3}, {55, 3}} {
		g.account(prev, at(l.pos), at(l.pos), l.fp)
	}
	meta := prev.record(at(60), true)
	h, _ := parseHandover(meta)
	next := &partState{prev: h, prevRaw: meta}
	var written []uint64
	for _, l := range []struct {
		pos int
		fp  uint64
	}{{10, 1}, {40, 2}, {50, 3}, {55, 3}, {56, 3}, {61, 4}} {
		if g.account(next, at(l.pos), at(l.pos), l.fp) {
			written = append(written, l.fp)
		}
	}
	if want := []uint64{3, 4}; !slices.Equal(want, written) {
		t.Errorf("written: -%v +%v", want, written)
	}
	if g.suppressed != 4 {
		t.Errorf("suppressed %d, want 4", g.suppressed)
	}
	// Not yet past its predecessor's point, the successor hands on the
	// predecessor's record (unclean if its own is).
	if r, _ := parseHandover(next.record(at(50), false)); r.clean || !r.pos.Equal(at(60)) {
		t.Errorf("record before the predecessor's point: clean %v pos %v", r.clean, r.pos)
	}
	if _, err := parseHandover("something else"); err == nil {
		t.Error("foreign metadata parsed")
	}
}

// TestParseHandoverCounts: a record whose fingerprint count is not what
// its bytes hold is rejected, never read past its end (issue 39: a count
// of 2^61 made n*8 wrap to 0, and every instance taking the partition
// over panicked on it).
func TestParseHandoverCounts(t *testing.T) {
	record := func(n uint64, fps int) string {
		b := binary.AppendVarint([]byte{1}, 5)
		b = binary.AppendVarint(b, 3)
		b = binary.AppendUvarint(b, n)
		b = append(b, make([]byte, 8*fps)...)
		return handoverPrefix + base64.RawStdEncoding.EncodeToString(b)
	}
	tests := []struct {
		name    string
		meta    string
		wantErr bool
	}{
		{name: "count as held", meta: record(2, 2)},
		{name: "none", meta: record(0, 0)},
		{name: "count wrapping n*8 to 0", meta: record(1<<61, 0), wantErr: true},
		{name: "count wrapping n*8 to the bytes held", meta: record(1<<61+1, 1), wantErr: true},
		{name: "count above the bytes", meta: record(3, 2), wantErr: true},
		{name: "bytes not whole fingerprints", meta: record(1, 1) + "AA", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := parseHandover(tt.meta)
			if tt.wantErr != (err != nil) {
				t.Fatalf("parseHandover gave %v, %v; want an error: %v", h, err, tt.wantErr)
			}
		})
	}
}
