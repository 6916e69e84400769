package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Connections without payload give way when the connection table is full
// (issue #9).

func TestEvictQuiet(t *testing.T) {
	// At most two connections: c0 carries data, c1 only shakes hands. c2
	// takes c1's place; c1 then sends data and, having left the table, is
	// a new connection (4) that takes c2's place; c3 finds only
	// connections with data, and is not tracked.
	segs := func(v6 bool) []seg {
		return []seg{
			{at: 0, c: 0, flags: "S", v6: v6},
			{at: 0, c: 0, toCli: true, flags: "SA", v6: v6},
			{at: 1 * time.Millisecond, c: 0, seq: 1, flags: "PA", data: "req", v6: v6},
			{at: 2 * time.Millisecond, c: 1, flags: "S", v6: v6},
			{at: 2 * time.Millisecond, c: 1, toCli: true, flags: "SA", v6: v6},
			{at: 2 * time.Millisecond, c: 1, seq: 1, flags: "A", v6: v6},
			{at: 3 * time.Millisecond, c: 2, flags: "S", v6: v6},
			{at: 4 * time.Millisecond, c: 1, seq: 1, flags: "PA", data: "late", v6: v6},
			{at: 5 * time.Millisecond, c: 3, flags: "S", v6: v6},
			{at: 6 * time.Millisecond, c: 0, seq: 4, flags: "PA", data: "more", v6: v6},
		}
	}
	want := []string{
		"c1 to_server data req",
		"c2 to_server close evict", "c2 to_client close evict",
		"c3 to_server close evict", "c3 to_client close evict",
		"c4 to_server data late",
		"c1 to_server data more",
		"c1 to_server close eof", "c1 to_client close eof", "c4 to_server close eof", "c4 to_client close eof",
	}
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			rec := &recorder{}
			st, err := runFiles(t, &Options{Ports: brokerPort, MaxConns: 2}, rec, pcapFile(t, layers.LinkTypeEthernet, 0, segs(v6)...))
			if err != nil {
				t.Fatal(err)
			}
			if d := diffLines(want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if st.ConnsSeen != 4 || st.ConnsEvictedNoData != 2 || st.ConnsOverCap != 1 || st.PacketsOverCap != 1 || st.ConnsOpen != 0 {
				t.Errorf("conns_seen, conns_evicted_no_data, conns_over_cap, packets_over_cap, conns_open = %d, %d, %d, %d, %d; want 4, 2, 1, 1, 0",
					st.ConnsSeen, st.ConnsEvictedNoData, st.ConnsOverCap, st.PacketsOverCap, st.ConnsOpen)
			}
		})
	}
}

// floodHeapCeiling bounds the live heap after TestSYNFloodEvictsQuiet's
// flood: the 10,000 connections of a full table (reassembly state, stream,
// Conn) and the reassembly pool's free list. Measured: 14 MB. Evicted
// connections left in the pool until the idle timeout: 400 MB.
const floodHeapCeiling = 32 << 20

