package capture

import "time"

// Record content types (RFC 5246 §6.2.1, RFC 8446 §5.1).
const (
	recChangeCipherSpec = 20
	recAlert            = 21
	recHandshake        = 22
	recApplicationData  = 23
)

const (
	recHeaderLen = 5
	// maxRecordLen bounds TLSCiphertext.length (RFC 5246 §6.2.3: 2^14 +
	// 2048; RFC 8446 §5.2 is tighter).
	maxRecordLen = 1<<14 + 2048
	// maxSeqSkip is how many records a resynchronisation after lost
	// framing looks past: the records lost with the bytes.
	maxSeqSkip = 64
	// maxPresumedHS is how many records that do not open with TLS 1.3
	// application keys are taken for the encrypted handshake when the key
	// log has no handshake secrets.
	maxPresumedHS = 8
)

func recLen(h []byte) int { return int(h[3])<<8 | int(h[4]) }

// plausible says whether h starts like a TLS record header.
func plausible(h []byte) bool {
	return h[0] >= recChangeCipherSpec && h[0] <= 24 && h[1] == 3 && h[2] <= 4 && recLen(h) <= maxRecordLen
}

// tlsDir is one direction of a TLS connection: record framing across
// chunks and gaps, and, once keys are installed, record protection. It
// hands plaintext application data and losses to its tlsConn.
type tlsDir struct {
	c    *tlsConn
	side int // 0: from the TLS client, 1: from the server

	buf    []byte // the record being assembled; when lost, the bytes scanned
	scanAt int    // when lost: offset in buf of the next candidate header
	skip   int    // bytes to drop: the rest of a record a gap cut
	lost   bool   // framing lost: scanning for a record that opens

	encrypted bool          // records are protected (RFC 5246 §7.1 CCS; RFC 8446: after the ServerHello)
	ciph      *recordCipher // application keys (TLS 1.2: the only ones); nil until installed
	hsCiph    *recordCipher // TLS 1.3 handshake keys, until this side's Finished
	seq       uint64        // RFC 5246 §6.1, RFC 8446 §5.3: per keys, from 0
	hs        hsWalker
	appOK     bool // a record opened with the application keys
	presumed  int  // records presumed handshake (no handshake secrets)

	gapPending bool   // plaintext lost and not yet reported
	gapUnknown bool   // ... of unknown length
	gapLen     int    // ... of this length
	failed     []byte // fragment of the last record that did not open
	out        []byte // plaintext buffer
}

// feed takes the next bytes of the direction. It returns how many it
// consumed: fewer than len(p) only when a record needs keys that are not
// known yet (the connection waits for the key log); that record is then
// complete in buf (see resume).
func (d *tlsDir) feed(p []byte, t time.Time) int {
	n := len(p)
	for len(p) > 0 {
		if d.c.state != tlsHello && d.c.state != tlsDecrypting {
			return n - len(p) // given up on (or waiting: see record)
		}
		switch {
		case d.skip > 0:
			k := min(d.skip, len(p))
			d.skip -= k
			p = p[k:]
		case d.lost:
			d.buf = append(d.buf, p...)
			p = nil
			d.scan(t)
		case len(d.buf) == 0 && len(p) >= recHeaderLen && plausible(p) && len(p) >= recHeaderLen+recLen(p):
			m := recHeaderLen + recLen(p)
			if !d.record(p[:m], t) {
				d.buf = append(d.buf, p[:m]...)
				return n - len(p) + m
			}
			p = p[m:]
		default:
			need := recHeaderLen
			if len(d.buf) >= recHeaderLen {
				need += recLen(d.buf)
			}
			k := min(need-len(d.buf), len(p))
			d.buf = append(d.buf, p[:k]...)
			p = p[k:]
			if len(d.buf) == recHeaderLen && !plausible(d.buf) {
				d.loseFraming(true)
				continue
			}
			if len(d.buf) >= recHeaderLen && len(d.buf) == recHeaderLen+recLen(d.buf) {
				if !d.record(d.buf, t) {
					return n - len(p)
				}
				d.buf = d.buf[:0]
			}
		}
	}
	return n
}

// resume processes the record feed stopped at, once keys are known.
func (d *tlsDir) resume(t time.Time) {
	if !d.lost && len(d.buf) >= recHeaderLen && len(d.buf) == recHeaderLen+recLen(d.buf) && d.record(d.buf, t) {
		d.buf = d.buf[:0]
	}
}

