package capture

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// reorderPacket is one packet of the capture FuzzReorder permutes.
type reorderPacket struct {
	lt   layers.LinkType
	data []byte
	ci   gopacket.CaptureInfo
	dir  string // "<src>><dst>" of a TCP segment with payload, else ""
}

// reorderCapture reads testdata/h_zombie_producer.pcapng (real kgo
// clients, 7 connections to 3 brokers): its packets, and the directions
// that carry data, in the order of their first segment.
func reorderCapture(tb testing.TB) (pkts []reorderPacket, dirs []string) {
	tb.Helper()
	b, err := os.ReadFile("../testdata/h_zombie_producer.pcapng")
	if err != nil {
		tb.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		tb.Fatal(err)
	}
	seen := map[string]bool{}
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		p := reorderPacket{lt: r.LinkType(), data: data, ci: ci}
		pk := gopacket.NewPacket(data, p.lt, gopacket.NoCopy)
		if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && len(tcp.Payload) > 0 && pk.NetworkLayer() != nil {
			p.dir = fmt.Sprintf("%v:%d>%v:%d", pk.NetworkLayer().NetworkFlow().Src(), tcp.SrcPort, pk.NetworkLayer().NetworkFlow().Dst(), tcp.DstPort)
			if !seen[p.dir] {
				seen[p.dir] = true
				dirs = append(dirs, p.dir)
			}
		}
		pkts = append(pkts, p)
	}
	if len(dirs) == 0 {
		tb.Fatal("no data segments in the capture")
	}
	return pkts, dirs
}

// streamBytes runs pkts through an Assembler and returns the bytes each
// connection direction delivered ("<conn id> <dir>") and the stats.
func streamBytes(pkts []reorderPacket) (map[string][]byte, Stats) {
	out := map[string][]byte{}
	a := NewAssembler(&Options{}, SinkFunc(func(c *Chunk) {
		if c.Kind == Data {
			k := fmt.Sprintf("%d %s", c.Conn.ID, c.Dir)
			out[k] = append(out[k], c.Data...)
		}
	}))
	for _, p := range pkts {
		a.Packet(p.lt, p.data, p.ci)
	}
	a.Close()
	return out, a.Stats()
}

// FuzzReorder permutes the data segments of one direction of a real
// capture as a loaded host or a multi-queue NIC delivers them: the first
// input byte picks the direction, each next byte moves that direction's
// next data segment 0 to 7 places later among the direction's segments,
// each packet keeping its time slot (times still increase). Reassembly
// must deliver every direction's bytes exactly as in capture order, with
// no gap and no buffer-limit gap: nothing that arrived within the window
// is lost, nothing is invented, and nothing panics.
func FuzzReorder(f *testing.F) {
	pkts, dirs := reorderCapture(f)
	want, st := streamBytes(pkts)
	if st.Gaps != 0 {
		f.Fatalf("the capture in order: %d gaps", st.Gaps)
	}
	f.Add([]byte{0, 1, 0, 3, 7})
	f.Add([]byte{2, 7, 7, 7, 7, 7, 7, 7, 7})
	f.Add([]byte{5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		dir := dirs[int(in[0])%len(dirs)]
		var idx []int
		for i, p := range pkts {
			if p.dir == dir {
				idx = append(idx, i)
			}
		}
		order := make([]int, len(pkts))
		for i := range order {
			order[i] = i
		}
		for k, b := range in[1:] {
			if k >= len(idx) {
				break
			}
			j := min(k+int(b%8), len(idx)-1)
			order[idx[k]], order[idx[j]] = order[idx[j]], order[idx[k]]
		}
		moved := make([]reorderPacket, len(pkts))
		for i, o := range order {
			moved[i] = pkts[o]
			moved[i].ci.Timestamp = pkts[i].ci.Timestamp // the slot's time
		}
		got, st := streamBytes(moved)
		if st.Gaps != 0 || st.BufferLimitGaps != 0 || st.GapBytes != 0 {
			t.Fatalf("%s permuted by %v: %d gaps (%d bytes, %d at the buffer limit)", dir, in[1:], st.Gaps, st.GapBytes, st.BufferLimitGaps)
		}
		for k, w := range want {
			if !bytes.Equal(got[k], w) {
				t.Fatalf("%s permuted by %v: %s delivered %d bytes, in order %d (first difference at %d)", dir, in[1:], k, len(got[k]), len(w), firstDifference(got[k], w))
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s permuted by %v: %d directions delivered, in order %d", dir, in[1:], len(got), len(want))
		}
	})
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
