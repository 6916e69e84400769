package capture

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"os"
	"slices"
	"testing"
	"time"
)

var tlsCases = []struct {
	name string
	cfg  *tls.Config
}{
	{"tls13", &tls.Config{MinVersion: tls.VersionTLS13}},
	{"tls12-aes128gcm", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
	{"tls12-aes256gcm", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}},
	{"tls12-chacha20", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}},
}

// sizes are the client's messages: small ones, and ones spanning records
// (16 KiB of plaintext at most per record, RFC 8446 §5.1).
var tlsSizes = []int{10, 300, 40000, 5, 17000}

func TestTLSDecrypt(t *testing.T) {
	for _, tc := range tlsCases {
		t.Run(tc.name, func(t *testing.T) {
			tr := tlsSession(t, tc.cfg, tlsSizes)
			for _, split := range []int{0, 1, 7, 1000} {
				rec := &tlsRecorder{}
				d := DecryptTLS(rec, keysFrom(t, tr.keylog))
				feedTranscript(d, splitWrites(tr.writes, split))
				for dir := range rec.data {
					if !bytes.Equal(rec.data[dir], tr.plain[dir]) {
						t.Errorf("split %d, %s: got %d plaintext bytes, want %d (equal prefix %d)", split, Dir(dir),
							len(rec.data[dir]), len(tr.plain[dir]), commonPrefix(rec.data[dir], tr.plain[dir]))
					}
					if len(rec.gaps[dir]) > 0 {
						t.Errorf("split %d, %s: gaps %v", split, Dir(dir), rec.gaps[dir])
					}
				}
				want := TLSStats{TLSConns: 1, TLSDecrypted: 1}
				if got := d.Stats(); got != want || rec.closes != 2 {
					t.Errorf("split %d: stats %+v, closes %d; want %+v, 2", split, got, rec.closes, want)
				}
			}
		})
	}
}

