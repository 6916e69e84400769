package capture

import (
	"sync/atomic"
	"time"
)

// TLSStats counts what a TLSDecrypter did; the fields are part of Stats
// (the stats line's capture object), omitted while zero. Every TLS
// connection is counted in TLSConns and, once its handshake was read or
// given up on, in one of TLSDecrypted, TLSNoKeys, TLSUnsupported or
// TLSHandshakeOnly.
type TLSStats struct {
	// TLSConns counts connections whose first bytes are a TLS record.
	TLSConns uint64 `json:"tls_connections,omitempty"`
	// TLSDecrypted counts those whose secrets the key log had: their
	// application data went on as plaintext.
	TLSDecrypted uint64 `json:"tls_decrypted,omitempty"`
	// TLSNoKeys counts those passed on encrypted because the key log has
	// no secrets for them, or their hellos are not in the capture (it
	// began mid-connection, or lost them).
	TLSNoKeys uint64 `json:"tls_no_keys,omitempty"`
	// TLSUnsupported counts those passed on encrypted because they use a
	// version or cipher suite kwire does not decrypt (CBC, TLS 1.0/1.1).
	TLSUnsupported uint64 `json:"tls_unsupported,omitempty"`
	// TLSHandshakeOnly counts those that ended before the server's hello
	// (a client that gave up on its dial, or was stopped, mid-handshake):
	// no keys were agreed, so they carried no application data and
	// nothing of them is lost. They are passed on as they came.
	TLSHandshakeOnly uint64 `json:"tls_handshake_only,omitempty"`
	// TLSDecryptFailures counts records that did not authenticate with
	// the logged keys (damaged in the capture, or a wrong key log): their
	// plaintext is a gap, the records after them are decrypted.
	TLSDecryptFailures uint64 `json:"tls_decrypt_failures,omitempty"`
	// TLSRecordsUnsent counts sequence numbers senders gave records the
	// wire never carried: a record that did not open with its own
	// number opened with one a little later (a write that failed before
	// its first byte, at a deadline as a client closes). Nothing of the
	// capture is lost.
	TLSRecordsUnsent uint64 `json:"tls_records_unsent,omitempty"`
	// TLSKeysLate counts connections (kwire live) whose secrets reached
	// the followed key log more than tlsStallMax after their hellos: they
	// were decrypted, but their first bytes reached the decoder after
	// other connections' later ones, which may misplace their first
	// requests in the story.
	TLSKeysLate uint64 `json:"tls_keys_late,omitempty"`
}

// TLSDecrypter is a Sink that decrypts TLS connections with the secrets of
// a key log and passes on plaintext, as if it had been captured in the
// clear: Data chunks with the times of the chunks that completed each
// record, Gap chunks for plaintext lost (in the TCP stream, or in records
// that did not authenticate: of the plaintext length when known, else
// -1), and every Close. Connections that are not TLS pass through
// untouched, and so, whole, do TLS connections it cannot decrypt: the
// next Sink sees them as it would without a TLSDecrypter.
//
// A connection is TLS when its first bytes are a TLS record (RFC 8446
// §5.1). Its chunks are held until both hellos are read and the key log
// looked up: at most maxTLSHeld bytes, and when the keys follow a growing
// key log (LoadTLSKeys follow), at most tlsWaitKeys of capture time. While
// a connection waits for its secrets to be logged, the chunks of every
// connection queue behind it, at most tlsStallMax and maxTLSStall bytes,
// so that the plaintext goes on in capture order: a live consumer calls
// Tick to let the queue go when no chunk arrives.
//
// Like every Sink, it is called from one goroutine; Stats may be called
// from any.
type TLSDecrypter struct {
	next  Sink
	keys  *TLSKeys
	conns map[*Conn]*tlsConn
	out   Chunk

	// stall, when set, is a connection waiting for its secrets in a
	// followed key log: the chunks after it queue behind it, so that its
	// first bytes reach the next Sink in their capture order (tls_stall.go).
	stall      *tlsConn
	stallSince time.Time
	queue      []queuedChunk
	qhead      int
	queueBytes int

	conns_, decrypted, noKeys, unsupported, handshakeOnly, failures, unsent, late atomic.Uint64
}

const (
	// maxTLSHeld bounds the bytes of one connection held while its keys
	// are looked for.
	maxTLSHeld = 4 << 20
	// tlsWaitKeys is how long (capture time) a connection waits for its
	// secrets to appear in a followed key log.
	tlsWaitKeys = 10 * time.Second
)

