package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/kwire/kwire/internal/captest"
)

// resyncExchanges is how many requests (and responses) resyncConv has.
const resyncExchanges = 8

// resyncConv is a conversation of numbered requests and responses of 40
// bytes each, so that a lost one shows: record 2+2i is request i, record
// 3+2i its response.
func resyncConv() []seg {
	segs := []seg{{at: 0, flags: "S"}, {at: time.Millisecond, toCli: true, flags: "SA"}}
	seq := [2]uint32{1, 1}
	for i := range resyncExchanges {
		for d, s := range []seg{{flags: "PA"}, {toCli: true, flags: "PA"}} {
			s.at = time.Duration(2+2*i+d) * time.Millisecond
			s.seq, s.data = seq[d], resyncPayload(i, d == 1)
			seq[d] += uint32(len(s.data))
			segs = append(segs, s)
		}
	}
	end := time.Duration(2+2*resyncExchanges) * time.Millisecond
	return append(segs, seg{at: end, seq: seq[0], flags: "FA"}, seg{at: end, toCli: true, seq: seq[1], flags: "FA"})
}

func resyncPayload(i int, resp bool) string {
	if resp {
		return fmt.Sprintf("response %02d %s", i, strings.Repeat(".", 28))
	}
	return fmt.Sprintf("request %02d %s", i, strings.Repeat(".", 29))
}

// span is where a record or block is in a file.
type span struct{ off, n int }

// records returns the packet records of a pcap, or the blocks of a pcapng
// (little-endian) file and which of them are packets.
func records(file []byte) (recs, blocks []span) {
	if binary.LittleEndian.Uint32(file) != magicPcapNG {
		for off := 24; off+16 <= len(file); {
			n := 16 + int(binary.LittleEndian.Uint32(file[off+8:]))
			recs = append(recs, span{off, n})
			off += n
		}
		return recs, nil
	}
	for off := 0; off+12 <= len(file); {
		n := int(binary.LittleEndian.Uint32(file[off+4:]))
		if binary.LittleEndian.Uint32(file[off:]) == ngEPB {
			recs = append(recs, span{off, n})
		}
		blocks = append(blocks, span{off, n})
		off += n
	}
	return recs, blocks
}

func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }

func insert(b []byte, at int, x []byte) []byte {
	return append(append(append([]byte(nil), b[:at]...), x...), b[at:]...)
}

// resyncCase damages a file; lost are the exchanges whose request
// payload is then not delivered whole.
type resyncCase struct {
	name string
	ng   bool
	// damage changes f (of records recs and blocks) and returns it, with
	// where the first damaged record is and how many bytes are skipped
	// (0, 0 if nothing is).
	damage  func(f []byte, recs, blocks []span) (out []byte, at, skipped int)
	lost    []int
	resyncs int
	cut     bool
	// fixed is the record whose time is replaced by the one before it, 0
	// if none.
	fixed int
	// origShort is how many records are read as giving an original
	// length below their captured one: not damage (origBelowCap).
	origShort uint64
}

const k = 2 + 2*3 // request 3

