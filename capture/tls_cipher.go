package capture

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// tlsSuite is a cipher suite whose records kwire decrypts: an AEAD, the
// key length, and the hash of the PRF (TLS 1.2) or HKDF (TLS 1.3).
type tlsSuite struct {
	keyLen int
	hash   func() hash.Hash
	chacha bool
	tls13  bool
}

var (
	aes128GCM12 = tlsSuite{keyLen: 16, hash: sha256.New}
	aes256GCM12 = tlsSuite{keyLen: 32, hash: sha512.New384}
	chacha12    = tlsSuite{keyLen: 32, hash: sha256.New, chacha: true}
)

// tlsSuites are the supported suites by IANA id: every AEAD suite of TLS
// 1.2 (RFC 5288, RFC 5289, RFC 7905), whatever its key exchange (the key
// log gives the master secret), and the three of TLS 1.3 (RFC 8446 §B.4).
// CBC suites are not decrypted (the connection is counted unsupported).
var tlsSuites = map[uint16]tlsSuite{
	0x009C: aes128GCM12, 0x009D: aes256GCM12, // RSA
	0x009E: aes128GCM12, 0x009F: aes256GCM12, // DHE_RSA
	0xC02B: aes128GCM12, 0xC02C: aes256GCM12, // ECDHE_ECDSA
	0xC02F: aes128GCM12, 0xC030: aes256GCM12, // ECDHE_RSA
	0xCCA8: chacha12, 0xCCA9: chacha12, 0xCCAA: chacha12,
	0x1301: {keyLen: 16, hash: sha256.New, tls13: true},
	0x1302: {keyLen: 32, hash: sha512.New384, tls13: true},
	0x1303: {keyLen: 32, hash: sha256.New, chacha: true, tls13: true},
}

// recordCipher opens the protected records of one direction.
type recordCipher struct {
	suite tlsSuite
	aead  cipher.AEAD
	// iv is the 12-byte IV (TLS 1.3, ChaCha20-Poly1305), or for AES-GCM
	// in TLS 1.2 the 4-byte salt before the record's explicit nonce.
	iv     []byte
	secret []byte // TLS 1.3 traffic secret, for KeyUpdate
	nonce  [12]byte
	aad    [13]byte
}

func newRecordCipher(s tlsSuite, key, iv []byte) *recordCipher {
	c := &recordCipher{suite: s, iv: iv}
	if s.chacha {
		c.aead, _ = chacha20poly1305.New(key) // the key length is right by construction
	} else {
		b, _ := aes.NewCipher(key)
		c.aead, _ = cipher.NewGCM(b)
	}
	return c
}

// overhead is what a record's fragment holds beyond its plaintext: the
// explicit nonce of TLS 1.2 AES-GCM (RFC 5288 §3), the tag, and in TLS 1.3
// the inner content type (RFC 8446 §5.2; padding assumed absent).
func (c *recordCipher) overhead() int {
	switch {
	case c.suite.tls13:
		return 16 + 1
	case !c.suite.chacha:
		return 8 + 16
	}
	return 16
}

// explicitNonce returns a TLS 1.2 AES-GCM record's explicit nonce, which
// the usual senders set to the sequence number (RFC 5288 §3 allows it).
func (c *recordCipher) explicitNonce(frag []byte) (uint64, bool) {
	if c.suite.tls13 || c.suite.chacha || len(frag) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(frag), true
}

