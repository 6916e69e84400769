package capture

import "time"

// handshake takes a handshake message read in the clear: the hellos.
func (tc *tlsConn) handshake(side int, typ uint8, body []byte) {
	switch {
	case side == 0 && typ == hsClientHello:
		// A second ClientHello (after a HelloRetryRequest) keeps the
		// random (RFC 8446 §4.1.2).
		r, ok := parseClientHello(body)
		if !ok {
			tc.giveUp(tlsGiveUpNoHello)
		} else if tc.clientRandom == nil {
			tc.clientRandom = append([]byte(nil), r...)
			if tc.dirOf(0) == ToClient && tc.conn.Role == RoleGuess {
				tc.conn.Swap() // the ClientHello's sender is the client
			}
		}
	case side == 0 && tc.clientRandom == nil:
		tc.giveUp(tlsGiveUpNoHello) // the capture began mid-handshake
	case side == 1 && typ == hsServerHello && tc.hello.random == nil:
		h, ok := parseServerHello(body)
		switch {
		case !ok || tc.clientRandom == nil:
			tc.giveUp(tlsGiveUpNoHello)
		case !h.retry:
			h.random = append([]byte(nil), h.random...)
			tc.serverHello(h)
		}
	}
}

// serverHello takes the negotiated version and suite: the keys are looked
// up next (lookup), once the record being read is done.
func (tc *tlsConn) serverHello(h serverHello) {
	tc.hello = h
	s, ok := tlsSuites[h.suite]
	if !ok || (h.version != 0x0303 && h.version != 0x0304) || s.tls13 != (h.version == 0x0304) {
		tc.giveUp(tlsGiveUpUnsupported)
		return
	}
	tc.suite, tc.tls13 = s, s.tls13
	if tc.tls13 {
		// RFC 8446 §2: everything after the ServerHello is protected.
		tc.dir[0].encrypted, tc.dir[1].encrypted = true, true
	}
	tc.state = tlsWaiting
}

// lookup looks the session up in the key log; with its secrets the
// connection is decrypted from the record each direction stopped at.
// Without, it is passed on encrypted, or, when the key log is followed,
// waits for them (see advance).
func (tc *tlsConn) lookup(t time.Time) {
	// A connection that closed while waiting, or held too much or too
	// long, is given up on after this lookup: read the key log once more
	// whatever the time of the last read (its secrets were logged before
	// its first application data). One that other connections queue
	// behind reads it more often.
	every := reloadEvery
	switch {
	case tc.ending || tc.heldClosed() || tc.heldBytes > maxTLSHeld || !tc.waitSince.IsZero() && t.Sub(tc.waitSince) > tlsWaitKeys:
		// About to be given up on (advance): look once more first. A
		// connection waiting alone (late) on a loaded host may hold
		// maxTLSHeld before the next read a second after the last.
		every = 0
	case tc.d.stall == tc:
		every = stallReloadEvery
	}
	if sec := tc.d.keys.lookup(tc.clientRandom, every); sec != nil && tc.install(sec) {
		tc.state = tlsDecrypting
		tc.d.decrypted.Add(1)
		if tc.late {
			tc.d.late.Add(1)
		}
		for i := range tc.dir {
			tc.dir[i].resume(t)
		}
		return
	}
	if tc.d.keys == nil || !tc.d.keys.follow {
		tc.giveUp(tlsGiveUpNoKeys)
		return
	}
	if tc.waitSince.IsZero() {
		tc.waitSince = t
	}
}

// install makes both directions' ciphers, if sec has the secrets needed.
func (tc *tlsConn) install(sec *tlsSecrets) bool {
	cli, srv := &tc.dir[0], &tc.dir[1]
	if !tc.tls13 {
		if sec.master == nil {
			return false
		}
		cli.ciph, srv.ciph = keys12(tc.suite, sec.master, tc.clientRandom, tc.hello.random)
		return true
	}
	if sec.clientApp == nil || sec.serverApp == nil {
		return false // a followed key log may have only the handshake secrets yet
	}
	cli.ciph, srv.ciph = keys13(tc.suite, sec.clientApp), keys13(tc.suite, sec.serverApp)
	if sec.clientHS != nil && sec.serverHS != nil {
		cli.hsCiph, srv.hsCiph = keys13(tc.suite, sec.clientHS), keys13(tc.suite, sec.serverHS)
	} else {
		tc.noHSKeys = true
	}
	return true
}

// giveUp passes a connection not yet decrypted on encrypted, counted; its
// held chunks are replayed by advance.
func (tc *tlsConn) giveUp(why tlsGiveUp) {
	if tc.state == tlsPass || tc.state == tlsDecrypting {
		return
	}
	tc.state = tlsPass
	switch why {
	case tlsGiveUpUnsupported:
		tc.d.unsupported.Add(1)
	case tlsGiveUpHandshakeOnly:
		tc.d.handshakeOnly.Add(1)
	default:
		tc.d.noKeys.Add(1)
	}
}

// endedInHello gives up on a connection that closed before its hellos
// were read. One whose ClientHello was read and whose ServerHello never
// came agreed no keys: the client gave up on it mid-handshake (kgo
// closing a dial as its client stops), and it carried no application
// data. Any other (its ClientHello not in the capture) is counted as one
// whose hellos are missing.
func (tc *tlsConn) endedInHello() {
	if tc.clientRandom != nil && tc.hello.random == nil {
		tc.giveUp(tlsGiveUpHandshakeOnly)
		return
	}
	tc.giveUp(tlsGiveUpNoHello)
}

// replay passes the held chunks on as they came.
func (tc *tlsConn) replay() {
	held := tc.held
	tc.held, tc.heldBytes, tc.fed, tc.fedOff = nil, 0, 0, 0
	for i := range held {
		if c, ok := held[i].chunk(tc.conn); ok {
			tc.emit(&c)
		}
	}
}

// decrypting handles a chunk of a connection being decrypted.
func (tc *tlsConn) decrypting(c *Chunk, abs uint8) {
	d := &tc.dir[abs^tc.cliAbs]
	switch c.Kind {
	case Data:
		d.feed(c.Data, c.Time)
	case Gap:
		d.gap(c.Len)
	case Close:
		d.flushGap(c.Time)
		tc.d.next.Chunk(c)
	}
}

// data passes on plaintext of a side.
func (tc *tlsConn) data(side int, p []byte, t time.Time) {
	if !tc.conn.Ignore {
		tc.emit(&Chunk{Dir: tc.dirOf(side), Kind: Data, Time: t, Data: p})
	}
}

// gap passes on n bytes of plaintext lost on a side (-1: unknown).
func (tc *tlsConn) gap(side, n int, t time.Time) {
	if !tc.conn.Ignore {
		tc.emit(&Chunk{Dir: tc.dirOf(side), Kind: Gap, Time: t, Len: n})
	}
}

// emit passes c on for tc's connection, through a Chunk the decrypter
// reuses.
func (tc *tlsConn) emit(c *Chunk) {
	o := &tc.d.out
	*o = *c
	o.Conn = tc.conn
	tc.d.next.Chunk(o)
}
