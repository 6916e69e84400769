package capture

import (
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestChunkTimes(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: time.Second, seq: 1, flags: "PA", data: "aaa"},
		{at: 2 * time.Second, seq: 7, flags: "PA", data: "ccc"},
		{at: 10 * time.Second, toCli: true, seq: 1, flags: "PA", data: "resp"},
		{at: 11 * time.Second, toCli: true, seq: 5, flags: "FA"},
	})
	rec := &recorder{}
	if _, err := runFiles(t, nil, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs...)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1s c1 to_server data aaa",
		// Delivered by the flush at 10s; stamped with the connection's
		// latest packet before it.
		"2s c1 to_server gap 3",
		"2s c1 to_server data ccc",
		"10s c1 to_client data resp",
		"11s c1 to_client close fin",
		"11s c1 to_server close eof",
	}
	if d := diffLines(want, rec.lines(true)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
}

// TestChunkTimesHeld: segments held behind a lost one, delivered at once
// by a flush, keep their own capture times: a Kafka frame in them is
// dated when it was sent, not when the reassembly gave up waiting.
func TestChunkTimesHeld(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: time.Second, seq: 1, flags: "PA", data: "aaa"},
		// seq 4..6 lost
		{at: 2 * time.Second, seq: 10, flags: "PA", data: "ddd"},
		{at: 3 * time.Second, seq: 7, flags: "PA", data: "ccc"},
		{at: 4 * time.Second, seq: 13, flags: "PA", data: "eee"},
		{at: 12 * time.Second, toCli: true, seq: 1, flags: "PA", data: "resp"},
	})
	rec := &recorder{}
	if _, err := runFiles(t, nil, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs...)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1s c1 to_server data aaa",
		"4s c1 to_server gap 3",
		"3s c1 to_server data ccc",
		"3s c1 to_server data ddd", // came at 2s, readable after ccc
		"4s c1 to_server data eee",
		"12s c1 to_client data resp",
		"12s c1 to_server close eof",
		"12s c1 to_client close eof",
	}
	if d := diffLines(want, rec.lines(true)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
}

func TestSinkIgnoreAndSwap(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "one"},
		{at: 2, toCli: true, seq: 1, flags: "PA", data: "two"},
		{at: 3, seq: 4, flags: "PA", data: "three"},
		{at: 4, seq: 9, flags: "FA"},
	})
	tests := []struct {
		name    string
		onChunk func(c *Chunk)
		want    []string
	}{{
		name:    "ignore stops data but not closes",
		onChunk: func(c *Chunk) { c.Conn.Ignore = true },
		want: []string{
			"c1 to_server data one",
			"c1 to_server close fin",
			"c1 to_client close eof",
		},
	}, {
		name: "swap flips directions of later chunks",
		onChunk: func(c *Chunk) {
			if c.Kind == Data && string(c.Data) == "one" {
				c.Conn.Swap()
			}
		},
		want: []string{
			"c1 to_server data one",
			"c1 to_server data two",
			"c1 to_client data three",
			"c1 to_client close fin",
			"c1 to_server close eof",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{onChunk: tt.onChunk}
			if _, err := runFiles(t, nil, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs...)); err != nil {
				t.Fatal(err)
			}
			if d := diffLines(tt.want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
		})
	}
}

