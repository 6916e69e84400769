package capture

import (
	"bytes"

	"golang.org/x/crypto/cryptobyte"
)

// TLS handshake message types (RFC 8446 §4, RFC 5246 §7.4).
const (
	hsClientHello = 1
	hsServerHello = 2
	hsFinished    = 20
	hsKeyUpdate   = 24
)

// maxHelloLen bounds the hello messages kept whole; larger ones (never
// seen in practice: a ClientHello with post-quantum key shares is ~2 KB)
// are skipped.
const maxHelloLen = 1 << 16

// hsWalker walks the handshake messages of one direction (RFC 8446 §4:
// type, 24-bit length, body), which may span records or share one. It
// keeps the bodies of the messages kwire reads and skips the others.
type hsWalker struct {
	hdr    [4]byte
	hdrN   int
	remain int    // body bytes of the current message still to come
	body   []byte // the current message's body, when kept
	keep   bool
}

// feed walks p and calls msg for every message completed in it (body is
// nil for a message not kept).
func (w *hsWalker) feed(p []byte, msg func(typ uint8, body []byte)) {
	for len(p) > 0 {
		if w.hdrN < 4 {
			n := copy(w.hdr[w.hdrN:], p)
			w.hdrN += n
			p = p[n:]
			if w.hdrN < 4 {
				return
			}
			w.remain = int(w.hdr[1])<<16 | int(w.hdr[2])<<8 | int(w.hdr[3])
			t := w.hdr[0]
			w.keep = (t == hsClientHello || t == hsServerHello || t == hsKeyUpdate) && w.remain <= maxHelloLen
			w.body = w.body[:0]
		}
		n := min(w.remain, len(p))
		if w.keep {
			w.body = append(w.body, p[:n]...)
		}
		w.remain -= n
		p = p[n:]
		if w.remain == 0 {
			w.hdrN = 0
			var body []byte
			if w.keep {
				body = w.body
			}
			msg(w.hdr[0], body)
		}
	}
}

// helloRetryRandom is the random of a HelloRetryRequest (RFC 8446 §4.1.3):
// a ServerHello that asks for a second ClientHello.
var helloRetryRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// serverHello is what kwire needs of a ServerHello.
type serverHello struct {
	random  []byte
	suite   uint16
	version uint16 // negotiated: supported_versions (RFC 8446 §4.2.1) if present
	retry   bool   // a HelloRetryRequest
}

// parseClientHello returns a ClientHello's random (RFC 5246 §7.4.1.2,
// RFC 8446 §4.1.2: legacy_version, then random).
func parseClientHello(body []byte) ([]byte, bool) {
	s := cryptobyte.String(body)
	var random []byte
	if !s.Skip(2) || !s.ReadBytes(&random, 32) {
		return nil, false
	}
	return random, true
}

// parseServerHello reads a ServerHello (RFC 8446 §4.1.3): legacy_version,
// random, legacy_session_id_echo, cipher_suite, compression, extensions.
func parseServerHello(body []byte) (serverHello, bool) {
	s := cryptobyte.String(body)
	var h serverHello
	var sid cryptobyte.String
	if !s.ReadUint16(&h.version) || !s.ReadBytes(&h.random, 32) ||
		!s.ReadUint8LengthPrefixed(&sid) || !s.ReadUint16(&h.suite) || !s.Skip(1) {
		return h, false
	}
	h.retry = bytes.Equal(h.random, helloRetryRandom)
	var exts cryptobyte.String
	if s.Empty() || !s.ReadUint16LengthPrefixed(&exts) {
		return h, true // no extensions (RFC 5246 §7.4.1.3)
	}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return h, false
		}
		if typ == 43 { // supported_versions: the selected version
			if !data.ReadUint16(&h.version) {
				return h, false
			}
		}
	}
	return h, true
}