// record handles one whole record; false means it needs keys not known
// yet, or the connection stopped being decrypted: stop feeding.
func (d *tlsDir) record(rec []byte, t time.Time) bool {
	if d.c.state != tlsHello && d.c.state != tlsDecrypting {
		return false
	}
	hdr, frag := rec[:recHeaderLen], rec[recHeaderLen:]
	switch {
	case hdr[0] == recChangeCipherSpec:
		// RFC 5246 §7.1: protection starts after it, sequence at 0.
		// RFC 8446 §5: sent for compatibility only, ignored.
		if !d.c.tls13 {
			d.encrypted, d.seq = true, 0
		}
	case !d.encrypted:
		d.plaintext(hdr[0], frag)
	case hdr[0] == recAlert && len(frag) == 2:
		// An alert in the clear (RFC 8446 §5: e.g. a client refusing
		// the server's certificate): nothing to decrypt.
	case d.ciph == nil:
		if d.c.state == tlsHello {
			d.c.giveUp(tlsGiveUpNoHello) // protected records before the ServerHello
		}
		return false
	default:
		d.decrypt(hdr, frag, t)
	}
	return true
}

// plaintext handles a record before protection starts: the hellos.
func (d *tlsDir) plaintext(typ uint8, frag []byte) {
	if typ != recHandshake {
		if d.side == 0 && d.c.clientRandom == nil {
			d.c.giveUp(tlsGiveUpNoHello) // the connection began before the capture
		}
		return
	}
	d.hs.feed(frag, func(typ uint8, body []byte) { d.c.handshake(d.side, typ, body) })
}

// maxUnsentRecords is how many sequence numbers a record that does not
// open with its own is tried past it (TLSRecordsUnsent).
const maxUnsentRecords = 4

// decrypt opens a protected record and passes on what it carries.
func (d *tlsDir) decrypt(hdr, frag []byte, t time.Time) {
	ciph := d.ciph
	if d.hsCiph != nil {
		ciph = d.hsCiph
	}
	plain, typ, ok := ciph.open(d.out[:0], hdr, frag, d.seq)
	if !ok && d.hsCiph != nil {
		// The Finished was missed: try the application keys' first record.
		if plain, typ, ok = d.ciph.open(d.out[:0], hdr, frag, 0); ok {
			d.hsCiph, d.seq = nil, 0
		}
	}
	if !ok && d.hsCiph == nil {
		// A sender whose write failed before its first byte (at a
		// deadline, as its client closes) numbered a record the wire
		// never carried: the next opens with a later sequence number.
		for k := uint64(1); k <= maxUnsentRecords && !ok; k++ {
			if plain, typ, ok = ciph.open(d.out[:0], hdr, frag, d.seq+k); ok {
				d.seq += k
				d.c.d.unsent.Add(k)
			}
		}
	}
	if !ok && d.c.tls13 && d.hsCiph == nil && !d.appOK && d.presumed < maxPresumedHS && d.c.noHSKeys {
		d.presumed++ // the encrypted handshake, whose keys were not logged
		return
	}
	if !ok {
		d.fail(ciph, frag)
		return
	}
	d.seq++
	d.failed = d.failed[:0]
	d.content(typ, plain, t)
	d.out = plain[:0]
}

// content passes on one opened record's plaintext.
func (d *tlsDir) content(typ uint8, plain []byte, t time.Time) {
	switch typ {
	case recApplicationData:
		if d.hsCiph == nil {
			d.appOK = true
		}
		d.flushGap(t)
		if len(plain) > 0 {
			d.c.data(d.side, plain, t)
		}
	case recHandshake:
		if d.c.tls13 {
			d.hs.feed(plain, d.postHandshake)
		}
		// TLS 1.2: the Finished (renegotiation is not followed).
	}
	// Alerts (close_notify...) carry no Kafka bytes.
}

// postHandshake follows the TLS 1.3 handshake messages under protection.
func (d *tlsDir) postHandshake(typ uint8, _ []byte) {
	switch {
	case typ == hsFinished && d.hsCiph != nil:
		// RFC 8446 §4.4.4: the last message under the handshake keys.
		d.hsCiph, d.seq = nil, 0
	case typ == hsKeyUpdate && d.hsCiph == nil:
		// RFC 8446 §4.6.3: the sender's next records use the next secret.
		d.ciph, d.seq = d.ciph.next(), 0
	}
}

// fail counts a record that did not open (damaged, or wrong keys): its
// plaintext is lost, reported as a gap of its length once the next
// record opens where expected (otherwise the length was wrong too).
func (d *tlsDir) fail(ciph *recordCipher, frag []byte) {
	d.c.d.failures.Add(1)
	d.seq++
	d.gapPending = true
	d.gapLen += max(len(frag)-ciph.overhead(), 0)
	d.failed = append(d.failed[:0], frag...)
}