func TestRoles(t *testing.T) {
	ports, _ := ParsePorts("9092,50000")
	brokerOnly, _ := ParsePorts("9092")
	tests := []struct {
		name       string
		ports      Ports
		first      seg
		wantServer uint16
		wantRole   Role
	}{
		{"port of the destination", brokerOnly, seg{flags: "PA", data: "x"}, 9092, RolePort},
		{"port of the source", brokerOnly, seg{toCli: true, flags: "PA", data: "x"}, 9092, RolePort},
		{"both ports listed, SYN decides", ports, seg{toCli: true, flags: "S"}, 50000, RolePort},
		{"both ports listed, no SYN: lower port", ports, seg{toCli: true, flags: "PA", data: "x"}, 9092, RolePort},
		{"SYN sender is the client", Ports{}, seg{toCli: true, flags: "S"}, 50000, RoleSYN},
		{"SYN-ACK sender is the server", Ports{}, seg{flags: "SA"}, 50000, RoleSYN},
		{"a SYN with a damaged ACK flag: acknowledges nothing", Ports{}, seg{toCli: true, flags: "SAP", ack0: true}, 50000, RoleSYN},
		{"guess: lower port", Ports{}, seg{toCli: true, flags: "A"}, 9092, RoleGuess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			a := NewAssembler(&Options{Ports: tt.ports}, rec)
			data := frame(t, layers.LinkTypeEthernet, tt.first, 0)
			a.Packet(layers.LinkTypeEthernet, data, gopacket.CaptureInfo{Timestamp: base, CaptureLength: len(data), Length: len(data)})
			a.Close()
			if len(rec.chunks) == 0 {
				t.Fatal("no chunks")
			}
			c := rec.chunks[0].Conn
			if c.Server.Port() != tt.wantServer || c.Role != tt.wantRole {
				t.Errorf("server port, role = %d, %v; want %d, %v", c.Server.Port(), c.Role, tt.wantServer, tt.wantRole)
			}
		})
	}
}

func TestJunkPackets(t *testing.T) {
	rec := &recorder{}
	a := NewAssembler(nil, rec)
	feed := func(lt layers.LinkType, data []byte) {
		a.Packet(lt, data, gopacket.CaptureInfo{Timestamp: base, CaptureLength: len(data), Length: len(data)})
	}
	ser := func(l ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, l...); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	eth := func(et layers.EthernetType) *layers.Ethernet {
		return &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: et}
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{1, 1, 1, 1}, DstIP: []byte{2, 2, 2, 2}}
	udp := &layers.UDP{SrcPort: 53, DstPort: 53}
	udp.SetNetworkLayerForChecksum(ip)
	feed(layers.LinkTypeEthernet, ser(eth(layers.EthernetTypeARP), gopacket.Payload(make([]byte, 28))))
	feed(layers.LinkTypeEthernet, ser(eth(layers.EthernetTypeIPv4), ip, udp, gopacket.Payload("dns")))
	frag := *ip
	frag.Protocol, frag.Flags = layers.IPProtocolTCP, layers.IPv4MoreFragments
	feed(layers.LinkTypeEthernet, ser(eth(layers.EthernetTypeIPv4), &frag, gopacket.Payload(make([]byte, 24))))
	feed(layers.LinkTypeEthernet, []byte{1, 2, 3})                                             // too short for Ethernet
	feed(layers.LinkTypeEthernet, ser(eth(layers.EthernetTypeIPv4), gopacket.Payload("junk"))) // bad IPv4
	feed(layers.LinkType(147), []byte("user link type"))
	a.Close()
	st := a.Stats()
	want := Stats{Packets: 6, SkippedNonIP: 1, SkippedNonTCP: 1, Fragments: 1, Undecodable: 3}
	st.Bytes = 0
	if st != want {
		t.Errorf("stats (-want +got):\n- %+v\n+ %+v", want, st)
	}
	if len(rec.chunks) != 0 {
		t.Errorf("got %d chunks from junk, want none", len(rec.chunks))
	}
}