var resyncCases = []resyncCase{
	// One length damaged, the other right: repaired, the packet kept.
	{name: "pcap: capture length above the snap length", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, 0xffffff00)
		return f, r[k].off, 0
	}, resyncs: 1},
	// As some capture libraries write records, and as tshark reads them:
	// with the captured length, counted, not damage.
	{name: "pcap: original length below the capture length", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+12, 10)
		return f, 0, 0
	}, origShort: 1},
	// Both lengths damaged upwards, taking in the records after it: it is
	// cut where a plausible record starts inside it (pcapShorten).
	{name: "pcap: both lengths taking in the next records", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, uint32(r[k].n-16+r[k+1].n+8))
		put32(f, r[k].off+12, 0x00500000)
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcap: capture length 20 short: the record is cut, the next header misplaced", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, uint32(r[k].n-16-20))
		return f, r[k+1].off - 20, 20
	}, lost: []int{3}, resyncs: 1},
	{name: "pcap: a record past the end of the file, records after it", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, 200000)
		put32(f, r[k].off+12, 200000)
		return f, r[k].off, r[k].n
	}, lost: []int{3}, resyncs: 1},
	{name: "pcap: the last record past the end of the file: cut", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		last := r[len(r)-1]
		put32(f, last.off+8, uint32(last.n-16+100))
		put32(f, last.off+12, uint32(last.n-16+100))
		return f, 0, 0
	}, cut: true},
	{name: "pcap: garbage to the end", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		for i := r[k].off; i < len(f); i++ {
			f[i] = 0xaa
		}
		return f, r[k].off, len(f) - r[k].off
	}, lost: []int{3, 4, 5, 6, 7}, resyncs: 1},
	{name: "pcap: time years off", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[k].off+3] ^= 0x10
		return f, 0, 0
	}, fixed: k},
	{name: "pcap: a second's fraction of a second or more", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, 1.5e9)
		return f, 0, 0
	}, fixed: k},
	{name: "pcap: the first record's time years off", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[0].off+3] ^= 0x10
		return f, r[0].off, r[0].n
	}, resyncs: 1},
	{name: "pcap: the second record's time years off: the third says so", damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[1].off+3] ^= 0x10
		return f, 0, 0
	}},

	// The type or the leading length damaged: the length repeated at the
	// block's end, where a plausible block follows, says what they were:
	// set back, the packet kept (ngFixBlock).
	{name: "pcapng: block length changed", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, uint32(r[k].n+8))
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: block length taking in the next block", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, uint32(r[k].n+r[k+1].n))
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: block length not a multiple of 4", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, uint32(r[k].n+2))
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: huge block length", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, 0xfffffff0)
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: unknown block type", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off, 0x99)
		return f, r[k].off, 0
	}, resyncs: 1},
	// Both lengths damaged: nothing says where the block ends: skipped.
	{name: "pcapng: both block lengths changed", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+4, uint32(r[k].n+8))
		put32(f, r[k].off+r[k].n-4, uint32(r[k].n+8))
		return f, r[k].off, r[k].n
	}, lost: []int{3}, resyncs: 1},
	// The block's framing intact: the captured length is repaired from
	// the original one, the packet kept.
	{name: "pcapng: capture length past the block", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+20, uint32(r[k].n))
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: unknown interface: set back", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, 7)
		return f, r[k].off, 0
	}, resyncs: 1},
	{name: "pcapng: only the repeated length hit", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+r[k].n-4, 0x12345678)
		return f, 0, 0
	}},
	{name: "pcapng: the interface after the last one: made up", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[k].off+8, 1)
		return f, 0, 0
	}},
	{name: "pcapng: interface description damaged: made up", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		idb := b[1]
		put32(f, idb.off+4, uint32(idb.n+4))
		return f, idb.off, idb.n
	}, resyncs: 1},
	// A link type kwire does not read, where the frames read as one it
	// does: the header's damaged, the link type found from the frames.
	{name: "pcapng: interface link type damaged: found from the frames", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		f[b[1].off+8] ^= 0xd7
		return f, b[1].off, 0
	}, resyncs: 1},
	{name: "pcap: magic damaged", damage: func(f []byte, _, _ []span) ([]byte, int, int) {
		f[1] ^= 0x21
		return f, 0, 0
	}, resyncs: 1},
	{name: "pcap: version damaged", damage: func(f []byte, _, _ []span) ([]byte, int, int) {
		f[6] ^= 0x08
		return f, 0, 0
	}, resyncs: 1},
	{name: "pcap: header link type damaged: found from the frames", damage: func(f []byte, _, _ []span) ([]byte, int, int) {
		f[20] ^= 0xd7
		return f, 0, 0
	}, resyncs: 1},
	// The section header pcapgo refuses: set back without its options.
	{name: "pcapng: section header's end of options damaged", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		f[b[0].off+b[0].n-6] = 0x33
		return f, 0, 0
	}, resyncs: 1},
	{name: "pcapng: section header's repeated length damaged: left to the resync", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		f[b[0].off+b[0].n-1] = 0xca
		return f, 0, 0
	}},
	{name: "pcapng: section header's type damaged", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		f[0] ^= 0x40
		return f, 0, 0
	}, resyncs: 1},
	{name: "pcapng: time years off", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[k].off+15] ^= 0x01
		return f, 0, 0
	}, fixed: k},
	{name: "pcapng: the first block's time years off", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[0].off+15] ^= 0x01
		return f, r[0].off, r[0].n
	}, resyncs: 1},
	{name: "pcapng: the second block's time years off: the third says so", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		f[r[1].off+15] ^= 0x01
		return f, 0, 0
	}},
	{name: "pcapng: garbage behind the interface description", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		at := b[1].off + b[1].n
		return insert(f, at, bytes.Repeat([]byte{0x77}, 16)), at, 16
	}, resyncs: 1},
	{name: "pcapng: custom and name resolution blocks behind the interface, statistics at the end", ng: true, damage: func(f []byte, _, b []span) ([]byte, int, int) {
		custom := []byte{0xad, 0x0b, 0, 0, 16, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0}
		nrb := []byte{4, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0}
		isb := []byte{5, 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0}
		f = insert(f, b[1].off+b[1].n, append(custom, nrb...))
		return append(f, isb...), 0, 0
	}},
	{name: "pcapng: the last block past the end of the file: cut", ng: true, damage: func(f []byte, r, _ []span) ([]byte, int, int) {
		put32(f, r[len(r)-1].off+4, uint32(r[len(r)-1].n+100))
		return f, 0, 0
	}, cut: true},
}