// gap takes n bytes missing from the TCP stream (-1: unknown).
func (d *tlsDir) gap(n int) {
	if d.ciph == nil {
		d.c.giveUp(tlsGiveUpNoHello) // the hellos are not all there
		return
	}
	d.gapPending = true
	need := recHeaderLen
	if len(d.buf) >= recHeaderLen {
		need += recLen(d.buf)
	}
	switch {
	case d.lost:
		d.buf, d.scanAt = d.buf[:0], 0 // bytes across a gap do not make a record
	case n >= 0 && d.skip > 0 && n <= d.skip:
		d.skip -= n
	case n >= 0 && d.skip == 0 && len(d.buf) >= recHeaderLen && n <= need-len(d.buf):
		// Inside a record whose header arrived: only it is lost.
		d.skip = need - len(d.buf) - n
		if d.encrypted {
			d.seq++
			d.gapLen += max(recLen(d.buf)-d.ciph.overhead(), 0)
		}
		d.buf = d.buf[:0]
	default:
		d.loseFraming(false)
	}
}

// loseFraming starts scanning for a record that opens. After a record
// that failed, when the next header is implausible, the failed record's bytes are scanned too: its length may
// have been the damaged part.
func (d *tlsDir) loseFraming(implausible bool) {
	if d.ciph == nil {
		d.c.giveUp(tlsGiveUpNoHello)
		return
	}
	if implausible && len(d.failed) == 0 {
		d.c.d.failures.Add(1) // bytes that are no record: count the loss once
	}
	d.lost, d.gapPending, d.gapUnknown = true, true, true
	d.skip, d.scanAt = 0, 0
	if implausible && len(d.failed) > 0 {
		d.buf = append(append([]byte(nil), d.failed...), d.buf...)
	} else {
		d.buf = d.buf[:0]
	}
	d.failed = d.failed[:0]
}

// flushGap reports the plaintext lost before the bytes about to be passed.
func (d *tlsDir) flushGap(t time.Time) {
	if !d.gapPending {
		return
	}
	n := d.gapLen
	if d.gapUnknown {
		n = -1
	}
	d.gapPending, d.gapUnknown, d.gapLen = false, false, 0
	d.c.gap(d.side, n, t)
}

// scan looks, in the bytes after lost framing, for a protected record
// that opens with one of the next sequence numbers: AEAD authentication
// makes a false match impossible. Once one opens, framing is back.
func (d *tlsDir) scan(t time.Time) {
	for d.scanAt+recHeaderLen <= len(d.buf) {
		h := d.buf[d.scanAt:]
		if !(h[0] >= recAlert && h[0] <= recApplicationData && h[1] == 3 && h[2] == 3 && recLen(h) <= maxRecordLen) {
			d.scanAt++
			continue
		}
		m := recHeaderLen + recLen(h)
		if len(h) < m {
			break // wait for the rest of the candidate
		}
		if d.resync(h[:m], t) {
			rest := append([]byte(nil), h[m:]...)
			d.buf, d.scanAt = d.buf[:0], 0
			d.feed(rest, t)
			return
		}
		d.scanAt++
	}
	if d.scanAt > 0 {
		d.buf = append(d.buf[:0], d.buf[d.scanAt:]...)
		d.scanAt = 0
	}
}

// resync tries to open rec as the next record after lost ones: with the
// sequence number its explicit nonce suggests (TLS 1.2 AES-GCM), then the
// next maxSeqSkip ones; in a TLS 1.3 handshake also with the application
// keys from 0 (the Finished may be lost).
func (d *tlsDir) resync(rec []byte, t time.Time) bool {
	hdr, frag := rec[:recHeaderLen], rec[recHeaderLen:]
	try := func(c *recordCipher, seq uint64) bool {
		plain, typ, ok := c.open(d.out[:0], hdr, frag, seq)
		if !ok {
			return false
		}
		if c == d.ciph {
			d.hsCiph = nil
		}
		d.lost, d.encrypted, d.seq = false, true, seq+1
		d.content(typ, plain, t)
		d.out = plain[:0]
		return true
	}
	lo := d.seq - min(d.seq, 1) // the last record counted may be the damaged one
	if d.hsCiph != nil {
		for s := lo; s < lo+maxSeqSkip; s++ {
			if try(d.hsCiph, s) {
				return true
			}
		}
		lo = 0
	}
	if s, ok := d.ciph.explicitNonce(frag); ok && s >= lo && try(d.ciph, s) {
		return true
	}
	for s := lo; s < lo+maxSeqSkip; s++ {
		if try(d.ciph, s) {
			return true
		}
	}
	return false
}