// open authenticates and decrypts one record (hdr is its 5-byte header)
// with sequence number seq, appending the plaintext to dst. It returns the
// content type: the header's, or in TLS 1.3 the inner one. ok is false
// when the record does not authenticate: then nothing of it may be used.
func (c *recordCipher) open(dst, hdr, frag []byte, seq uint64) (plain []byte, typ uint8, ok bool) {
	if len(frag) < c.overhead() {
		return nil, 0, false
	}
	if c.suite.tls13 {
		// RFC 8446 §5.3: nonce = iv XOR the padded sequence number;
		// §5.2: the additional data is the record header.
		c.xorNonce(seq)
		p, err := c.aead.Open(dst, c.nonce[:], frag, hdr)
		if err != nil {
			return nil, 0, false
		}
		// RFC 8446 §5.4: the content type is the last non-zero byte.
		i := len(p) - 1
		for i >= len(dst) && p[i] == 0 {
			i--
		}
		if i < len(dst) {
			return nil, 0, false
		}
		return p[:i], p[i], true
	}
	ct := frag
	if c.suite.chacha {
		c.xorNonce(seq) // RFC 7905 §2
	} else {
		// RFC 5288 §3: nonce = salt (4 bytes) || explicit nonce (8).
		copy(c.nonce[:4], c.iv)
		copy(c.nonce[4:], frag[:8])
		ct = frag[8:]
	}
	// RFC 5246 §6.2.3.3: seq_num + type + version + plaintext length.
	binary.BigEndian.PutUint64(c.aad[:8], seq)
	c.aad[8], c.aad[9], c.aad[10] = hdr[0], hdr[1], hdr[2]
	binary.BigEndian.PutUint16(c.aad[11:], uint16(len(ct)-16))
	p, err := c.aead.Open(dst, c.nonce[:], ct, c.aad[:])
	if err != nil {
		return nil, 0, false
	}
	return p, hdr[0], true
}

func (c *recordCipher) xorNonce(seq uint64) {
	copy(c.nonce[:], c.iv)
	for i := 0; i < 8; i++ {
		c.nonce[4+i] ^= byte(seq >> (56 - 8*i))
	}
}

// keys12 derives both directions' ciphers of a TLS 1.2 session from its
// master secret (RFC 5246 §6.3): key_block = PRF(master_secret, "key
// expansion", server_random + client_random), cut into client and server
// MAC keys (none for AEAD), write keys, then IVs.
func keys12(s tlsSuite, master, clientRandom, serverRandom []byte) (client, server *recordCipher) {
	ivLen := 4 // RFC 5288 §3: the implicit part of the GCM nonce
	if s.chacha {
		ivLen = 12 // RFC 7905 §2
	}
	seed := append(append([]byte(nil), serverRandom...), clientRandom...)
	kb := prf12(s.hash, master, "key expansion", seed, 2*s.keyLen+2*ivLen)
	ck, sk := kb[:s.keyLen], kb[s.keyLen:2*s.keyLen]
	civ, siv := kb[2*s.keyLen:2*s.keyLen+ivLen], kb[2*s.keyLen+ivLen:]
	return newRecordCipher(s, ck, civ), newRecordCipher(s, sk, siv)
}

// prf12 is the TLS 1.2 PRF (RFC 5246 §5): P_hash(secret, label + seed).
func prf12(h func() hash.Hash, secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	mac := hmac.New(h, secret)
	mac.Write(ls)
	a := mac.Sum(nil) // A(1)
	out := make([]byte, 0, n+mac.Size())
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(ls)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:n]
}

// keys13 makes the cipher of one TLS 1.3 traffic secret (RFC 8446 §7.3).
func keys13(s tlsSuite, secret []byte) *recordCipher {
	key := expandLabel(s.hash, secret, "key", s.keyLen)
	iv := expandLabel(s.hash, secret, "iv", 12)
	c := newRecordCipher(s, key, iv)
	c.secret = secret
	return c
}

// next returns the cipher after a KeyUpdate (RFC 8446 §7.2):
// application_traffic_secret_N+1 = HKDF-Expand-Label(secret_N, "traffic upd", "", Hash.length).
func (c *recordCipher) next() *recordCipher {
	return keys13(c.suite, expandLabel(c.suite.hash, c.secret, "traffic upd", c.suite.hash().Size()))
}

// expandLabel is HKDF-Expand-Label with an empty context (RFC 8446 §7.1).
func expandLabel(h func() hash.Hash, secret []byte, label string, n int) []byte {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0) // context length
	out := make([]byte, n)
	if _, err := hkdf.Expand(h, secret, info).Read(out); err != nil {
		panic("tls: HKDF-Expand-Label: " + err.Error()) // n is at most 48: cannot happen
	}
	return out
}
