package capture

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// orderRecorder keeps what a TLSDecrypter passes on in its order.
type orderRecorder struct {
	times []time.Time
	data  map[uint64][]byte
}

func (r *orderRecorder) Chunk(c *Chunk) {
	if c.Kind == Data {
		r.times = append(r.times, c.Time)
		r.data[c.Conn.ID] = append(r.data[c.Conn.ID], c.Data...)
	}
}

// inOrder reports whether the chunks were passed on in capture-time order.
func (r *orderRecorder) inOrder() bool {
	for i := 1; i < len(r.times); i++ {
		if r.times[i].Before(r.times[i-1]) {
			return false
		}
	}
	return true
}

// TestTLSFollowKeepsOrder: with a followed key log, a TLS connection's
// secrets are appended after its hellos crossed the wire, while a plaintext
// connection keeps talking. The plaintext connection's chunks must wait
// behind the TLS one so that everything reaches the decoder in capture
// order, both when a later chunk and when a Tick finds the secrets; when
// they come later than tlsStallMax the others go on (tls_keys_late), and
// when never, the connection is given up on (tls_no_keys), and nothing of
// the plaintext connection is lost either way.
func TestTLSFollowKeepsOrder(t *testing.T) {
	tr := tlsSession(t, &tls.Config{MinVersion: tls.VersionTLS13}, tlsSizes)
	const step = 5 * time.Millisecond
	for _, tc := range []struct {
		name   string
		keysAt int  // the write after which the secrets are logged; -1: never
		tick   bool // the secrets are found by a Tick during a pause
		late   time.Duration
		want   TLSStats
		order  bool
	}{
		{name: "soon", keysAt: 3, want: TLSStats{TLSConns: 1, TLSDecrypted: 1}, order: true},
		{name: "tick", keysAt: 3, tick: true, want: TLSStats{TLSConns: 1, TLSDecrypted: 1}, order: true},
		{name: "late", keysAt: 3, late: 3 * time.Second, want: TLSStats{TLSConns: 1, TLSDecrypted: 1, TLSKeysLate: 1}},
		{name: "never", keysAt: -1, want: TLSStats{TLSConns: 1, TLSNoKeys: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now time.Time
			keys, path := followedKeys(t, nil, &now)
			rec := &orderRecorder{data: map[uint64][]byte{}}
			d := DecryptTLS(rec, keys)
			tlsConn := &Conn{ID: 1, Role: RolePort, Handshake: true}
			plain := &Conn{ID: 2, Role: RolePort, Handshake: true}
			var wantPlain []byte
			chunk := func(c *Conn, dir Dir, kind Kind, data []byte) {
				now = now.Add(step)
				d.Chunk(&Chunk{Conn: c, Dir: dir, Kind: kind, Time: now, Data: data, Reason: CloseFIN})
			}
			for i, w := range tr.writes {
				chunk(tlsConn, w.dir, Data, w.data)
				if i == tc.keysAt {
					for range tc.late / (100 * time.Millisecond) { // the others talk on
						now = now.Add(100*time.Millisecond - step)
						p := []byte("meanwhile;")
						wantPlain = append(wantPlain, p...)
						chunk(plain, ToServer, Data, p)
					}
					if tc.tick {
						now = now.Add(100 * time.Millisecond)
					}
					if err := os.WriteFile(path, tr.keylog, 0o600); err != nil {
						t.Fatal(err)
					}
					if tc.tick {
						d.Tick(now)
						if len(rec.data[1]) == 0 {
							t.Fatal("a Tick after the secrets were logged did not decrypt the connection")
						}
					}
				}
				p := fmt.Appendf(nil, "plain %d;", i)
				wantPlain = append(wantPlain, p...)
				chunk(plain, ToServer, Data, p)
			}
			if tc.keysAt < 0 {
				now = now.Add(tlsWaitKeys) // the queue has gone on by now; the connection waits alone
				chunk(plain, ToServer, Data, []byte("end;"))
				wantPlain = append(wantPlain, "end;"...)
			}
			for _, c := range []*Conn{tlsConn, plain} {
				chunk(c, ToServer, Close, nil)
				chunk(c, ToClient, Close, nil)
			}
			if !bytes.Equal(rec.data[2], wantPlain) {
				t.Errorf("the plaintext connection: got %q, want %q", rec.data[2], wantPlain)
			}
			if tc.keysAt >= 0 && !bytes.Equal(rec.data[1], append(append([]byte(nil), tr.plain[ToServer]...), tr.plain[ToClient]...)) &&
				len(rec.data[1]) != len(tr.plain[ToServer])+len(tr.plain[ToClient]) {
				t.Errorf("the TLS connection: %d plaintext bytes, want %d", len(rec.data[1]), len(tr.plain[ToServer])+len(tr.plain[ToClient]))
			}
			if got := d.Stats(); got != tc.want {
				t.Errorf("stats %+v, want %+v", got, tc.want)
			}
			if tc.order && !rec.inOrder() {
				t.Errorf("the chunks were passed on out of capture order")
			}
			if !tc.order && tc.keysAt >= 0 && rec.inOrder() {
				t.Errorf("late secrets, yet everything in order: the queue did not go on after %v", tlsStallMax)
			}
			if d.stall != nil || len(d.queue) != 0 || d.queueBytes != 0 {
				t.Errorf("after every Close: stalled %v, %d queued (%d bytes)", d.stall != nil, len(d.queue), d.queueBytes)
			}
		})
	}
}