func TestOffloadArtifacts(t *testing.T) {
	// Captures on the sending host (loopback above all) see packets before
	// the NIC fills in checksums and splits segments.
	tests := []struct {
		name  string
		v6    bool
		patch func(ip []byte)
	}{
		{"zero IPv4 and TCP checksums", false, func(ip []byte) {
			ip[10], ip[11] = 0, 0
			ip[20+16], ip[20+17] = 0, 0
		}},
		{"IPv4 total length 0 (TSO)", false, func(ip []byte) { ip[2], ip[3] = 0, 0 }},
		{"IPv6 payload length 0 (GSO)", true, func(ip []byte) { ip[4], ip[5] = 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := frame(t, layers.LinkTypeEthernet, seg{seq: 1, flags: "PA", data: "offloaded", v6: tt.v6}, 0)
			tt.patch(data[14:])
			rec := &recorder{}
			a := NewAssembler(nil, rec)
			a.Packet(layers.LinkTypeEthernet, data, gopacket.CaptureInfo{Timestamp: base, CaptureLength: len(data), Length: len(data)})
			a.Close()
			want := []string{"c1 to_server data offloaded", "c1 to_server close eof", "c1 to_client close eof"}
			if d := diffLines(want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	var segs []seg
	for c := range 50 {
		segs = append(segs,
			seg{at: time.Duration(c), c: c, seq: 1, flags: "PA", data: "a"},
			seg{at: time.Duration(c), c: c, seq: 5, flags: "PA", data: "b"}, // leaves a gap
		)
	}
	file := pcapFile(t, layers.LinkTypeEthernet, 0, segs...)
	var first []string
	for i := range 5 {
		rec := &recorder{}
		if _, err := runFiles(t, nil, rec, file); err != nil {
			t.Fatal(err)
		}
		got := rec.lines(true)
		if i == 0 {
			first = got
		} else if d := diffLines(first, got); d != "" {
			t.Fatalf("run %d differs from run 0 (-run0 +run%d):\n%s", i, i, d)
		}
	}
}

func TestPacketAllocatesNothing(t *testing.T) {
	a := NewAssembler(nil, SinkFunc(func(*Chunk) {}))
	payload := strings.Repeat("x", 1000)
	seq := uint32(1)
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = frame(t, layers.LinkTypeEthernet, seg{seq: seq, flags: "PA", data: payload}, 0)
		seq += uint32(len(payload))
	}
	i := 0
	feed := func() {
		f := frames[i%len(frames)]
		a.Packet(layers.LinkTypeEthernet, f, gopacket.CaptureInfo{Timestamp: base, CaptureLength: len(f), Length: len(f)})
		i++
	}
	for range len(frames) {
		feed() // warm up: connection and buffers
	}
	frames = frames[:0]
	for range 64 {
		frames = append(frames, frame(t, layers.LinkTypeEthernet, seg{seq: seq, flags: "PA", data: payload}, 0))
		seq += uint32(len(payload))
	}
	i = 0
	if n := testing.AllocsPerRun(len(frames)-1, feed); n != 0 {
		t.Errorf("Packet allocates %v times per in-order packet, want 0", n)
	}
}

// TestFlushInterleaves: a flush that gives up on missing segments delivers
// what both directions held behind them in capture-time order across the
// two, each direction's own order kept: the decoder then meets each
// response after its request (before, a whole direction came first).
func TestFlushInterleaves(t *testing.T) {
	segs := cat(handshake(0, 0), []seg{
		{at: time.Second, seq: 1, flags: "PA", data: "q1"},
		{at: 1100 * time.Millisecond, toCli: true, seq: 1, flags: "PA", data: "r1"},
		// q2 (seq 3) and r2 (seq 3) are lost
		{at: 3 * time.Second, seq: 5, flags: "PA", data: "q3"},
		{at: 3100 * time.Millisecond, toCli: true, seq: 5, flags: "PA", data: "r3"},
		{at: 4 * time.Second, seq: 7, flags: "PA", data: "q4"},
		{at: 4100 * time.Millisecond, toCli: true, seq: 7, flags: "PA", data: "r4"},
	})
	rec := &recorder{}
	if _, err := runFiles(t, nil, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs...)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1s c1 to_server data q1",
		"1.1s c1 to_client data r1",
		"4.1s c1 to_server gap 2",
		"3s c1 to_server data q3",
		"4.1s c1 to_client gap 2",
		"3.1s c1 to_client data r3",
		"4s c1 to_server data q4",
		"4.1s c1 to_client data r4",
		"4.1s c1 to_server close eof",
		"4.1s c1 to_client close eof",
	}
	if d := diffLines(want, rec.lines(true)); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
}
