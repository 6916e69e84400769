package capture

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
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