// splitWrites cuts every write into pieces of n bytes (0: as written), as
// TCP segments would.
func splitWrites(ws []tlsWrite, n int) []tlsWrite {
	if n == 0 {
		return ws
	}
	var out []tlsWrite
	for _, w := range ws {
		for p := w.data; len(p) > 0; {
			k := min(n, len(p))
			out = append(out, tlsWrite{w.dir, p[:k]})
			p = p[k:]
		}
	}
	return out
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestTLSNoKeys: without the session's secrets the connection goes on
// untouched (the decoder then reports it as TLS), counted.
func TestTLSNoKeys(t *testing.T) {
	tr := tlsSession(t, tlsCases[0].cfg, tlsSizes[:2])
	other := tlsSession(t, tlsCases[0].cfg, tlsSizes[:1])
	rec := &tlsRecorder{}
	d := DecryptTLS(rec, keysFrom(t, other.keylog))
	feedTranscript(d, splitWrites(tr.writes, 100))
	var want [2][]byte
	for _, w := range tr.writes {
		want[w.dir] = append(want[w.dir], w.data...)
	}
	if !bytes.Equal(rec.data[0], want[0]) || !bytes.Equal(rec.data[1], want[1]) || rec.closes != 2 {
		t.Errorf("ciphertext not passed on whole: %d, %d bytes, %d closes", len(rec.data[0]), len(rec.data[1]), rec.closes)
	}
	if got, want := d.Stats(), (TLSStats{TLSConns: 1, TLSNoKeys: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// TestTLSHandshakeOnly: a connection that ends after its ClientHello,
// before the server's hello (a client giving up on its dial), agreed no
// keys and carried no application data: it is counted apart, not as one
// whose keys are missing, and passed on as it came. One whose ClientHello
// is not in the capture is still counted without keys.
func TestTLSHandshakeOnly(t *testing.T) {
	tr := tlsSession(t, tlsCases[0].cfg, tlsSizes[:1])
	hello := tr.writes[0]
	if hello.dir != ToServer || hello.data[0] != recHandshake {
		t.Fatalf("first write is not the ClientHello: dir %d, type %d", hello.dir, hello.data[0])
	}
	for _, tc := range []struct {
		name   string
		writes []tlsWrite
		want   TLSStats
	}{
		{"client hello alone", []tlsWrite{hello}, TLSStats{TLSConns: 1, TLSHandshakeOnly: 1}},
		{"server flight without the client hello", []tlsWrite{tr.writes[1]}, TLSStats{TLSConns: 1, TLSNoKeys: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &tlsRecorder{}
			d := DecryptTLS(rec, keysFrom(t, tr.keylog))
			feedTranscript(d, tc.writes)
			w := tc.writes[0]
			if !bytes.Equal(rec.data[w.dir], w.data) || len(rec.data[w.dir^1]) != 0 || rec.closes != 2 {
				t.Errorf("not passed on as it came: %d, %d bytes, %d closes", len(rec.data[0]), len(rec.data[1]), rec.closes)
			}
			if got := d.Stats(); got != tc.want {
				t.Errorf("stats %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTLSRecordUnsent: a record its sender numbered but never put on the
// wire (a write that failed before its first byte, as a client closes on
// a deadline) leaves the next record one sequence number later. It opens
// with that number: nothing on the wire is lost, no record fails, and the
// skipped number is counted.
func TestTLSRecordUnsent(t *testing.T) {
	for _, tc := range tlsCases {
		t.Run(tc.name, func(t *testing.T) {
			tr := tlsSession(t, tc.cfg, tlsSizes)
			// The client's record of the 300-byte message (tlsSizes[1]),
			// whatever the suite's overhead.
			drop := -1
			for i, w := range tr.writes {
				if n := len(w.data) - recHeaderLen; w.dir == ToServer && w.data[0] == recApplicationData && n == recLen(w.data) && n > 300 && n <= 340 {
					drop = i
				}
			}
			if drop < 0 {
				t.Fatal("no client record of the 300-byte message")
			}
			writes := append(slices.Clone(tr.writes[:drop]), tr.writes[drop+1:]...)
			rec := &tlsRecorder{}
			d := DecryptTLS(rec, keysFrom(t, tr.keylog))
			feedTranscript(d, writes)
			n0 := tlsSizes[0]
			want := append(slices.Clone(tr.plain[ToServer][:n0]), tr.plain[ToServer][n0+tlsSizes[1]:]...)
			if !bytes.Equal(rec.data[ToServer], want) || !bytes.Equal(rec.data[ToClient], tr.plain[ToClient]) {
				t.Errorf("plaintext: client %d bytes (want %d), server %d (want %d)", len(rec.data[ToServer]), len(want), len(rec.data[ToClient]), len(tr.plain[ToClient]))
			}
			if len(rec.gaps[0])+len(rec.gaps[1]) != 0 {
				t.Errorf("gaps %v: nothing on the wire was lost", rec.gaps)
			}
			if got, want := d.Stats(), (TLSStats{TLSConns: 1, TLSDecrypted: 1, TLSRecordsUnsent: 1}); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
		})
	}
}

// TestTLSPlainPassesThrough: a connection that is not TLS is untouched.
func TestTLSPlainPassesThrough(t *testing.T) {
	rec := &tlsRecorder{}
	d := DecryptTLS(rec, keysFrom(t, nil))
	ws := []tlsWrite{{ToServer, []byte{0}}, {ToServer, []byte{0, 0, 9, 0, 1}}, {ToClient, []byte("abc")}}
	feedTranscript(d, ws)
	if string(rec.data[0]) != "\x00\x00\x00\x09\x00\x01" || string(rec.data[1]) != "abc" || rec.closes != 2 {
		t.Errorf("got %q %q", rec.data[0], rec.data[1])
	}
	if got := d.Stats(); got != (TLSStats{}) {
		t.Errorf("stats %+v", got)
	}
}

// appRecords returns the indexes in writes of the server's writes that
// are one application data record of at least n bytes.
func appRecords(ws []tlsWrite, n int) []int {
	var idx []int
	for i, w := range ws {
		if w.dir == ToClient && w.data[0] == recApplicationData && len(w.data) >= n && len(w.data) == recHeaderLen+recLen(w.data) {
			idx = append(idx, i)
		}
	}
	return idx
}

// TestTLSDamage: a record with a flipped byte, or cut by a TCP gap, loses
// only its own plaintext, reported as a gap of its length; the records
// after it are decrypted.
func TestTLSDamage(t *testing.T) {
	for _, tc := range tlsCases {
		t.Run(tc.name, func(t *testing.T) {
			tr := tlsSession(t, tc.cfg, tlsSizes)
			idx := appRecords(tr.writes, 100)
			if len(idx) < 2 {
				t.Fatalf("only %d application records", len(idx))
			}
			victim := tr.writes[idx[1]]
			overhead := map[bool]int{true: 17, false: 24}[tc.name == "tls13"]
			if tc.name == "tls12-chacha20" {
				overhead = 16
			}
			lost := len(victim.data) - recHeaderLen - overhead

			for _, mode := range []string{"flip", "gap", "gap-header-length"} {
				ws := append([]tlsWrite(nil), tr.writes...)
				rec := &tlsRecorder{}
				d := DecryptTLS(rec, keysFrom(t, tr.keylog))
				conn := &Conn{ID: 1, Role: RolePort}
				t0 := time.Unix(1700000000, 0)
				for i, w := range ws {
					c := &Chunk{Conn: conn, Dir: w.dir, Kind: Data, Time: t0, Data: w.data}
					if i == idx[1] {
						switch mode {
						case "flip":
							c.Data = bytes.Clone(w.data)
							c.Data[len(c.Data)/2] ^= 0x40
						case "gap":
							d.Chunk(&Chunk{Conn: conn, Dir: w.dir, Kind: Data, Time: t0, Data: w.data[:20]})
							d.Chunk(&Chunk{Conn: conn, Dir: w.dir, Kind: Gap, Time: t0, Len: 50})
							c.Data = w.data[70:]
						case "gap-header-length":
							d.Chunk(&Chunk{Conn: conn, Dir: w.dir, Kind: Data, Time: t0, Data: w.data[:3]})
							d.Chunk(&Chunk{Conn: conn, Dir: w.dir, Kind: Gap, Time: t0, Len: 2})
							c.Data = w.data[5:]
						}
					}
					d.Chunk(c)
				}
				got, want := rec.data[ToClient], tr.plain[ToClient]
				wantGaps := []int{lost}
				if mode == "gap-header-length" {
					wantGaps = []int{-1} // the record's length is lost with its header
				}
				if len(got) != len(want)-lost || !slices.Equal(rec.gaps[ToClient], wantGaps) {
					t.Errorf("%s: %d plaintext bytes, gaps %v; want %d, gaps %v", mode, len(got), rec.gaps[ToClient], len(want)-lost, wantGaps)
				}
				if !bytes.Equal(rec.data[ToServer], tr.plain[ToServer]) {
					t.Errorf("%s: the other direction was hurt", mode)
				}
				st := d.Stats()
				wantFail := uint64(0)
				if mode == "flip" {
					wantFail = 1
				}
				if st.TLSDecrypted != 1 || st.TLSDecryptFailures != wantFail {
					t.Errorf("%s: stats %+v", mode, st)
				}
			}
		})
	}
}

// TestTLSKeysFollow: a followed key log is re-read on a miss, at most once
// a second, and a line still being written waits for its newline;
// malformed lines are counted, other labels ignored.
func TestTLSKeysFollow(t *testing.T) {
	random := bytes.Repeat([]byte{0xab}, 32)
	line := "CLIENT_RANDOM " + hex.EncodeToString(random) + " " + hex.EncodeToString(bytes.Repeat([]byte{1}, 48)) + "\n"
	head := "# comment\nEXPORTER_SECRET " + hex.EncodeToString(random) + " 00\nnot a key log line\n"
	var now time.Time
	k, path := followedKeys(t, []byte(head+line[:20]), &now)
	if k.lookup(random, reloadEvery) != nil || k.Malformed() != 1 {
		t.Fatalf("found a session from half a line, or malformed %d != 1", k.Malformed())
	}
	if err := os.WriteFile(path, []byte(head+line), 0o600); err != nil {
		t.Fatal(err)
	}
	if k.lookup(random, reloadEvery) != nil {
		t.Fatal("re-read within a second of the last read")
	}
	now = now.Add(time.Second)
	if s := k.lookup(random, reloadEvery); s == nil || len(s.master) != 48 || k.Sessions() != 1 || k.Malformed() != 1 {
		t.Fatalf("after the line was completed: %v, %d sessions, %d malformed", s != nil, k.Sessions(), k.Malformed())
	}
}

// TestTLSKeysFollowTLS13: a followed key log read between a TLS 1.3
// client's handshake secrets and its traffic secrets is read again for
// the traffic secrets.
func TestTLSKeysFollowTLS13(t *testing.T) {
	random := bytes.Repeat([]byte{0xcd}, 32)
	secret := func(label string) string {
		return label + " " + hex.EncodeToString(random) + " " + hex.EncodeToString(bytes.Repeat([]byte{2}, 32)) + "\n"
	}
	hs := secret("CLIENT_HANDSHAKE_TRAFFIC_SECRET") + secret("SERVER_HANDSHAKE_TRAFFIC_SECRET")
	var now time.Time
	k, path := followedKeys(t, []byte(hs), &now)
	if s := k.lookup(random, reloadEvery); s.complete() {
		t.Fatal("complete with the handshake secrets only")
	}
	if err := os.WriteFile(path, []byte(hs+secret("CLIENT_TRAFFIC_SECRET_0")+secret("SERVER_TRAFFIC_SECRET_0")), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	if s := k.lookup(random, reloadEvery); !s.complete() || s.clientHS == nil {
		t.Fatalf("after the traffic secrets were appended: %+v", s != nil)
	}
}

// TestTLSSwapsGuessedSides: when the source guessed the sides wrong, the
// ClientHello's sender becomes the client, and the plaintext follows.
func TestTLSSwapsGuessedSides(t *testing.T) {
	tr := tlsSession(t, tlsCases[0].cfg, tlsSizes[:2])
	rec := &tlsRecorder{}
	d := DecryptTLS(rec, keysFrom(t, tr.keylog))
	conn := &Conn{ID: 1, Role: RoleGuess}
	for _, w := range tr.writes {
		dir := w.dir ^ 1 // the source's guess, wrong
		if conn.swapped {
			dir ^= 1 // sources compute directions after a Swap
		}
		d.Chunk(&Chunk{Conn: conn, Dir: dir, Kind: Data, Time: time.Unix(1, 0), Data: w.data})
	}
	if !conn.swapped || !bytes.Equal(rec.data[ToServer], tr.plain[ToServer]) || !bytes.Equal(rec.data[ToClient], tr.plain[ToClient]) {
		t.Errorf("swapped %v; %d and %d plaintext bytes, want %d and %d", conn.swapped,
			len(rec.data[ToServer]), len(rec.data[ToClient]), len(tr.plain[ToServer]), len(tr.plain[ToClient]))
	}
}