// TestResyncDamagedRecord reads files with one damaged record (or block)
// in the middle: what follows it is read, the damage is counted, and
// damage that leaves the framing certain (a time, the repeated length, a
// lost interface description) costs no packet.
func TestResyncDamagedRecord(t *testing.T) {
	for _, tt := range resyncCases {
		for _, gzipped := range []bool{false, true} {
			name := tt.name
			if gzipped {
				name += " (gzipped)"
			}
			t.Run(name, func(t *testing.T) {
				conv := resyncConv()
				file := pcapFile(t, layers.LinkTypeEthernet, 0, conv...)
				if tt.ng {
					file = pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, conv)
				}
				recs, blocks := records(file)
				file, at, skipped := tt.damage(bytes.Clone(file), recs, blocks)
				if gzipped {
					file = gz(t, file)
				}
				path := writeTemp(t, "d.pcap", file)
				fs, err := OpenFiles([]string{path}, nil)
				if err != nil {
					t.Fatal(err)
				}
				rec := &recorder{}
				if err := fs.Run(context.Background(), rec); err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				checkDelivered(t, rec, tt.lost)
				st := fs.Stats()
				var want []FileDamage
				if tt.resyncs > 0 {
					want = []FileDamage{{Path: path, Offset: int64(at), Resyncs: tt.resyncs, Skipped: int64(skipped)}}
				}
				if got := fs.Damage(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("Damage() = %+v, want %+v", got, want)
				}
				if st.FilesResynced != min(tt.resyncs, 1) || st.FileBytesSkipped != uint64(skipped) || (st.FilesTruncated == 1) != tt.cut {
					t.Errorf("files_resynced, file_bytes_skipped, files_truncated = %d, %d, %d; want %d, %d, cut %v",
						st.FilesResynced, st.FileBytesSkipped, st.FilesTruncated, min(tt.resyncs, 1), skipped, tt.cut)
				}
				if tt.fixed > 0 {
					checkFixedTime(t, rec, conv, tt.fixed)
				}
				if st.OrigLenShort != tt.origShort {
					t.Errorf("orig_len_short = %d, want %d", st.OrigLenShort, tt.origShort)
				}
			})
		}
	}
}