// TestSYNFloodEvictsQuiet: five client connections to the broker, four
// open before a flood of 300,000 connections that send a SYN and nothing
// else, one opened in the middle of it. The table holds 10,000. The flood
// takes the place of its own oldest connections; the clients' requests
// and responses, sent throughout, arrive whole, without a gap or an early
// close, and the table's memory stays that of 10,000 connections.
func TestSYNFloodEvictsQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("300,000 connections: about a second")
	}
	const (
		maxConns = 10000
		flood    = 300000
		clients  = 5 // client 4 connects in the middle of the flood
		every    = 10000
	)
	// Bytes of the clients' connections, by client port and direction.
	var got, want [clients][2]bytes.Buffer
	var gaps, early, closes, evictCloses int
	ids := map[uint64]bool{}
	sink := SinkFunc(func(c *Chunk) {
		i := int(c.Conn.Client.Port()) - int(cli4.Port())
		client := c.Conn.Client.Addr() == cli4.Addr() && i >= 0 && i < clients
		switch {
		case c.Kind == Close:
			closes++
			if c.Reason == CloseEvict {
				evictCloses++
			}
			if client && c.Reason != CloseEOF {
				early++
			}
		case !client:
			t.Errorf("flood connection %v got a %v chunk", c.Conn.Client, c.Kind)
		case c.Kind == Gap:
			gaps++
		default:
			got[i][c.Dir].Write(c.Data)
		}
		if client {
			ids[c.Conn.ID] = true
		}
	})
	a := NewAssembler(&Options{Ports: brokerPort, MaxConns: maxConns}, sink)
	now := base
	put := func(data []byte) {
		a.Packet(layers.LinkTypeEthernet, data, gopacket.CaptureInfo{Timestamp: now, CaptureLength: len(data), Length: len(data)})
	}
	var seq [clients][2]uint32
	open := func(c int) {
		for _, s := range handshake(c, 0) {
			put(frame(t, layers.LinkTypeEthernet, s, 0))
		}
		seq[c] = [2]uint32{1, 1}
	}
	exchange := func(c, n int) {
		for dir, data := range []string{fmt.Sprintf("request %d;", n), fmt.Sprintf("response %d;", n)} {
			put(frame(t, layers.LinkTypeEthernet, seg{c: c, toCli: dir == 1, seq: seq[c][dir], flags: "PA", data: data}, 0))
			seq[c][dir] += uint32(len(data))
			want[c][dir].WriteString(data)
		}
	}
	for c := range clients - 1 {
		open(c)
		exchange(c, 0)
	}

	// The flood's SYNs: one frame, its source address and port rewritten
	// (capture checks no checksum).
	syn := frame(t, layers.LinkTypeEthernet, seg{flags: "S"}, 0)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for i := range flood {
		now = now.Add(time.Microsecond)
		copy(syn[14+12:], []byte{172, 16, byte(i / 50000), 1})
		binary.BigEndian.PutUint16(syn[34:], uint16(10000+i%50000))
		put(syn)
		if i == flood/2 {
			// A client sends its first request right after the handshake:
			// it would be evicted after maxConns more SYNs without one.
			open(clients - 1)
			exchange(clients-1, 0)
		}
		if i%every == every-1 {
			for c := range clients {
				if c < clients-1 || i > flood/2 {
					exchange(c, i/every+1)
				}
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap := int64(ms.HeapAlloc) - int64(before)
	st := a.st
	for c := range clients {
		exchange(c, -1)
	}
	a.Close()
	t.Logf("live heap after the flood %+d KB (%d connections tracked); capture %+v", heap>>10, st.ConnsOpen, a.Stats())

	for c := range clients {
		for dir := range 2 {
			if g, w := got[c][dir].String(), want[c][dir].String(); g != w {
				t.Errorf("client %d %v: got %d bytes, want %d:\n got  %.80q...\n want %.80q...", c, Dir(dir), len(g), len(w), g, w)
			}
		}
	}
	if gaps != 0 || early != 0 || len(ids) != clients {
		t.Errorf("clients' gaps, closes before the end, connection ids = %d, %d, %d; want 0, 0, %d", gaps, early, len(ids), clients)
	}
	// Every connection beyond the table's size took the place of one.
	wantEvicted := uint64(clients + flood - maxConns)
	st = a.Stats()
	if st.ConnsSeen != clients+flood || st.ConnsEvictedNoData != wantEvicted || st.ConnsOverCap != 0 || st.ConnsOpen != 0 {
		t.Errorf("conns_seen, conns_evicted_no_data, conns_over_cap, conns_open = %d, %d, %d, %d; want %d, %d, 0, 0",
			st.ConnsSeen, st.ConnsEvictedNoData, st.ConnsOverCap, st.ConnsOpen, clients+flood, wantEvicted)
	}
	if closes != 2*(clients+flood) || evictCloses != 2*int(wantEvicted) {
		t.Errorf("closes, evict closes = %d, %d; want %d, %d", closes, evictCloses, 2*(clients+flood), 2*wantEvicted)
	}
	if heap > floodHeapCeiling {
		t.Errorf("live heap grew by %d MB over the flood, ceiling %d MB", heap>>20, floodHeapCeiling>>20)
	}
}