// DecryptTLS returns a TLSDecrypter passing chunks on to next.
func DecryptTLS(next Sink, keys *TLSKeys) *TLSDecrypter {
	return &TLSDecrypter{next: next, keys: keys, conns: map[*Conn]*tlsConn{}}
}

// Stats returns the counters so far.
func (d *TLSDecrypter) Stats() TLSStats {
	return TLSStats{
		TLSConns: d.conns_.Load(), TLSDecrypted: d.decrypted.Load(), TLSNoKeys: d.noKeys.Load(),
		TLSUnsupported: d.unsupported.Load(), TLSHandshakeOnly: d.handshakeOnly.Load(),
		TLSDecryptFailures: d.failures.Load(), TLSRecordsUnsent: d.unsent.Load(), TLSKeysLate: d.late.Load(),
	}
}

// Chunk implements Sink.
func (d *TLSDecrypter) Chunk(c *Chunk) {
	if d.stall != nil {
		d.enqueue(c)
		return
	}
	d.process(c)
}

// process handles a chunk in its turn.
func (d *TLSDecrypter) process(c *Chunk) {
	tc := d.conns[c.Conn]
	if tc == nil {
		if c.Kind == Close {
			d.next.Chunk(c)
			return
		}
		tc = newTLSConn(d, c.Conn)
		d.conns[c.Conn] = tc
	}
	abs := absDir(c)
	switch tc.state {
	case tlsPass:
		d.next.Chunk(c)
	case tlsDecrypting:
		tc.decrypting(c, abs)
	default:
		tc.hold(c, abs)
		tc.advance(c.Time)
		if tc.state == tlsWaiting && !tc.late {
			d.stallOn(tc, c.Time)
		}
	}
	if c.Kind == Close {
		tc.closed[abs] = true
		if tc.closed[0] && tc.closed[1] {
			delete(d.conns, c.Conn)
		}
	}
}

// absDir is a chunk's direction relative to the source's first choice of
// sides, which a Conn.Swap does not change.
func absDir(c *Chunk) uint8 {
	a := uint8(c.Dir)
	if c.Conn.swapped {
		a ^= 1
	}
	return a
}

// tlsState is where a connection is in DecryptTLS.
type tlsState uint8

const (
	tlsSniff      tlsState = iota // its first bytes are not in yet
	tlsHello                      // TLS: reading the hellos, chunks held
	tlsWaiting                    // hellos read, secrets not yet in the followed key log
	tlsDecrypting                 // keys installed: plaintext goes on
	tlsPass                       // not TLS, or not decrypted: chunks go on untouched
)

// tlsGiveUp says why a TLS connection is passed on encrypted.
type tlsGiveUp uint8

const (
	tlsGiveUpNoHello tlsGiveUp = iota
	tlsGiveUpNoKeys
	tlsGiveUpUnsupported
	tlsGiveUpHandshakeOnly // ended before the ServerHello: no application data
)

// heldChunk is a chunk kept while a connection's keys are looked for.
type heldChunk struct {
	abs       uint8
	kind      Kind
	data      []byte
	n         int
	t         time.Time
	reason    CloseReason
	notCopied bool
}

// tlsConn is one connection DecryptTLS tracks.
type tlsConn struct {
	d      *TLSDecrypter
	conn   *Conn
	state  tlsState
	cliAbs uint8 // absDir of the TLS client's bytes
	closed [2]bool
	late   bool // waited longer than tlsStallMax: waits alone (tls_stall.go)
	ending bool // its Close is queued behind it

	held      []heldChunk
	heldBytes int
	fed       int // held chunks given to the record layer...
	fedOff    int // ...and bytes of held[fed]

	dir          [2]tlsDir
	clientRandom []byte
	hello        serverHello
	suite        tlsSuite
	tls13        bool
	noHSKeys     bool // TLS 1.3 key log without handshake secrets
	waitSince    time.Time
}

func newTLSConn(d *TLSDecrypter, c *Conn) *tlsConn {
	tc := &tlsConn{d: d, conn: c}
	for i := range tc.dir {
		tc.dir[i].c, tc.dir[i].side = tc, i
	}
	return tc
}

// hold keeps a copy of c until the connection's fate is known.
func (tc *tlsConn) hold(c *Chunk, abs uint8) {
	h := heldOf(c, abs)
	tc.heldBytes += len(h.data)
	tc.held = append(tc.held, h)
}

