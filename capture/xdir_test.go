package capture

import (
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// TestCrossDirection: with each direction on a path of its own (a tap with
// one feed per direction, a SPAN port), bytes that acknowledge bytes of the
// other direction not yet captured wait for them, and only for them: the
// chunks come in the order the bytes were sent. Client bytes begin at
// 1000, the broker's at 5000.
func TestCrossDirection(t *testing.T) {
	const us = time.Microsecond
	synAck := seg{toCli: true, seq: 4999, flags: "SA", ackNo: 1000}
	syn := seg{seq: 999, flags: "S"}
	hsAck := seg{seq: 1000, flags: "A", ackNo: 5000}
	at := func(s seg, d time.Duration) seg { s.at = d; return s }
	tests := []struct {
		name      string
		segs      []seg
		want      []string
		handshake bool // the connection is seen from its first byte
	}{{
		name: "response before its request, SYN-ACK before its SYN",
		segs: []seg{
			at(synAck, 0),
			{at: 10 * us, toCli: true, seq: 5000, flags: "PA", ackNo: 1004, data: "pong"},
			at(syn, 20*us),
			at(hsAck, 21*us),
			{at: 22 * us, seq: 1000, flags: "PA", ackNo: 5000, data: "ping"},
			{at: 30 * us, toCli: true, seq: 5004, flags: "FA", ackNo: 1004},
			{at: 40 * us, seq: 1004, flags: "FA", ackNo: 5005},
		},
		want: []string{
			"22µs c1 to_server data ping",
			"22µs c1 to_client data pong", // dated when it could be read
			"30µs c1 to_client close fin",
			"40µs c1 to_server close fin",
		},
		handshake: true,
	}, {
		name: "a request before the response it acknowledges",
		segs: []seg{
			at(syn, 0), at(hsAck, 1*us),
			{at: 2 * us, seq: 1000, flags: "PA", ackNo: 5000, data: "ping"},
			{at: 3 * us, seq: 1004, flags: "PA", ackNo: 5004, data: "more"},
			at(synAck, 10*us),
			{at: 11 * us, toCli: true, seq: 5000, flags: "PA", ackNo: 1004, data: "pong"},
		},
		want: []string{
			"2µs c1 to_server data ping",
			"11µs c1 to_client data pong",
			"11µs c1 to_server data more",
			"11µs c1 to_server close eof",
			"11µs c1 to_client close eof",
		},
		handshake: true,
	}, {
		name: "acknowledged bytes never captured: held for ReorderTimeout, with their own time",
		segs: []seg{
			at(syn, 0), at(synAck, 0), at(hsAck, 0),
			{at: 11 * us, toCli: true, seq: 5000, flags: "PA", ackNo: 1004, data: "pong"},
			{at: 6 * time.Second, c: 1, seq: 7, flags: "PA", data: "a"},
		},
		want: []string{
			"11µs c1 to_client data pong",
			"6s c2 to_server data a",
			"11µs c1 to_server close eof", // dated by the connection's last packet
			"11µs c1 to_client close eof",
			"6s c2 to_server close eof",
			"6s c2 to_client close eof",
		},
		handshake: true,
	}, {
		name: "one direction, no handshake: nothing held",
		segs: []seg{
			{at: 0, seq: 1000, flags: "PA", ackNo: 5004, data: "ping"},
			{at: 1 * us, c: 1, seq: 7, flags: "PA", data: "x"},
			{at: 2 * us, seq: 1004, flags: "PA", ackNo: 5008, data: "more"},
		},
		want: []string{
			"0s c1 to_server data ping",
			"1µs c2 to_server data x",
			"2µs c1 to_server data more",
			"2µs c1 to_server close eof",
			"2µs c1 to_client close eof",
			"1µs c2 to_server close eof",
			"1µs c2 to_client close eof",
		},
	}}
	for _, tt := range tests {
		for _, ref := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/reference"}[ref], func(t *testing.T) {
				rec := &recorder{}
				st, err := runFiles(t, &Options{ReferenceTCP: ref}, rec, pcapFile(t, layers.LinkTypeEthernet, 0, tt.segs...))
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if d := diffLines(tt.want, rec.lines(true)); d != "" {
					t.Errorf("chunks (-want +got):\n%s", d)
				}
				if st.Gaps != 0 {
					t.Errorf("%d gaps, want none", st.Gaps)
				}
				if len(rec.chunks) > 0 && rec.chunks[0].Conn.Handshake != tt.handshake {
					t.Errorf("Conn.Handshake = %v, want %v", rec.chunks[0].Conn.Handshake, tt.handshake)
				}
			})
		}
	}
}
