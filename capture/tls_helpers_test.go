package capture

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// tlsWrite is one Write a TLS endpoint made: the bytes a capture sees.
type tlsWrite struct {
	dir  Dir
	data []byte
}

// tlsTranscript is a real crypto/tls session: what each side wrote on
// the wire, the plaintext each side sent, and the NSS key log the client
// wrote.
type tlsTranscript struct {
	writes []tlsWrite
	plain  [2][]byte // by Dir: the application bytes sent
	keylog []byte
}

// recConn records every Write, in order across both ends.
type recConn struct {
	net.Conn
	dir Dir
	mu  *sync.Mutex
	out *[]tlsWrite
}

func (c *recConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	*c.out = append(*c.out, tlsWrite{c.dir, append([]byte(nil), p...)})
	c.mu.Unlock()
	return c.Conn.Write(p)
}

var (
	testCertOnce sync.Once
	testCert     tls.Certificate
)

// selfSigned returns an ECDSA P-256 certificate made for the tests.
func selfSigned(t testing.TB) tls.Certificate {
	testCertOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwire-test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"kwire-test"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		testCert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	return testCert
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cp, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return cp, sp
}

// tlsSession runs a TLS session over loopback TCP: the client sends
// each of sizes as one Write (bytes unique to it) and the server answers
// each with a reply of half its size. cfg sets the client's versions and
// suites.
func tlsSession(t testing.TB, cfg *tls.Config, sizes []int) *tlsTranscript {
	t.Helper()
	var tr tlsTranscript
	var mu sync.Mutex
	cp, sp := tcpPair(t)
	var keylog bytes.Buffer
	ccfg := cfg.Clone()
	ccfg.InsecureSkipVerify, ccfg.KeyLogWriter = true, &keylog
	scfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MaxVersion: cfg.MaxVersion, CipherSuites: cfg.CipherSuites}
	cli := tls.Client(&recConn{cp, ToServer, &mu, &tr.writes}, ccfg)
	srv := tls.Server(&recConn{sp, ToClient, &mu, &tr.writes}, scfg)
	errc := make(chan error, 1)
	go func() {
		defer srv.Close()
		for _, n := range sizes {
			req := make([]byte, n)
			if _, err := io.ReadFull(srv, req); err != nil {
				errc <- err
				return
			}
			if _, err := srv.Write(req[:n/2]); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, n := range sizes {
		msg := make([]byte, n)
		for j := range msg {
			msg[j] = byte(j*7 + i*13 + j/251)
		}
		copy(msg, fmt.Sprintf("msg %d;", i))
		tr.plain[ToServer] = append(tr.plain[ToServer], msg...)
		tr.plain[ToClient] = append(tr.plain[ToClient], msg[:n/2]...)
		if _, err := cli.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(cli, make([]byte, n/2)); err != nil {
			t.Fatal(err)
		}
	}
	io.Copy(io.Discard, cli) // up to the server's close_notify
	cli.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	tr.keylog = keylog.Bytes()
	return &tr
}

// keysFrom loads a key log held in memory.
func keysFrom(t testing.TB, keylog []byte) *TLSKeys {
	t.Helper()
	k, _ := keyLogFile(t, keylog, false)
	return k
}

// followedKeys writes keylog to a file and follows it, as kwire live does,
// on a clock that reads *now: the caller moves it, and writes the file
// (path) again to make it grow.
func followedKeys(t testing.TB, keylog []byte, now *time.Time) (k *TLSKeys, path string) {
	t.Helper()
	k, path = keyLogFile(t, keylog, true)
	*now = time.Unix(1700000000, 0)
	k.now = func() time.Time { return *now }
	return k, path
}

// keyLogFile writes keylog to a file and loads it.
func keyLogFile(t testing.TB, keylog []byte, follow bool) (*TLSKeys, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keylog")
	if err := os.WriteFile(path, keylog, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadTLSKeys([]string{path}, follow)
	if err != nil {
		t.Fatal(err)
	}
	return k, path
}

// tlsRecorder collects what a TLSDecrypter passes on.
type tlsRecorder struct {
	data   [2][]byte
	chunks [2][][]byte // each Data chunk
	gaps   [2][]int
	closes int
}

func (r *tlsRecorder) Chunk(c *Chunk) {
	switch c.Kind {
	case Data:
		r.data[c.Dir] = append(r.data[c.Dir], c.Data...)
		r.chunks[c.Dir] = append(r.chunks[c.Dir], append([]byte(nil), c.Data...))
	case Gap:
		r.gaps[c.Dir] = append(r.gaps[c.Dir], c.Len)
	case Close:
		r.closes++
	}
}

// feedTranscript gives a session's writes to d as the chunks of one
// connection, then closes both directions.
func feedTranscript(d Sink, writes []tlsWrite) {
	conn := &Conn{ID: 1, Role: RolePort, Handshake: true}
	t0 := time.Unix(1700000000, 0)
	for i, w := range writes {
		d.Chunk(&Chunk{Conn: conn, Dir: w.dir, Kind: Data, Time: t0.Add(time.Duration(i) * time.Millisecond), Data: w.data})
	}
	d.Chunk(&Chunk{Conn: conn, Dir: ToServer, Kind: Close, Time: t0.Add(time.Hour), Reason: CloseFIN})
	d.Chunk(&Chunk{Conn: conn, Dir: ToClient, Kind: Close, Time: t0.Add(time.Hour), Reason: CloseFIN})
}
