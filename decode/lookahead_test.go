package decode

import (
	"encoding/binary"
	"testing"

	"github.com/kwire/kwire/capture"
)

// TestDamagedLength: a request whose length prefix was damaged (a flipped
// high byte: it claims 16 MiB, or 1.5 GB, above --max-frame) does not
// swallow the requests after it: the next request of the same client is
// found inside what it claims, the damaged one is read up to there (when
// its body reads to the byte; else skipped) as a resync, and decoding goes
// on. A response claiming too much is cut at the response to the next
// request, and read up to there. A high byte that makes a length negative
// or above --max-frame is set back. Undamaged, a frame far larger than the ones before is
// decoded whole.
func TestDamagedLength(t *testing.T) {
	hb := func(corr int32) []byte { return reqFrame(heartbeatReq(1), 4, corr, "c") }
	hbResp := func(corr int32) []byte { return respFrame(heartbeatResp(0), 4, corr) }
	pr := func(corr int32, client string) []byte { return reqFrame(produceReq(1, 200), 9, corr, client) }
	prResp := func(corr int32) []byte { return respFrame(produceResp(), 9, corr) }
	clientByte := func(f []byte) []byte { // the client id's first byte: not text
		f = append([]byte(nil), f...)
		f[14] = 0xec
		return f
	}
	damage := func(f []byte, l uint32) []byte {
		f = append([]byte(nil), f...)
		binary.BigEndian.PutUint32(f, l)
		return f
	}
	tests := []struct {
		name  string
		steps []step
		want  []string
		an    []AnomalyKind
	}{
		{"request claiming 16 MiB", []step{
			req(hb(1)), resp(hbResp(1)),
			req(damage(hb(2), 1<<24|uint32(len(hb(2))-4))), req(hb(3)), req(hb(4)),
			resp(hbResp(2)), resp(hbResp(3)), resp(hbResp(4)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #3 seen", "Heartbeat v4 #4 seen"},
			[]AnomalyKind{AnomalyResync}},
		{"a 1 kB request claiming 512 MiB, the next in its own segment", []step{
			req(hb(1)), resp(hbResp(1)),
			req(damage(reqFrame(produceReq(1, 1<<10), 9, 2, "c"), 1<<29|uint32(len(reqFrame(produceReq(1, 1<<10), 9, 2, "c"))-4))),
			req(hb(3)), req(hb(4)),
			resp(respFrame(produceResp(), 9, 2)), resp(hbResp(3)), resp(hbResp(4)),
		}, []string{"Heartbeat v4 #1 seen", "Produce v9 #2 seen noreq", "Heartbeat v4 #3 seen", "Heartbeat v4 #4 seen"},
			[]AnomalyKind{AnomalyOversize, AnomalyResync}},
		{"request claiming 53 kB, under 64 KiB", []step{
			req(hb(1)), resp(hbResp(1)),
			req(damage(hb(2), 0xd200|uint32(len(hb(2))-4))), req(hb(3)), req(hb(4)),
			resp(hbResp(2)), resp(hbResp(3)), resp(hbResp(4)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #3 seen", "Heartbeat v4 #4 seen"},
			[]AnomalyKind{AnomalyResync}},
		{"request claiming 53 kB, its id damaged too", []step{
			req(hb(1)), resp(hbResp(1)),
			req(damage(hb(0x4002), 0xd200|uint32(len(hb(2))-4))), req(hb(3)), req(hb(4)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #16386 missing", "Heartbeat v4 #3 missing", "Heartbeat v4 #4 missing"},
			[]AnomalyKind{AnomalyResync}},
		// The follower has the client id of the request before.
		{"a produce request claiming 5 MB, its client id damaged too", []step{
			req(pr(1, "producer")), resp(prResp(1)),
			req(damage(pr(2, "produ>er"), 0x500000|uint32(len(pr(2, "produ>er"))-4))), req(pr(3, "producer")), req(pr(4, "producer")),
			resp(prResp(2)), resp(prResp(3)), resp(prResp(4)),
		}, []string{"Produce v9 #1 seen", "Produce v9 #2 seen", "Produce v9 #3 seen", "Produce v9 #4 seen"},
			[]AnomalyKind{AnomalyResync}},
		// No answer comes to say where the requests are (reframe): the
		// answers are held behind a gap in the capture.
		{"a produce request claiming 1.4 MB, a byte of its client id not text, no answers", []step{
			req(pr(1, "producer")), resp(prResp(1)),
			req(damage(clientByte(pr(2, "producer")), 0x160000|uint32(len(pr(2, "producer"))-4))), req(pr(3, "producer")), req(pr(4, "producer")),
		}, []string{"Produce v9 #1 seen", "Produce v9 #2 missing", "Produce v9 #3 missing", "Produce v9 #4 missing"},
			[]AnomalyKind{AnomalyResync}},
		{"request claiming 1.5 GB: its high byte hit, set back", []step{
			req(hb(1)), resp(hbResp(1)),
			req(damage(hb(2), 0x5c000000|uint32(len(hb(2))-4))), req(hb(3)), req(hb(4)),
			resp(hbResp(3)), resp(hbResp(4)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 lost", "Heartbeat v4 #3 seen", "Heartbeat v4 #4 seen"},
			[]AnomalyKind{AnomalyResync}},
		{"response whose length's high byte is hit: set back", []step{
			req(hb(1)), resp(damage(hbResp(1), 0x83000000|uint32(len(hbResp(1))-4))), req(hb(2)), resp(hbResp(2)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen"},
			[]AnomalyKind{AnomalyResync}},
		{"a correlation id one byte off: answered in turn", []step{
			req(hb(1)), resp(hbResp(1)), req(hb(2)), resp(hbResp(0x4002)), req(hb(0x6003)), resp(hbResp(3)), req(hb(4)), resp(hbResp(4)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #24579 seen", "Heartbeat v4 #4 seen"},
			[]AnomalyKind{AnomalyResync, AnomalyResync}},
		{"a lost request's answer is not taken for the oldest, one byte off", []step{
			req(hb(0x100)), resp(hbResp(0x100)), req(hb(0x101)), gap(capture.ToServer, 0x40*len(hb(2))), req(hb(0x142)), resp(hbResp(0x141)), resp(hbResp(0x142)),
		}, []string{"Heartbeat v4 #256 seen", "Heartbeat v4 #257 lost", "Heartbeat v4 #322 seen"},
			[]AnomalyKind{AnomalyGap, AnomalyUnmatchedResponse}},
		{"a lost request's answer is not taken for the next", []step{
			req(hb(1)), resp(hbResp(1)), gap(capture.ToServer, len(hb(2))), req(hb(3)), resp(hbResp(2)), resp(hbResp(3)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #3 seen"},
			[]AnomalyKind{AnomalyGap, AnomalyUnmatchedResponse}},
		{"response claiming 16 MiB", []step{
			req(hb(1)), resp(hbResp(1)), req(hb(2)), req(hb(3)),
			resp(damage(hbResp(2), 1<<24|uint32(len(hbResp(2))-4))), resp(hbResp(3)),
		}, []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #3 seen"},
			[]AnomalyKind{AnomalyResync}},
		{"a large frame, undamaged", []step{
			req(hb(1)), resp(hbResp(1)),
			req(reqFrame(produceReq(1, 200<<10), 9, 2, "c")), req(hb(3)),
			resp(respFrame(produceResp(), 9, 2)), resp(hbResp(3)),
		}, []string{"Heartbeat v4 #1 seen", "Produce v9 #2 seen", "Heartbeat v4 #3 seen"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, _ := feed(nil, newConn(capture.RolePort, true), 0, tt.steps...)
			diff(t, "exchanges", tt.want, summary(r))
			diff(t, "anomalies", tt.an, r.kinds())
		})
	}
}

// TestAdoptAtGap: a connection whose first request was lost, and then a
// segment in the middle of the large request after it (a producer in a
// damaged or lossy capture): the large request starts right after the
// first gap, but it can never be checked whole. Its header, a known key
// and version with the connection's client id, is taken as the frame
// boundary when the second gap falls inside its frame: the request is
// counted (its body lost), and the stream is in sync for the next ones.
// Before, the bytes were searched again from the middle of its body, and
// the request was never seen.
func TestAdoptAtGap(t *testing.T) {
	hb := func(corr int32) []byte { return reqFrame(heartbeatReq(1), 4, corr, "c") }
	hbResp := func(corr int32) []byte { return respFrame(heartbeatResp(0), 4, corr) }
	prod := reqFrame(produceReq(1, 20<<10), 9, 2, "c")
	steps := []step{
		gap(capture.ToServer, len(hb(1))),
		req(prod[:1000]), gap(capture.ToServer, 1000), req(prod[2000:]),
		req(hb(3)),
		resp(hbResp(1)), resp(respFrame(produceResp(), 9, 2)), resp(hbResp(3)),
	}
	r, _, _ := feed(nil, newConn(capture.RolePort, true), 0, steps...)
	diff(t, "exchanges", []string{"Produce v9 #2 seen noreq", "Heartbeat v4 #3 seen"}, summary(r))
}

// TestReframe: a request whose damaged length claims a little more than
// it has takes in the start of the next request, and what is left of
// that one reads as a plausible header claiming more than follows: the
// direction waits for a frame that is not one, and the requests after it
// would be taken as its body. The answer to a later request says it was
// sent: found in the buffered bytes, it is decoded from there, and the
// requests after it too.
func TestReframe(t *testing.T) {
	hb := func(corr int32) []byte { return reqFrame(heartbeatReq(1), 4, corr, "c") }
	hbResp := func(corr int32) []byte { return respFrame(heartbeatResp(0), 4, corr) }
	long := append(hb(2), make([]byte, 14)...)
	binary.BigEndian.PutUint32(long, uint32(len(long)-4))
	// The rest of request 3, read as a Metadata v1 header claiming 300
	// bytes.
	rest := []byte{0, 0, 1, 44, 0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 'c', 0, 0}
	steps := []step{
		req(hb(1)), resp(hbResp(1)),
		req(long[:len(long)-14]), req(append(long[len(long)-14:], rest...)), resp(hbResp(2)),
		req(hb(4)), resp(hbResp(3)), resp(hbResp(4)),
		req(hb(5)), resp(hbResp(5)),
	}
	r, _, _ := feed(nil, newConn(capture.RolePort, true), 0, steps...)
	diff(t, "exchanges", []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #4 seen", "Heartbeat v4 #5 seen"}, summary(r))
	diff(t, "anomalies", []AnomalyKind{AnomalyResync, AnomalyUnmatchedResponse}, r.kinds())
}

// TestAnsweredIsKafka: a connection seen from its handshake, on no known
// broker port, whose first request is junk (damaged beyond one field) was
// ignored as not Kafka at once. The broker's answer, a response frame,
// says it is: the requests after the junk are decoded.
func TestAnsweredIsKafka(t *testing.T) {
	hb := func(corr int32) []byte { return reqFrame(heartbeatReq(1), 4, corr, "c") }
	hbResp := func(corr int32) []byte { return respFrame(heartbeatResp(0), 4, corr) }
	junk := append([]byte(nil), hb(0)...)
	copy(junk[4:], []byte{0xff, 0xfe, 0xff, 0xfd, 0xff, 0xff, 0xff, 0xff}) // key, version, correlation id
	steps := []step{
		req(junk), resp(hbResp(0)),
		req(hb(1)), resp(hbResp(1)),
		req(hb(2)), resp(hbResp(2)),
	}
	r, _, _ := feed(nil, newConn(capture.RoleSYN, true), 0, steps...)
	diff(t, "exchanges", []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen"}, summary(r))
}