// FuzzTLSStall drives the queue behind a connection waiting for its
// secrets in a followed key log: two TLS sessions (TLS 1.3 and 1.2) and a
// plaintext connection, interleaved as the input says, the key log written
// at a point it chooses (or never), time moving and Ticks in between. The
// plaintext connection loses and reorders nothing, every Close is passed
// on, the queue is empty once every connection closed, and every TLS
// connection is counted decrypted or passed on.
func FuzzTLSStall(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 2, 1, 1, 5, 0, 2, 1, 0, 2})
	f.Add([]byte{0, 1, 0, 1, 2, 0x3b, 4, 2, 0, 1, 5, 2, 0, 1, 0, 1})
	f.Add([]byte{0, 0, 0, 2, 0xfb, 2, 4, 0, 0, 0, 2, 5, 4, 0, 0})
	path := filepath.Join(f.TempDir(), "keylog") // one per worker: a TempDir per input costs most of the time
	f.Fuzz(func(t *testing.T, ops []byte) {
		ss := fuzzSessions(t)
		sessions := [2]*tlsFuzzSession{ss[0], ss[1]}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		keys, err := LoadTLSKeys([]string{path}, true)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1700000000, 0)
		keys.now = func() time.Time { return now }
		logged := false
		rec := &orderRecorder{data: map[uint64][]byte{}}
		closes := 0
		d := DecryptTLS(SinkFunc(func(c *Chunk) {
			if c.Kind == Close {
				closes++
			}
			rec.Chunk(c)
		}), keys)
		conns := [3]*Conn{}
		for i := range conns {
			conns[i] = &Conn{ID: uint64(i + 1), Role: RolePort, Handshake: true}
		}
		var next [2]int
		var plain []byte
		for k, op := range ops {
			switch op % 6 {
			case 0, 1: // the next write of a session
				i := op % 2
				if ws := sessions[i].tr.writes; next[i] < len(ws) {
					w := ws[next[i]]
					next[i]++
					now = now.Add(time.Millisecond)
					d.Chunk(&Chunk{Conn: conns[i], Dir: w.dir, Kind: Data, Time: now, Data: w.data})
				}
			case 2: // the plaintext connection talks
				p := fmt.Appendf(nil, "p%d;", k)
				plain = append(plain, p...)
				now = now.Add(time.Millisecond)
				d.Chunk(&Chunk{Conn: conns[2], Dir: ToServer, Kind: Data, Time: now, Data: p})
			case 3:
				now = now.Add(time.Duration(op>>3) * 100 * time.Millisecond)
			case 4:
				d.Tick(now)
			case 5: // the clients log their secrets
				if !logged {
					logged = true
					if err := os.WriteFile(path, append(append([]byte(nil), sessions[0].tr.keylog...), sessions[1].tr.keylog...), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		now = now.Add(time.Millisecond)
		for _, c := range conns {
			for _, dir := range []Dir{ToServer, ToClient} {
				d.Chunk(&Chunk{Conn: c, Dir: dir, Kind: Close, Time: now, Reason: CloseEOF})
			}
		}
		if !bytes.Equal(rec.data[3], plain) {
			t.Fatalf("the plaintext connection: got %q, want %q", rec.data[3], plain)
		}
		if closes != 2*len(conns) {
			t.Fatalf("%d closes passed on, want %d", closes, 2*len(conns))
		}
		if d.stall != nil || len(d.queue) != 0 || d.queueBytes != 0 {
			t.Fatalf("after every Close: stalled %v, %d queued (%d bytes)", d.stall != nil, len(d.queue), d.queueBytes)
		}
		st := d.Stats()
		started := 0
		for i := range next {
			if next[i] > 0 {
				started++
			}
		}
		if int(st.TLSConns) != started || st.TLSDecrypted+st.TLSNoKeys+st.TLSUnsupported+st.TLSHandshakeOnly != st.TLSConns || st.TLSKeysLate > st.TLSDecrypted {
			t.Fatalf("stats %+v for %d TLS connections", st, started)
		}
	})
}

// TestTLSLateLooksAgainBeforeGivingUp: a connection whose secrets come
// later than tlsStallMax waits alone, its chunks held, and reads the key
// log at most once a second. On a loaded host its bytes then pile up
// faster than that: once it holds maxTLSHeld it is given up on, but only
// after one more read of the key log, which has had its secrets since
// just after the last read. (Before, it was passed on encrypted:
// tls_no_keys on a capture whose key log had every secret.)
func TestTLSLateLooksAgainBeforeGivingUp(t *testing.T) {
	tr := tlsSession(t, &tls.Config{MinVersion: tls.VersionTLS13}, []int{10, maxTLSHeld + 1<<20})
	var now time.Time
	keys, path := followedKeys(t, nil, &now)
	d := DecryptTLS(&orderRecorder{data: map[uint64][]byte{}}, keys)
	tlsConn := &Conn{ID: 1, Role: RolePort, Handshake: true}
	plain := &Conn{ID: 2, Role: RolePort, Handshake: true}
	chunk := func(c *Conn, dir Dir, kind Kind, data []byte) {
		now = now.Add(time.Millisecond)
		d.Chunk(&Chunk{Conn: c, Dir: dir, Kind: kind, Time: now, Data: data, Reason: CloseFIN})
	}
	for i, w := range tr.writes {
		for p := w.data; len(p) > 0; {
			n := min(len(p), 64<<10)
			chunk(tlsConn, w.dir, Data, p[:n])
			p = p[n:]
		}
		if i == 1 { // the hellos are in: it waits, and is late by the next chunk
			now = now.Add(tlsStallMax)
			chunk(plain, ToServer, Data, []byte("meanwhile"))
			if err := os.WriteFile(path, tr.keylog, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := d.Stats(), (TLSStats{TLSConns: 1, TLSDecrypted: 1, TLSKeysLate: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}
