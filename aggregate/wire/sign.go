package wire

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// Signed batches (format version 3): a version 2 batch whose version byte
// is 3 and which ends in a 32-byte tag,
//
//	signed = 3 host:string run:uvarint seq:uvarint item* tag:[32]byte
//	tag    = HMAC-SHA256(key, "kwire agent batch\n" || signed without tag)
//
// The tag covers the whole record value (its version byte, the agent's
// host and run, the sequence number and every item): a batch is verified
// on its own, and the host it names selects the key it is verified with,
// so that only the holder of an agent's key can publish as that agent.
// A replayed batch is the same agent run and sequence number: a duplicate,
// dropped. The topic is not covered: batches stay verifiable when the
// topic is mirrored under another name.

// VersionSigned is the version byte of a signed batch this build writes
// (formats 3 and 5 were signed too).
const VersionSigned = 7

// signedFormat says whether v is the version byte of a signed format.
func signedFormat(v byte) bool {
	return v == VersionSigned || v == versionV4Signed || v == versionV2Signed
}

// TagSize is the size of a signed batch's tag.
const TagSize = sha256.Size

// SharedAgent is the agent name of a key any agent may sign with (a key
// shared by all agents): whoever holds it can pose as any agent.
const SharedAgent = "*"

// MinKeyBytes is the shortest key accepted.
const MinKeyBytes = 16

// macDomain prefixes what the tag covers, so that a tag made for a
// batch is no MAC of anything else made with the same key.
const macDomain = "kwire agent batch\n"

// Errors of Keyring.Verify: the batch is dropped.
var (
	// ErrUnsigned: an unsigned batch (format 2, 4 or 6), or one too
	// short to hold a tag.
	ErrUnsigned = errors.New("unsigned batch")
	// ErrUnknownAgent: no key of the keyring is the agent's (nor shared).
	ErrUnknownAgent = errors.New("no key for the agent it names")
	// ErrBadTag: the tag is not the agent's key's (another key, or a
	// batch changed after it was signed).
	ErrBadTag = errors.New("tag does not verify with the agent's key")
)

// Key is an agent's signing key: Agent is the agent name it belongs to
// (SharedAgent: any).
type Key struct {
	Agent  string
	secret []byte
}

// ParseKeys reads keys, one a line: an agent name and the key in hex (at
// least MinKeyBytes bytes: `openssl rand -hex 32`), separated by blanks.
// Blank lines and lines starting with # are skipped. Errors name the line,
// never the key.
func ParseKeys(text []byte) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want NAME HEXKEY (an agent name, or * for a key of every agent, and its key: openssl rand -hex 32)", n)
		}
		secret, err := hex.DecodeString(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: agent %s: the key is not hex (make one with openssl rand -hex 32)", n, f[0])
		}
		if len(secret) < MinKeyBytes {
			return nil, fmt.Errorf("line %d: agent %s: the key has %d bytes, want at least %d (make one with openssl rand -hex 32)", n, f[0], len(secret), MinKeyBytes)
		}
		keys = append(keys, Key{Agent: f[0], secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in it (want lines NAME HEXKEY)")
	}
	return keys, nil
}

// Signer signs an agent's batches with its key. It is not safe for
// concurrent use.
type Signer struct {
	mac hash.Hash
}

// NewSigner returns a Signer with k.
func NewSigner(k Key) *Signer { return &Signer{mac: hmac.New(sha256.New, k.secret)} }

// Sign turns b, an unsigned batch (Encoder.Bytes), into a signed one in
// place: its version byte set to VersionSigned and the tag appended. It
// returns the signed batch (b's array when it has room for the tag).
func (s *Signer) Sign(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	b[0] = VersionSigned
	return tag(b, s.mac, b) // the tag is computed before it is appended
}

// tag appends body's tag with mac to dst.
func tag(dst []byte, mac hash.Hash, body []byte) []byte {
	mac.Reset()
	mac.Write([]byte(macDomain))
	mac.Write(body)
	return mac.Sum(dst)
}

// Keyring verifies signed batches: each with the keys of the agent it
// names, then the shared keys (several keys of one agent: a key being
// replaced). It is not safe for concurrent use.
type Keyring struct {
	byAgent map[string][]hash.Hash
	shared  []hash.Hash
}

// NewKeyring returns a keyring of keys.
func NewKeyring(keys []Key) *Keyring {
	kr := &Keyring{byAgent: map[string][]hash.Hash{}}
	for _, k := range keys {
		m := hmac.New(sha256.New, k.secret)
		if k.Agent == SharedAgent {
			kr.shared = append(kr.shared, m)
		} else {
			kr.byAgent[k.Agent] = append(kr.byAgent[k.Agent], m)
		}
	}
	return kr
}

// Verify checks that value, a record of the agents' topic, is a batch
// signed with a key of the agent it names (or a shared key), and returns
// that agent's name; on ErrUnsigned, ErrUnknownAgent and ErrBadTag too, as
// far as it could be read (the agent the batch claims to be).
func (kr *Keyring) Verify(value []byte) (agent string, err error) {
	agent, ok := claimedHost(value)
	if len(value) > 0 && !knownFormat(value[0]) {
		return agent, newerFormat(value) // a newer agent's, signed or not: Decode says so
	}
	if len(value) == 0 || !signedFormat(value[0]) || len(value) < 1+TagSize {
		return agent, ErrUnsigned
	}
	if !ok {
		return agent, fmt.Errorf("%w: no agent name", ErrCorrupt)
	}
	body, got := value[:len(value)-TagSize], value[len(value)-TagSize:]
	macs := kr.byAgent[agent]
	if len(macs) == 0 && len(kr.shared) == 0 {
		return agent, ErrUnknownAgent
	}
	var buf [TagSize]byte
	for _, set := range [][]hash.Hash{macs, kr.shared} {
		for _, m := range set {
			if hmac.Equal(tag(buf[:0], m, body), got) {
				return agent, nil
			}
		}
	}
	return agent, ErrBadTag
}

// claimedHost reads the host name a batch says it is from.
func claimedHost(value []byte) (string, bool) {
	if len(value) < 2 {
		return "", false
	}
	n, k := binary.Uvarint(value[1:])
	if k <= 0 || n > uint64(len(value)-1-k) {
		return "", false
	}
	return string(value[1+k : 1+k+int(n)]), true
}
