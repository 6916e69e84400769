package decode

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

func saslHandshakeReq() *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Mechanism = "PLAIN"
	return r
}

// rawToken is a SASL token framed by a bare int32 length (KIP-43, v0).
func rawToken(s string) []byte {
	b := []byte{0, 0, 0, byte(len(s))}
	return append(b, s...)
}

// oldRdkafkaAPIVersions is the ApiVersions v0 request librdkafka wrote
// before 1.0 (rd_kafka_ApiVersionRequest: "Empty array: request all
// APIs"): four zero bytes after a request that has no field.
func oldRdkafkaAPIVersions(corr int32) []byte {
	b := append(reqFrame(kmsg.NewPtrApiVersionsRequest(), 0, corr, "rdkafka"), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestResync(t *testing.T) {
	big := reqFrame(produceReq(-1, 5000), 9, 1, "p")
	bigResp := respFrame(produceResp(), 9, 1)
	hb := func(corr int32) []step {
		return []step{req(reqFrame(heartbeatReq(1), 4, corr, "c")), resp(respFrame(heartbeatResp(0), 4, corr))}
	}
	tests := []struct {
		name      string
		opts      *Options
		midstream bool
		steps     []step
		want      []string
		anomalies []AnomalyKind
	}{{
		name:      "capture starts mid-frame in both directions",
		midstream: true,
		steps: append([]step{
			req(big[1234:]), resp(bigResp[5:]),
		}, hb(2)...),
		want:      []string{"Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyResync, AnomalyResync},
	}, {
		// The capture began after two requests were sent: their answers
		// come first, whole, and are no skipped bytes but unmatched.
		name:      "capture starts between frames, answers to requests not captured first",
		midstream: true,
		steps: append([]step{
			resp(bigResp[7:]), resp(respFrame(heartbeatResp(0), 4, 5)), resp(respFrame(produceResp(), 9, 6)), req(big[3:]),
			req(reqFrame(heartbeatReq(1), 4, 7, "c")), resp(respFrame(heartbeatResp(0), 4, 7)),
		}, hb(8)...),
		want:      []string{"Heartbeat v4 #7 seen", "Heartbeat v4 #8 seen"},
		anomalies: []AnomalyKind{AnomalyResync, AnomalyUnmatchedResponse, AnomalyUnmatchedResponse, AnomalyResync},
	}, {
		// librdkafka before 1.0 wrote an empty array (int32 0) into
		// ApiVersions v0, which has no field: the broker ignores it, and
		// so must a resync.
		name:      "capture starts before librdkafka's ApiVersions v0 with its trailing empty array",
		midstream: true,
		steps: []step{
			req(oldRdkafkaAPIVersions(3)), resp(respFrame(kmsg.NewPtrApiVersionsResponse(), 0, 3)),
			req(reqFrame(heartbeatReq(1), 4, 4, "rdkafka")), resp(respFrame(heartbeatResp(0), 4, 4)),
		},
		want: []string{"ApiVersions v0 #3 seen", "Heartbeat v4 #4 seen"},
	}, {
		name: "gap inside a request of known length: stays in sync",
		steps: append([]step{
			req(big[:100]), gap(capture.ToServer, 1000), req(big[1100:]), resp(bigResp),
		}, hb(2)...),
		want:      []string{"Produce v9 #1 seen noreq", "Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyGap},
	}, {
		name: "gap inside a response of known length: stays in sync",
		steps: append([]step{
			req(big), resp(bigResp[:10]), gap(capture.ToClient, 5), resp(bigResp[15:]),
		}, hb(2)...),
		want:      []string{"Produce v9 #1 seen noresp", "Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyGap},
	}, {
		name: "gap across a frame boundary: resync on the next request",
		steps: append([]step{
			req(big[:100]), gap(capture.ToServer, len(big)-100+10), req(reqFrame(heartbeatReq(1), 4, 9, "c")[10:]), resp(bigResp),
			resp(respFrame(heartbeatResp(0), 4, 9)),
		}, hb(2)...),
		want:      []string{"Produce v9 #1 seen noreq", "Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyGap, AnomalyResync, AnomalyUnmatchedResponse},
	}, {
		name: "gap of unknown size",
		steps: append([]step{
			req(big[:100]), gap(capture.ToServer, -1), req(big[3000:]),
		}, hb(2)...),
		want:      []string{"Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyGap, AnomalyResync},
	}, {
		// Reassembly holds a direction with a missing segment until it
		// gives up on it, while the other direction flows on.
		name: "responses delivered before their requests are paired",
		steps: []step{
			req(reqFrame(heartbeatReq(1), 4, 1, "c")),
			resp(respFrame(heartbeatResp(0), 4, 1)), resp(respFrame(heartbeatResp(0), 4, 2)), resp(respFrame(heartbeatResp(0), 4, 3)),
			req(reqFrame(heartbeatReq(1), 4, 3, "c")),
		},
		want:      []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #3 seen"},
		anomalies: []AnomalyKind{AnomalyUnmatchedResponse},
	}, {
		name: "oversize frame skipped in sync",
		opts: &Options{MaxFrame: 1000},
		steps: append([]step{
			req(big), resp(bigResp),
		}, hb(2)...),
		want:      []string{"Produce v9 #1 seen noreq", "Heartbeat v4 #2 seen"},
		anomalies: []AnomalyKind{AnomalyOversize},
	}, {
		name:      "TLS client hello",
		steps:     []step{req([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}), req(big)},
		anomalies: []AnomalyKind{AnomalyTLS},
	}, {
		name:      "HTTP on a broker port",
		opts:      &Options{SniffBytes: 100},
		steps:     []step{req([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), req(make([]byte, 200)), req(big)},
		anomalies: []AnomalyKind{AnomalyNotKafka},
	}, {
		name: "unknown API key: header-level exchange",
		steps: []step{
			req(func() []byte { b := reqFrame(heartbeatReq(1), 4, 5, "c"); b[4], b[5] = 0, 120; return b }()),
			resp(respFrame(heartbeatResp(0), 4, 5)),
			req(func() []byte { b := reqFrame(heartbeatReq(1), 4, 6, "c"); b[4], b[5] = 0, 120; return b }()),
			resp(respFrame(heartbeatResp(0), 4, 6)),
		},
		want:      []string{"Unknown v4 #5 seen noreq noresp", "Unknown v4 #6 seen noreq noresp"},
		anomalies: []AnomalyKind{AnomalyUnknownAPI},
	}, {
		name: "SASL v0 raw tokens are skipped, never decoded",
		steps: append([]step{
			req(reqFrame(saslHandshakeReq(), 0, 1, "c")), resp(respFrame(kmsg.NewPtrSASLHandshakeResponse(), 0, 1)),
			req(rawToken("\x00user\x00secret-password")), resp([]byte{0, 0, 0, 0}),
		}, hb(2)...),
		want: []string{"SASLHandshake v0 #1 seen", "Heartbeat v4 #2 seen"},
	}}
	for _, tt := range tests {
		for _, split := range []int{0, 3, 500} {
			t.Run(fmt.Sprintf("%s/split=%d", tt.name, split), func(t *testing.T) {
				r, _, _ := feed(tt.opts, newConn(capture.RolePort, !tt.midstream), split, tt.steps...)
				got := summary(r)
				diff(t, "exchanges", tt.want, got)
				diff(t, "anomalies", tt.anomalies, r.kinds())
			})
		}
	}
}

// TestGuessedSides checks a mid-stream connection on no known broker port,
// whose sides the source guessed wrong: requests are found in the direction
// the source called ToClient, and the sides are swapped.
func TestGuessedSides(t *testing.T) {
	big := reqFrame(produceReq(-1, 3000), 9, 1, "p")
	flip := func(s step) step { s.dir = 1 - s.dir; return s }
	steps := []step{
		flip(req(big[700:])), flip(resp(respFrame(produceResp(), 9, 1)[3:])),
		flip(req(reqFrame(heartbeatReq(1), 4, 2, "c"))), resp(respFrame(heartbeatResp(0), 4, 2)),
		req(reqFrame(heartbeatReq(1), 4, 3, "c")), resp(respFrame(heartbeatResp(0), 4, 3)),
	}
	// The swap happens on the third step; after it, the source names
	// directions by the new sides, so the later steps are not flipped.
	conn := newConn(capture.RoleGuess, false)
	client, server := conn.Client, conn.Server
	r, _, _ := feed(nil, conn, 0, steps...)
	diff(t, "exchanges", []string{"Heartbeat v4 #2 seen", "Heartbeat v4 #3 seen"}, summary(r))
	if conn.Client != server || conn.Server != client {
		t.Errorf("sides not swapped: client %v server %v", conn.Client, conn.Server)
	}
}

// TestNotCopied checks that a gap the source chose not to copy (eBPF
// --snap) keeps the stream in sync like any gap of known size, without
// reporting a loss; here it falls in record data, so the request is
// decoded (holes_test.go has the rest).
func TestNotCopied(t *testing.T) {
	big := reqFrame(produceReq(-1, 5000), 9, 1, "p")
	r := &recorder{}
	d := New(r, nil)
	conn := newConn(capture.RolePort, true)
	d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Data: big[:4096]})
	d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Kind: capture.Gap, Len: len(big) - 4096, NotCopied: true})
	for _, s := range []step{resp(respFrame(produceResp(), 9, 1)), req(reqFrame(heartbeatReq(1), 4, 2, "c")), resp(respFrame(heartbeatResp(0), 4, 2))} {
		d.Chunk(&capture.Chunk{Conn: conn, Dir: s.dir, Data: s.data})
	}
	diff(t, "exchanges", []string{"Produce v9 #1 seen", "Heartbeat v4 #2 seen"}, summary(r))
	diff(t, "anomalies", []AnomalyKind(nil), r.kinds())
	if st := d.Stats(); st.NotCopiedBytes != int64(len(big)-4096) || st.Gaps != 0 {
		t.Errorf("not copied %d, gaps %d", st.NotCopiedBytes, st.Gaps)
	}
}