// checkDelivered checks that every payload of resyncConv but those of the
// lost requests is delivered whole.
func checkDelivered(t *testing.T, rec *recorder, lost []int) {
	t.Helper()
	var stream [2]strings.Builder
	for _, c := range rec.chunks {
		if c.Kind == Data {
			stream[c.Dir].Write(c.Data)
		}
	}
	for i := range resyncExchanges {
		isLost := false
		for _, l := range lost {
			isLost = isLost || l == i
		}
		if got := strings.Contains(stream[ToServer].String(), resyncPayload(i, false)); got == isLost {
			t.Errorf("request %d delivered: %v, want %v", i, got, !isLost)
		}
	}
}

// checkFixedTime checks that record i's data came with the time of the
// record before it.
func checkFixedTime(t *testing.T, rec *recorder, conv []seg, i int) {
	t.Helper()
	for _, c := range rec.chunks {
		if c.Kind == Data && string(c.Data) == conv[i].data {
			if want := base.Add(conv[i-1].at); !c.Time.Equal(want) {
				t.Errorf("record %d delivered at %v, want %v (the time before it)", i, c.Time, want)
			}
			return
		}
	}
	t.Errorf("record %d not delivered", i)
}

// TestResyncFlippedCaptures reads committed captures, as pcapng and as
// pcap, with 0.2% of their bytes flipped: no error, the damage counted,
// and at least 90% of the packets still read.
func TestResyncFlippedCaptures(t *testing.T) {
	for _, name := range []string{"group.pcapng", "g_xbroker.b0.pcapng", "lossy.pcapng"} {
		orig, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"pcapng", "pcap"} {
			src := orig
			if format == "pcap" {
				if src, err = captest.ToPcap(orig); err != nil {
					t.Fatal(err)
				}
			}
			clean, cleanDamage := readCapture(t, src)
			if clean.FilesResynced != 0 || clean.FileBytesSkipped != 0 || len(cleanDamage) != 0 {
				t.Fatalf("%s as %s, undamaged: %+v, %d bytes skipped, damage %v", name, format, clean.FilesResynced, clean.FileBytesSkipped, cleanDamage)
			}
			for seed := uint64(1); seed <= 4; seed++ {
				t.Run(fmt.Sprintf("%s/%s/seed=%d", name, format, seed), func(t *testing.T) {
					st, dmg := readCapture(t, captest.FlipBytes(src, 0.002, seed))
					if st.FilesResynced != 1 || len(dmg) != 1 || dmg[0].Resyncs == 0 || dmg[0].Skipped != int64(st.FileBytesSkipped) {
						t.Errorf("files_resynced %d, file_bytes_skipped %d, damage %+v: want the damage counted",
							st.FilesResynced, st.FileBytesSkipped, dmg)
					}
					if st.Packets < clean.Packets*9/10 {
						t.Errorf("%d packets read, %d undamaged: want at least 90%%", st.Packets, clean.Packets)
					}
					t.Logf("%d of %d packets, %d resyncs, %d bytes skipped", st.Packets, clean.Packets, dmg[0].Resyncs, st.FileBytesSkipped)
				})
			}
		}
	}
}

