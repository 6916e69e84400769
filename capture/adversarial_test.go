package capture

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Hostile packets at the capture stage: the chunk contract holds and the
// caps bite with their counters. (Kafka-level hostile captures, through
// the decoder, are in decode/adversarial_test.go.)

func TestSelfConnect(t *testing.T) {
	// Packets from an endpoint to itself: a TCP self-connect, or forged.
	// Both halves of the connection are the same endpoint; each direction
	// must still get exactly one Close, and Swap must still swap them
	// (found by FuzzReader).
	self := func(s seg) []byte {
		data := frame(t, layers.LinkTypeEthernet, s, 0)
		copy(data[14+16:14+20], data[14+12:14+16]) // destination IP := source IP
		copy(data[34+2:34+4], data[34:34+2])       // destination port := source port
		return data
	}
	tests := []struct {
		name    string
		onChunk func(c *Chunk)
		want    []string
	}{{
		name: "one close per direction",
		want: []string{"c1 to_server data ping", "c1 to_server data pong", "c1 to_server close eof", "c1 to_client close eof"},
	}, {
		name: "swapped by the sink",
		onChunk: func(c *Chunk) {
			if string(c.Data) == "ping" {
				c.Conn.Swap()
			}
		},
		want: []string{"c1 to_server data ping", "c1 to_client data pong", "c1 to_server close eof", "c1 to_client close eof"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{onChunk: tt.onChunk}
			a := NewAssembler(nil, rec)
			for i, s := range []seg{{seq: 1, flags: "PA", data: "ping"}, {seq: 5, flags: "PA", data: "pong"}} {
				data := self(s)
				a.Packet(layers.LinkTypeEthernet, data, gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(i)), CaptureLength: len(data), Length: len(data)})
			}
			a.Close()
			if d := diffLines(tt.want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st := a.Stats(); st.ConnsOpen != 0 {
				t.Errorf("conns_open = %d after Close, want 0", st.ConnsOpen)
			}
		})
	}
}

func TestConnCap(t *testing.T) {
	// Five connections while at most three are tracked; once the first
	// ones are idle, new connections are tracked again.
	var segs []seg
	for c := range 5 {
		segs = append(segs, handshake(c, time.Duration(c)*time.Millisecond)...)
		segs = append(segs, seg{at: 10 * time.Millisecond, c: c, seq: 1, flags: "PA", data: "req"})
	}
	segs = append(segs, handshake(9, 10*time.Minute)...)
	segs = append(segs, seg{at: 10 * time.Minute, c: 9, seq: 1, flags: "PA", data: "late"})
	rec := &recorder{}
	st, err := runFiles(t, &Options{MaxConns: 3}, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs...))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"c1 to_server data req", "c2 to_server data req", "c3 to_server data req",
		"c1 to_server close idle", "c1 to_client close idle", "c2 to_server close idle", "c2 to_client close idle",
		"c3 to_server close idle", "c3 to_client close idle",
		"c4 to_server data late", "c4 to_server close eof", "c4 to_client close eof",
	}
	if d := diffLines(want, rec.lines(false)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
	// Connections 3 and 4 (handshake and data: 4 packets each) were not
	// tracked.
	if st.ConnsSeen != 4 || st.ConnsOverCap != 2 || st.PacketsOverCap != 8 {
		t.Errorf("conns_seen, conns_over_cap, packets_over_cap = %d, %d, %d; want 4, 2, 8", st.ConnsSeen, st.ConnsOverCap, st.PacketsOverCap)
	}
}

func TestBufferCaps(t *testing.T) {
	// A segment is missing and 40 more come after it: the out-of-order
	// data would be held for the reorder timeout, but the caps (pages of
	// 1900 bytes) make reassembly give up on the missing bytes early.
	payload := string(bytes.Repeat([]byte("x"), 1000))
	build := func(conns int) []byte {
		var segs []seg
		for c := range conns {
			segs = append(segs, handshake(c, 0)...)
			for i := range 41 {
				if i != 0 { // seq 1..1000 is lost
					segs = append(segs, seg{at: time.Millisecond, c: c, seq: uint32(1 + 1000*i), flags: "PA", data: payload})
				}
			}
		}
		return pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
	}
	tests := []struct {
		name  string
		opts  *Options
		conns int
	}{
		{"per connection", &Options{MaxBufferedPagesPerConn: 4}, 1},
		{"in total", &Options{MaxBufferedPagesTotal: 8}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delivered := 0
			rec := &recorder{onChunk: func(c *Chunk) { delivered += len(c.Data) }}
			st, err := runFiles(t, tt.opts, rec, build(tt.conns))
			if err != nil {
				t.Fatal(err)
			}
			if st.BufferLimitGaps == 0 {
				t.Errorf("buffer_limit_gaps = 0, want > 0: %+v", st)
			}
			// Nothing is lost but the missing segment: every byte after it
			// is delivered, behind a gap.
			if want := 40 * 1000 * tt.conns; delivered != want || st.GapBytes != uint64(1000*tt.conns) {
				t.Errorf("delivered, gap_bytes = %d, %d; want %d, %d", delivered, st.GapBytes, want, 1000*tt.conns)
			}
		})
	}
}

func TestJunkFrames(t *testing.T) {
	// Random frames of every link type between the packets of a
	// conversation: they are counted, and the conversation is whole.
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{LinkType: layers.LinkTypeEthernet, SnapLength: 262144}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	lts := []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeNull, layers.LinkTypeLoop, layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6}
	for _, lt := range lts[1:] {
		if _, err := w.AddInterface(pcapgo.NgInterface{LinkType: lt, SnapLength: 262144}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(iface int, at time.Duration, data []byte) {
		ci := gopacket.CaptureInfo{Timestamp: base.Add(at), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	junk := 0
	for i, s := range conversation(false) {
		s.id = uint16(i + 1)
		put(0, s.at, frame(t, layers.LinkTypeEthernet, s, 0))
		for range 2000 {
			data := make([]byte, r.IntN(120))
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			if len(data) > 0 && r.IntN(2) == 0 {
				data[0] = 0x45 // make IPv4 headers likelier
			}
			put(r.IntN(len(lts)), s.at, data)
			junk++
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	st, err := runFiles(t, &Options{Ports: brokerPort, DedupeWindow: -1}, rec, b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var conv []string
	for _, c := range rec.chunks {
		if c.Conn.Server == srv4 && c.Conn.Client == cli4 {
			cp := c
			conv = append(conv, (&recorder{chunks: []Chunk{cp}}).lines(false)[0])
		}
	}
	if d := diffLines(conversationChunks, conv); d != "" {
		t.Errorf("conversation chunks (-want +got):\n%s", d)
	}
	if n := st.TCPPackets + st.SkippedNonIP + st.SkippedNonTCP + st.Fragments + st.Undecodable; n != st.Packets || st.Packets != uint64(junk+6) {
		t.Errorf("packets %d (want %d), classes add up to %d: %+v", st.Packets, junk+6, n, st)
	}
	if st.ConnsOpen != 0 {
		t.Errorf("conns_open = %d after Run, want 0", st.ConnsOpen)
	}
}