// heldOf copies c, with its direction relative to the source's first
// choice of sides (absDir: a Swap while it is held does not change it).
func heldOf(c *Chunk, abs uint8) heldChunk {
	h := heldChunk{abs: abs, kind: c.Kind, n: c.Len, t: c.Time, reason: c.Reason, notCopied: c.NotCopied}
	if c.Kind == Data {
		h.data = append([]byte(nil), c.Data...)
	}
	return h
}

// chunk returns h as a chunk of conn, its direction for conn's sides now;
// ok is false when conn's next Sink wants only its Close now (Ignore).
func (h *heldChunk) chunk(conn *Conn) (c Chunk, ok bool) {
	if conn.Ignore && h.kind != Close {
		return c, false
	}
	d := Dir(h.abs)
	if conn.swapped {
		d ^= 1
	}
	return Chunk{Conn: conn, Dir: d, Kind: h.kind, Time: h.t, Data: h.data, Len: h.n, Reason: h.reason, NotCopied: h.notCopied}, true
}

// advance moves a held connection on as far as its chunks allow: the
// record layer reads them up to the hellos, the keys are looked up, and
// the connection is then decrypted from its held chunks, waits for its
// keys, or is passed on encrypted.
func (tc *tlsConn) advance(t time.Time) {
	if tc.state == tlsSniff && !tc.sniff() {
		return
	}
	for {
		if tc.state == tlsWaiting {
			tc.lookup(t)
		}
		if (tc.state != tlsHello && tc.state != tlsDecrypting) || tc.fed == len(tc.held) {
			break
		}
		h := &tc.held[tc.fed]
		side := int(h.abs ^ tc.cliAbs)
		switch h.kind {
		case Data:
			n := tc.dir[side].feed(h.data[tc.fedOff:], h.t)
			if tc.fedOff += n; tc.fedOff < len(h.data) {
				continue // stopped: the state changed
			}
		case Gap:
			tc.dir[side].gap(h.n)
		case Close:
			if tc.state == tlsHello {
				tc.endedInHello()
				continue
			}
			tc.dir[side].flushGap(h.t)
			tc.emit(&Chunk{Kind: Close, Dir: tc.dirOf(side), Time: h.t, Reason: h.reason})
		}
		tc.fed, tc.fedOff = tc.fed+1, 0
	}
	switch {
	case tc.state == tlsWaiting && (tc.heldBytes > maxTLSHeld || t.Sub(tc.waitSince) > tlsWaitKeys || tc.ending || tc.heldClosed()):
		tc.giveUp(tlsGiveUpNoKeys)
	case tc.state == tlsHello && tc.heldBytes > maxTLSHeld:
		tc.giveUp(tlsGiveUpNoHello)
	}
	switch tc.state {
	case tlsPass:
		tc.replay()
	case tlsDecrypting:
		tc.held, tc.heldBytes, tc.fed, tc.fedOff = nil, 0, 0, 0
	}
}

// heldClosed reports whether a held chunk is a Close.
func (tc *tlsConn) heldClosed() bool {
	for i := range tc.held {
		if tc.held[i].kind == Close {
			return true
		}
	}
	return false
}

// sniff decides from the first bytes whether the connection is TLS: a
// handshake or application data record of TLS 1.x (RFC 8446 §5.1), as
// the decoder tests. It reports whether the connection goes on as TLS.
func (tc *tlsConn) sniff() bool {
	var first []byte
	var abs uint8
	started, ended := false, false
	for _, h := range tc.held {
		if !started && h.kind == Data && len(h.data) > 0 {
			started, abs = true, h.abs
		}
		if started && h.abs != abs {
			continue
		}
		if h.kind != Data {
			ended = true // a gap or close: no more of the beginning
			break
		}
		first = append(first, h.data[:min(len(h.data), 3-len(first))]...)
		if len(first) == 3 {
			break
		}
	}
	switch {
	case len(first) < 3 && !ended:
		return false // wait for more
	case len(first) < 3 || !(first[0] == recHandshake || first[0] == recApplicationData) || first[1] != 3 || first[2] > 4:
		tc.state = tlsPass
		tc.replay()
		return false
	}
	tc.d.conns_.Add(1)
	tc.cliAbs, tc.state = abs, tlsHello
	return true
}

// dirOf returns the Dir, for the Conn's current sides, of a side.
func (tc *tlsConn) dirOf(side int) Dir {
	a := tc.cliAbs ^ uint8(side)
	if tc.conn.swapped {
		a ^= 1
	}
	return Dir(a)
}
