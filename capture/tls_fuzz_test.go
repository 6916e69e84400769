package capture

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// tlsFuzzSession is a real session and what a clean decryption gives.
type tlsFuzzSession struct {
	tr      *tlsTranscript
	keys    *TLSKeys
	records [2][][]byte // the plaintext of each application record, by Dir
}

var (
	tlsFuzzOnce     sync.Once
	tlsFuzzSessions []*tlsFuzzSession
)

func fuzzSessions(t testing.TB) []*tlsFuzzSession {
	tlsFuzzOnce.Do(func() {
		for _, tc := range tlsCases {
			tr := tlsSession(t, tc.cfg, []int{10, 300, 17000, 5})
			s := &tlsFuzzSession{tr: tr, keys: keysFrom(t, tr.keylog)}
			rec := &tlsRecorder{}
			feedTranscript(DecryptTLS(rec, s.keys), tr.writes)
			s.records = rec.chunks
			tlsFuzzSessions = append(tlsFuzzSessions, s)
		}
	})
	return tlsFuzzSessions
}

// fuzzEvent is one chunk of a damaged session.
type fuzzEvent struct {
	dir  Dir
	kind Kind
	data []byte
	n    int
}

// damage applies ops, 5 bytes each (kind, chunk, position high and low,
// value), to a session's writes: flip a byte, replace bytes by a gap of
// known or unknown size, cut a chunk in two, insert bytes.
func damage(ws []tlsWrite, ops []byte) []fuzzEvent {
	evs := make([]fuzzEvent, len(ws))
	for i, w := range ws {
		evs[i] = fuzzEvent{dir: w.dir, kind: Data, data: w.data}
	}
	for ; len(ops) >= 5; ops = ops[5:] {
		i := int(ops[1]) % len(evs)
		e := evs[i]
		if e.kind != Data || len(e.data) == 0 {
			continue
		}
		pos, val := (int(ops[2])<<8|int(ops[3]))%len(e.data), int(ops[4])
		var repl []fuzzEvent
		switch ops[0] % 5 {
		case 0:
			d := bytes.Clone(e.data)
			d[pos] ^= byte(val | 1)
			repl = []fuzzEvent{{dir: e.dir, data: d}}
		case 1, 2:
			end := min(pos+val, len(e.data))
			n := end - pos
			if ops[0]%5 == 2 {
				n = -1
			}
			repl = []fuzzEvent{{dir: e.dir, data: e.data[:pos]}, {dir: e.dir, kind: Gap, n: n}, {dir: e.dir, data: e.data[end:]}}
		case 3:
			repl = []fuzzEvent{{dir: e.dir, data: e.data[:pos]}, {dir: e.dir, data: e.data[pos:]}}
		case 4:
			junk := bytes.Repeat([]byte{byte(val)}, val%32+1)
			repl = []fuzzEvent{{dir: e.dir, data: append(append(bytes.Clone(e.data[:pos]), junk...), e.data[pos:]...)}}
		}
		evs = append(evs[:i], append(repl, evs[i+1:]...)...)
	}
	return evs
}

// FuzzTLSRecord feeds real TLS 1.3 and 1.2 (AES-GCM, ChaCha20-Poly1305)
// sessions, damaged by the fuzzer (see damage), through DecryptTLS.
//
// Invariants: no panic; each direction gets exactly one Close; when the
// connection is decrypted, every Data chunk passed on is the whole
// plaintext of one of the session's records, in order: never bytes of a
// record that did not authenticate; when it is not (its hellos damaged),
// the bytes and gaps are passed on exactly as they came.
func FuzzTLSRecord(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte{0, 9, 0, 40, 1})
	f.Add(uint8(0), []byte{1, 9, 0, 3, 200, 3, 1, 0, 7, 0})
	f.Add(uint8(2), []byte{2, 10, 1, 0, 250, 4, 12, 0, 2, 9})
	f.Add(uint8(3), []byte{0, 11, 0, 3, 0x10, 0, 13, 0, 4, 0x80})
	f.Fuzz(func(t *testing.T, which uint8, ops []byte) {
		s := fuzzSessions(t)[int(which)%len(tlsCases)]
		evs := damage(s.tr.writes, ops)
		rec := &tlsRecorder{}
		d := DecryptTLS(rec, s.keys)
		conn := &Conn{ID: 1, Role: RolePort, Handshake: true}
		t0 := time.Unix(1700000000, 0)
		var in [2][]byte
		var inGaps [2][]int
		for i, e := range evs {
			if e.kind == Data {
				in[e.dir] = append(in[e.dir], e.data...)
			} else {
				inGaps[e.dir] = append(inGaps[e.dir], e.n)
			}
			d.Chunk(&Chunk{Conn: conn, Dir: e.dir, Kind: e.kind, Time: t0.Add(time.Duration(i)), Data: e.data, Len: e.n})
		}
		d.Chunk(&Chunk{Conn: conn, Dir: ToServer, Kind: Close, Time: t0.Add(time.Hour)})
		d.Chunk(&Chunk{Conn: conn, Dir: ToClient, Kind: Close, Time: t0.Add(time.Hour)})
		if rec.closes != 2 {
			t.Fatalf("%d closes, want 2", rec.closes)
		}
		st := d.Stats()
		if st.TLSDecrypted == 0 {
			for dir := range in {
				if !bytes.Equal(rec.data[dir], in[dir]) || len(rec.gaps[dir]) != len(inGaps[dir]) {
					t.Fatalf("%s: not decrypted (%+v) but not passed on as it came", Dir(dir), st)
				}
			}
			return
		}
		for dir := range rec.chunks {
			next := 0
			for _, c := range rec.chunks[dir] {
				for next < len(s.records[dir]) && !bytes.Equal(s.records[dir][next], c) {
					next++
				}
				if next == len(s.records[dir]) {
					t.Fatalf("%s: %d plaintext bytes passed on that are no record of the session, in order", Dir(dir), len(c))
				}
				next++
			}
		}
	})
}
