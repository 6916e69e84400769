package capture

import (
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// handshake returns the three-way handshake of connection c at time at;
// both sides' data then starts at seq 1.
func handshake(c int, at time.Duration) []seg {
	return []seg{
		{at: at, c: c, flags: "S"},
		{at: at, c: c, toCli: true, flags: "SA"},
		{at: at, c: c, seq: 1, flags: "A"},
	}
}

func cat(parts ...[]seg) []seg { return slices.Concat(parts...) }

// reassemblyTest is a conversation and the chunks it must give.
type reassemblyTest struct {
	name   string
	opts   *Options
	segs   []seg
	want   []string
	check  func(t *testing.T, st Stats) // optional
	checkC func(t *testing.T, c *Conn)  // optional, on the first chunk's Conn
}

var brokerPort, _ = ParsePorts("9092")

var reassemblyTests = []reassemblyTest{{
	name: "in order with handshake and FIN",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "hello"},
		{at: 2, toCli: true, seq: 1, flags: "PA", data: "world"},
		{at: 3, seq: 6, flags: "FA"},
		{at: 4, toCli: true, seq: 6, flags: "FA"},
	}),
	want: []string{
		"c1 to_server data hello",
		"c1 to_client data world",
		"c1 to_server close fin",
		"c1 to_client close fin",
	},
	checkC: func(t *testing.T, c *Conn) {
		if c.Role != RoleSYN || c.Client != cli4 || c.Server != srv4 || !c.Start.Equal(base) {
			t.Errorf("conn = %+v, want client %v server %v role syn start %v", c, cli4, srv4, base)
		}
	},
}, {
	name: "out of order segment is put back in order",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 7, flags: "PA", data: "ccc"},
		{at: 3, seq: 4, flags: "PA", data: "bbb"},
	}),
	want: []string{
		"c1 to_server data aaa",
		// Each keeps its own capture time: ccc came first.
		"c1 to_server data bbb",
		"c1 to_server data ccc",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.OutOfOrder != 1 || st.Retransmitted != 0 || st.Gaps != 0 {
			t.Errorf("out_of_order, retransmitted, gaps = %d, %d, %d; want 1, 0, 0", st.OutOfOrder, st.Retransmitted, st.Gaps)
		}
	},
}, {
	name: "retransmissions are delivered once",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "abc"},
		{at: 2, seq: 1, flags: "PA", data: "abc"},
		{at: 3, seq: 2, flags: "PA", data: "bcdef"},
	}),
	want: []string{
		"c1 to_server data abc",
		"c1 to_server data def",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.Retransmitted != 2 || st.Duplicates != 0 {
			t.Errorf("retransmitted, duplicates = %d, %d; want 2, 0", st.Retransmitted, st.Duplicates)
		}
	},
}, {
	name: "missing segment becomes a gap of its size at end of input",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 11, flags: "PA", data: "ccc"},
	}),
	want: []string{
		"c1 to_server data aaa",
		"c1 to_server gap 7",
		"c1 to_server data ccc",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.Gaps != 1 || st.GapBytes != 7 || st.BufferLimitGaps != 0 || st.DeliveredBytes != 6 {
			t.Errorf("gaps, gap_bytes, buffer_limit_gaps, delivered = %d, %d, %d, %d; want 1, 7, 0, 6",
				st.Gaps, st.GapBytes, st.BufferLimitGaps, st.DeliveredBytes)
		}
	},
}, {
	name: "missing bytes before a FIN",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "aaa"},
		{at: 2, seq: 7, flags: "FA"},
	}),
	want: []string{
		"c1 to_server data aaa",
		"c1 to_server gap 3",
		"c1 to_server close fin",
		"c1 to_client close eof",
	},
}, {
	name: "mid-stream start without SYN, roles by port",
	opts: &Options{Ports: brokerPort},
	segs: []seg{
		{at: 0, toCli: true, seq: 5000, flags: "PA", data: "response"},
		{at: 1, seq: 900, flags: "PA", data: "request"},
	},
	want: []string{
		"c1 to_client data response",
		"c1 to_server data request",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	checkC: func(t *testing.T, c *Conn) {
		if c.Role != RolePort || c.Server != srv4 {
			t.Errorf("role, server = %v, %v; want port, %v", c.Role, c.Server, srv4)
		}
	},
}, {
	name: "mid-stream start without SYN or ports: lower port is the server",
	segs: []seg{{at: 0, toCli: true, seq: 5000, flags: "PA", data: "response"}},
	want: []string{
		"c1 to_client data response",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	checkC: func(t *testing.T, c *Conn) {
		if c.Role != RoleGuess || c.Server != srv4 {
			t.Errorf("role, server = %v, %v; want guess, %v", c.Role, c.Server, srv4)
		}
	},
}, {
	// Both directions end resetGrace after the RST, together: what the
	// peer sent before the RST reached it may be captured after it (a tap
	// with one feed per direction); later bytes are dropped.
	name: "RST ends both directions",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "hello"},
		{at: 2, toCli: true, seq: 1, flags: "R"},
		{at: 3, seq: 6, flags: "PA", data: "late"},
		{at: 2 + resetGrace + 1, seq: 10, flags: "PA", data: "too late"},
	}),
	want: []string{
		"c1 to_server data hello",
		"c1 to_server data late",
		"c1 to_server close rst",
		"c1 to_client close rst",
	},
}, {
	name: "4-tuple reused after both FINs is a new connection",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "FA"},
		{at: 2, toCli: true, seq: 1, flags: "FA"},
		{at: 3, seq: 1000, flags: "S"},
		{at: 4, seq: 1001, flags: "PA", data: "again"},
	}),
	want: []string{
		"c1 to_server close fin",
		"c1 to_client close fin",
		"c2 to_server data again",
		"c2 to_server close eof",
		"c2 to_client close eof",
	},
}, {
	// A server that resets a connection right after the handshake (a
	// port probe), and the client's next connect() from the same port:
	// no TIME_WAIT after a RST, so the kernel may reuse the 4-tuple at
	// once (r_848: a consumer's Fetch connection 13 s after a probe of
	// the broker's listener from the same port).
	name: "4-tuple reused after a RST is a new connection",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, toCli: true, seq: 1, flags: "RA"},
		{at: 13 * time.Second, seq: 1000, flags: "S"},
		{at: 13 * time.Second, toCli: true, seq: 5000, flags: "SA", ackNo: 1001},
		{at: 13 * time.Second, seq: 1001, flags: "A", ackNo: 5001},
		{at: 14 * time.Second, seq: 1001, flags: "PA", data: "again", ackNo: 5001},
		{at: 15 * time.Second, toCli: true, seq: 5001, flags: "PA", data: "answer", ackNo: 1006},
	}),
	want: []string{
		"c1 to_server close rst",
		"c1 to_client close rst",
		"c2 to_server data again",
		"c2 to_client data answer",
		"c2 to_server close eof",
		"c2 to_client close eof",
	},
}, {
	// The same with the directions captured apart: the new connection's
	// SYN-ACK comes before its SYN (TestReorderCross: r_848). It starts
	// the new connection, at its own time.
	name: "4-tuple reused after a RST, its SYN-ACK first, is a new connection",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, toCli: true, seq: 1, flags: "RA"},
		{at: 13 * time.Second, toCli: true, seq: 5000, flags: "SA", ackNo: 1001},
		{at: 13*time.Second + time.Millisecond, seq: 1000, flags: "S"},
		{at: 13*time.Second + time.Millisecond, seq: 1001, flags: "A", ackNo: 5001},
		{at: 14 * time.Second, seq: 1001, flags: "PA", data: "again", ackNo: 5001},
		{at: 15 * time.Second, toCli: true, seq: 5001, flags: "PA", data: "answer", ackNo: 1006},
	}),
	want: []string{
		"c1 to_server close rst",
		"c1 to_client close rst",
		"c2 to_server data again",
		"c2 to_client data answer",
		"c2 to_server close eof",
		"c2 to_client close eof",
	},
}, {
	// The same without the fast path (tcp_fast.go).
	name: "4-tuple reused after a RST is a new connection, gopacket alone",
	opts: &Options{ReferenceTCP: true},
	segs: cat(handshake(0, 0), []seg{
		{at: 1, toCli: true, seq: 1, flags: "RA"},
		{at: 50 * time.Millisecond, seq: 1000, flags: "S"},
		{at: 60 * time.Millisecond, seq: 1001, flags: "PA", data: "again"},
	}),
	want: []string{
		// The SYN came before the RST's grace ended: that ends now.
		"c1 to_server close rst",
		"c1 to_client close rst",
		"c2 to_server data again",
		"c2 to_server close eof",
		"c2 to_client close eof",
	},
}, {
	// A late copy of the connection's own SYN starts nothing.
	name: "the old SYN again after a RST is no new connection",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, toCli: true, seq: 1, flags: "RA"},
		{at: time.Second, flags: "S"},
		{at: time.Second, seq: 1, flags: "PA", data: "late"},
	}),
	want: []string{
		"c1 to_server close rst",
		"c1 to_client close rst",
	},
}, {
	// The copy of a connection whose directions were captured apart can
	// hold the peer's SYN-ACK and RST (a port probe reset after the
	// handshake) before the SYN they answer: that SYN is the
	// connection's own, which the SYN-ACK acknowledged, not a new
	// connection on its 4-tuple (TestReorderCross: r3_joins's probes).
	name: "a SYN behind the SYN-ACK and RST that answer it is no new connection",
	segs: []seg{
		{at: 0, toCli: true, flags: "SA"},
		{at: time.Millisecond, toCli: true, seq: 1, flags: "RA"},
		{at: 2 * time.Millisecond, flags: "S"},
		{at: 2 * time.Millisecond, seq: 1, flags: "A"},
	},
	want: []string{
		"c1 to_client close rst",
		"c1 to_server close rst",
	},
}, {
	name: "idle connection closed by capture time",
	segs: cat(handshake(0, 0), []seg{
		{at: time.Second, seq: 1, flags: "PA", data: "old"},
		{at: 6 * time.Minute, c: 1, seq: 1, flags: "PA", data: "new"},
	}),
	want: []string{
		"c1 to_server data old",
		"c1 to_server close idle",
		"c1 to_client close idle",
		"c2 to_server data new",
		"c2 to_server close eof",
		"c2 to_client close eof",
	},
}, {
	name: "missing segment given up after the reorder timeout",
	segs: cat(handshake(0, 0), []seg{
		{at: time.Second, seq: 1, flags: "PA", data: "aaa"},
		{at: 2 * time.Second, seq: 7, flags: "PA", data: "ccc"},
		{at: 10 * time.Second, toCli: true, seq: 1, flags: "PA", data: "resp"},
	}),
	want: []string{
		"c1 to_server data aaa",
		"c1 to_server gap 3",
		"c1 to_server data ccc",
		"c1 to_client data resp",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
}, {
	name: "buffer limit forces a gap",
	opts: &Options{MaxBufferedPagesPerConn: 2},
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "a"},
		{at: 2, seq: 3, flags: "PA", data: "c"},
		{at: 3, seq: 4, flags: "PA", data: "d"},
		{at: 4, seq: 5, flags: "PA", data: "e"},
	}),
	want: []string{
		"c1 to_server data a",
		// The limit bites when d is queued: c is pushed out behind
		// the gap, with d after it.
		"c1 to_server gap 1",
		"c1 to_server data c",
		"c1 to_server data d",
		"c1 to_server data e",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.BufferLimitGaps != 1 {
			t.Errorf("buffer_limit_gaps = %d, want 1", st.BufferLimitGaps)
		}
	},
}, {
	name: "snaplen cut: captured bytes, then a gap of the rest, without waiting",
	segs: cat(handshake(0, 0), []seg{
		{at: 1, seq: 1, flags: "PA", data: "hello world", snap: 5},
		{at: 2, seq: 12, flags: "PA", data: "next"},
	}),
	want: []string{
		"c1 to_server data hello",
		"c1 to_server gap 6",
		"c1 to_server data next",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.SnaplenTruncated != 1 || st.GapBytes != 6 || st.DeliveredBytes != 9 {
			t.Errorf("snaplen_truncated, gap_bytes, delivered = %d, %d, %d; want 1, 6, 9", st.SnaplenTruncated, st.GapBytes, st.DeliveredBytes)
		}
	},
}, {
	name: "connection cap: further connections are not tracked",
	opts: &Options{MaxConns: 1},
	segs: []seg{
		{at: 0, seq: 1, flags: "PA", data: "one"},
		{at: 1, c: 1, seq: 1, flags: "PA", data: "two"},
		{at: 2, c: 1, seq: 4, flags: "PA", data: "more"},
	},
	want: []string{
		"c1 to_server data one",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
	check: func(t *testing.T, st Stats) {
		if st.ConnsSeen != 1 || st.ConnsOverCap != 1 || st.PacketsOverCap != 2 || st.ConnsOpen != 0 {
			t.Errorf("conns_seen, conns_over_cap, packets_over_cap, conns_open = %d, %d, %d, %d; want 1, 1, 2, 0",
				st.ConnsSeen, st.ConnsOverCap, st.PacketsOverCap, st.ConnsOpen)
		}
	},
}, {
	name: "connections closed at end of input in ID order",
	segs: []seg{
		{at: 0, c: 3, seq: 1, flags: "PA", data: "x"},
		{at: 1, c: 1, seq: 1, flags: "PA", data: "y"},
		{at: 2, c: 2, seq: 1, flags: "PA", data: "z"},
	},
	want: []string{
		"c1 to_server data x", "c2 to_server data y", "c3 to_server data z",
		"c1 to_server close eof", "c1 to_client close eof",
		"c2 to_server close eof", "c2 to_client close eof",
		"c3 to_server close eof", "c3 to_client close eof",
	},
}, {
	name: "IPv6",
	segs: []seg{
		{at: 0, seq: 1, flags: "PA", data: "hello", v6: true},
		{at: 1, toCli: true, seq: 1, flags: "PA", data: "world", v6: true},
	},
	want: []string{
		"c1 to_server data hello",
		"c1 to_client data world",
		"c1 to_server close eof",
		"c1 to_client close eof",
	},
}}

func TestReassembly(t *testing.T) {
	for _, tt := range reassemblyTests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			st, err := runFiles(t, tt.opts, rec, pcapFile(t, layers.LinkTypeEthernet, 0, tt.segs...))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if d := diffLines(tt.want, rec.lines(false)); d != "" {
				t.Errorf("chunks (-want +got):\n%s", d)
			}
			if tt.check != nil {
				tt.check(t, st)
			}
			if tt.checkC != nil && len(rec.chunks) > 0 {
				tt.checkC(t, rec.chunks[0].Conn)
			}
		})
	}
}