func readCapture(t *testing.T, b []byte) (Stats, []FileDamage) {
	t.Helper()
	fs, err := OpenFiles([]string{writeTemp(t, "c.pcap", b)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Run(context.Background(), SinkFunc(func(*Chunk) {})); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	return fs.Stats(), fs.Damage()
}

// TestResyncAllocatesNoLength reads files whose every fourth record claims
// a length of gigabytes: nothing is allocated from those lengths.
func TestResyncAllocatesNoLength(t *testing.T) {
	var segs []seg
	for i := range 2000 {
		segs = append(segs, seg{at: time.Duration(i) * time.Microsecond, seq: uint32(1 + 10*i), flags: "PA", data: "0123456789"})
	}
	for _, ng := range []bool{false, true} {
		file := pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
		lenAt := 8
		if ng {
			file, lenAt = pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, segs), 4
		}
		clean := allocated(t, file)
		recs, _ := records(file)
		for i := 0; i < len(recs); i += 4 {
			put32(file, recs[i].off+lenAt, 0xfffffff0-uint32(i))
		}
		if got := allocated(t, file); got > clean+8<<20 {
			t.Errorf("pcapng %v: %d MiB allocated, %d MiB undamaged", ng, got>>20, clean>>20)
		}
	}
}

// allocated returns the bytes allocated to read file.
func allocated(t *testing.T, file []byte) uint64 {
	path := writeTemp(t, "a.pcap", file)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fs, err := OpenFiles([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Run(context.Background(), SinkFunc(func(*Chunk) {})); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzResync overwrites bytes of a small pcap or pcapng file in place (a
// damaged transfer) and reads it. Invariants: no panic; Run returns no
// error (whatever the damage, pcapgo is never handed a record it fails
// on); no more bytes skipped than the file has; the chunk contract holds.
func FuzzResync(f *testing.F) {
	f.Add(false, uint16(200), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(true, uint16(300), []byte{0x12, 0x34})
	f.Add(true, uint16(80), []byte{0})
	conv := resyncConv()
	files := [2][]byte{pcapFile(f, layers.LinkTypeEthernet, 0, conv...), pcapngFile(f, []layers.LinkType{layers.LinkTypeEthernet}, conv)}
	f.Fuzz(func(t *testing.T, ng bool, at uint16, damage []byte) {
		file := bytes.Clone(files[0])
		if ng {
			file = bytes.Clone(files[1])
		}
		off := 64 + int(at)%(len(file)-64) // the file header intact
		copy(file[off:], damage)
		r := &fileReader{path: "fuzz.pcap"}
		if err := r.open(bufio.NewReaderSize(bytes.NewReader(file), 4096), false); err != nil {
			t.Fatalf("open: %v", err)
		}
		fs := &Files{readers: []*fileReader{r}, asm: NewAssembler(&Options{Ports: brokerPort}, nil)}
		chk := &chunkChecker{t: t, dirs: map[*Conn]*[2]dirState{}}
		if err := fs.Run(context.Background(), chk); err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		chk.done(fs.Stats())
		if st := fs.Stats(); st.FileBytesSkipped > uint64(len(file)) {
			t.Errorf("%d bytes skipped of %d", st.FileBytesSkipped, len(file))
		}
	})
}

// TestResyncTimestampResolution: a pcapng Interface Description whose
// if_tsresol option was damaged (ns read as µs) would put every packet of
// the interface in another millennium, and the reassembly's timeouts
// with them. Its first packet's time, out of any plausible range with the
// resolution said and in range with the other, sets it right: the
// packets keep their times, and the damage is counted.
func TestResyncTimestampResolution(t *testing.T) {
	file := pcapngFile(t, []layers.LinkType{layers.LinkTypeEthernet}, resyncConv())
	_, blocks := records(file)
	idb := file[blocks[1].off : blocks[1].off+blocks[1].n]
	res := -1
	for off := 16; off+4 <= len(idb)-4; {
		code, n := binary.LittleEndian.Uint16(idb[off:]), int(binary.LittleEndian.Uint16(idb[off+2:]))
		if code == 9 && n == 1 {
			res = off + 4
			break
		}
		off += 4 + (n+3)&^3
	}
	if res < 0 {
		t.Fatal("the writer's interface has no if_tsresol option")
	}
	idb[res] ^= 0x0f // 9 (ns) becomes 6 (µs), 6 becomes 9
	path := writeTemp(t, "d.pcapng", file)
	fs, err := OpenFiles([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if err := fs.Run(context.Background(), rec); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	checkDelivered(t, rec, nil)
	for _, c := range rec.chunks {
		if d := c.Time.Sub(base); d < 0 || d > time.Second {
			t.Fatalf("chunk at %v, want within a second after %v", c.Time, base)
		}
	}
	if d := fs.Damage(); len(d) != 1 || d[0].Resyncs != 1 || d[0].Skipped != 0 {
		t.Errorf("Damage() = %+v, want one place, nothing skipped", d)
	}
}
