package capture

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// TLSKeys holds the session secrets of one or more NSS key log files: the
// format Go's tls.Config.KeyLogWriter, OpenSSL's keylog callback (librdkafka,
// kcat) and Java TLS agents write, one line per secret:
//
//	CLIENT_RANDOM <client random hex> <master secret hex>                      (TLS 1.2)
//	CLIENT_HANDSHAKE_TRAFFIC_SECRET <client random hex> <secret hex>           (TLS 1.3)
//	SERVER_HANDSHAKE_TRAFFIC_SECRET, CLIENT_TRAFFIC_SECRET_0, SERVER_TRAFFIC_SECRET_0
//
// Secrets are keyed by the ClientHello's random. Other labels (early data,
// exporter secrets, RSA pre-master secrets) and comment lines are ignored;
// lines that are not of this form are counted (Malformed), never printed:
// no method of TLSKeys puts key material in an error or a string.
//
// A TLSKeys is safe for use by several goroutines.
type TLSKeys struct {
	follow bool
	now    func() time.Time // wall clock; replaced in tests

	mu         sync.Mutex
	files      []*keylogFile
	secrets    map[[32]byte]*tlsSecrets
	malformed  int
	lastReload time.Time
	reloadErr  error
}

// tlsSecrets are one session's secrets; nil when not in the log.
type tlsSecrets struct {
	master                                   []byte // TLS 1.2 (RFC 5246 §8.1)
	clientHS, serverHS, clientApp, serverApp []byte // TLS 1.3 (RFC 8446 §7.1)
}

// complete reports whether s has what decryption needs: the master secret
// (TLS 1.2) or both traffic secrets (TLS 1.3).
func (s *tlsSecrets) complete() bool {
	return s != nil && (s.master != nil || (s.clientApp != nil && s.serverApp != nil))
}

// keylogFile is a key log being read; off is how far it has been parsed
// (a line still being written is left for the next read).
type keylogFile struct {
	path string
	off  int64
}

// reloadEvery bounds how often a following TLSKeys re-reads its files on a
// lookup that misses.
const reloadEvery = time.Second

// LoadTLSKeys reads the key log files at paths. With follow set (kwire
// live), a lookup of a session not found re-reads the files for lines
// added since, at most once a second: clients append to their key log as
// they connect. The error is an I/O error; a file with no usable line is
// not an error (Sessions and Malformed tell).
func LoadTLSKeys(paths []string, follow bool) (*TLSKeys, error) {
	k := &TLSKeys{follow: follow, now: time.Now, secrets: map[[32]byte]*tlsSecrets{}}
	for _, p := range paths {
		k.files = append(k.files, &keylogFile{path: p})
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.reload(!follow); err != nil {
		return nil, err
	}
	return k, nil
}

// Sessions returns how many sessions (client randoms) have secrets.
func (k *TLSKeys) Sessions() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.secrets)
}

// Malformed returns how many lines were neither a known secret, an ignored
// label nor a comment.
func (k *TLSKeys) Malformed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.malformed
}

// lookup returns the secrets logged for a client random, or nil. When
// following, a miss re-reads the files if the last read is at least every
// ago (reloadEvery, or less while other connections wait behind this one,
// 0 for one that ended), and so does a TLS 1.3 session with its handshake
// secrets only: a client logs them before the traffic secrets, and a
// lookup may fall in between.
func (k *TLSKeys) lookup(random []byte, every time.Duration) *tlsSecrets {
	if k == nil || len(random) != 32 {
		return nil
	}
	key := [32]byte(random)
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.secrets[key]; s.complete() || !k.follow {
		return s
	}
	if now := k.now(); now.Sub(k.lastReload) >= every {
		k.lastReload = now
		k.reloadErr = k.reload(false)
	}
	return k.secrets[key]
}

// reload reads what was added to every file since the last read. A file
// shorter than what was read was replaced or truncated: it is read again
// from its start. final takes a last line without its newline too.
func (k *TLSKeys) reload(final bool) error {
	for _, f := range k.files {
		if err := k.readFile(f, final); err != nil {
			return err
		}
	}
	return nil
}

func (k *TLSKeys) readFile(f *keylogFile, final bool) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("tls key log: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("tls key log: %w", err)
	}
	if st.Size() < f.off {
		f.off = 0
	}
	if _, err := fh.Seek(f.off, io.SeekStart); err != nil {
		return fmt.Errorf("tls key log: %w", err)
	}
	b, err := io.ReadAll(fh)
	if err != nil {
		return fmt.Errorf("tls key log %s: %w", f.path, err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	if final {
		end = len(b)
	}
	for _, line := range bytes.Split(b[:end], []byte{'\n'}) {
		k.parseLine(line)
	}
	f.off += int64(end)
	return nil
}

// parseLine records one key log line's secret.
func (k *TLSKeys) parseLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] == '#' {
		return
	}
	fields := bytes.Fields(line)
	if len(fields) != 3 {
		k.malformed++
		return
	}
	switch string(fields[0]) {
	case "CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
		"CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0":
	case "RSA", "CLIENT_EARLY_TRAFFIC_SECRET", "EARLY_EXPORTER_SECRET", "EXPORTER_SECRET":
		return // not needed: RSA pre-master secrets, early data, exporters
	default:
		k.malformed++
		return
	}
	var random [32]byte
	secret := make([]byte, hex.DecodedLen(len(fields[2])))
	if len(fields[1]) != 2*len(random) {
		k.malformed++
		return
	}
	_, err1 := hex.Decode(random[:], fields[1])
	m, err2 := hex.Decode(secret, fields[2])
	if err1 != nil || err2 != nil || m == 0 {
		k.malformed++
		return
	}
	s := k.secrets[random]
	if s == nil {
		s = &tlsSecrets{}
	}
	ok := true
	switch string(fields[0]) {
	case "CLIENT_RANDOM":
		s.master, ok = secret, m == 48 // RFC 5246 §8.1: always 48 bytes
	case "CLIENT_HANDSHAKE_TRAFFIC_SECRET":
		s.clientHS = secret
	case "SERVER_HANDSHAKE_TRAFFIC_SECRET":
		s.serverHS = secret
	case "CLIENT_TRAFFIC_SECRET_0":
		s.clientApp = secret
	case "SERVER_TRAFFIC_SECRET_0":
		s.serverApp = secret
	}
	if !ok {
		k.malformed++
		return
	}
	k.secrets[random] = s
}
