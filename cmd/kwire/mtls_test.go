package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// pki is a test CA, certificates signed by it and the files they are in.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	// caFile is the CA's certificate (PEM).
	caFile string
}

// newPKI makes a CA named name, writing its certificate to dir.
func newPKI(t *testing.T, dir, name string) *pki {
	t.Helper()
	p := &pki{dir: dir}
	p.cert, p.key = p.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	p.caFile = p.write(t, name+"-ca.pem", "CERTIFICATE", p.cert.Raw)
	return p
}

// sign makes a key and a certificate of tmpl signed by p (self-signed
// when p has no CA yet).
func (p *pki) sign(t *testing.T, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	parent, parentKey := p.cert, p.key
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// client makes a client certificate named name and returns its files.
func (p *pki) client(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	cert, key := p.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", "CERTIFICATE", cert.Raw), p.write(t, name+"-key.pem", "EC PRIVATE KEY", der)
}

// server is the TLS configuration of a broker at 127.0.0.1 that requires
// client certificates signed by p.
func (p *pki) server(t *testing.T) *tls.Config {
	t.Helper()
	cert, key := p.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "broker"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
}

// TestMutualTLS: agents (--publish) and the aggregator (--from) talk to a
// broker that requires client certificates (kfake with a TLS listener):
// with the CA and a client certificate it trusts, the aggregator tells
// what analyze tells of the agents' captures; without them, or with a
// CA or a client certificate of another PKI, both stop at start-up, at
// once, saying what failed and which flag fixes it.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newPKI(t, dir, "kafka"), newPKI(t, dir, "other")
	cert, key := ca.client(t, "agent")
	otherCert, otherKey := other.client(t, "stranger")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire"), kfake.TLS(ca.server(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := strings.Join(c.ListenAddrs(), ",")
	url := "kafka://" + brokers + "/kwire"

	right := tlsFlags{caFile: ca.caFile, certFile: cert, keyFile: key}
	t.Run("right certificates", func(t *testing.T) {
		pf := &publishFlags{kafka: kafkaFlags{url: url, tlsFiles: right}}
		if err := pf.check(context.Background()); err != nil {
			t.Fatalf("kwire live --publish's start-up check: %v", err)
		}
		files, _ := filepath.Glob(filepath.Join(testdataDir(), "g_xbroker.b?.pcapng"))
		var specs []agentSpec
		for i, f := range files {
			specs = append(specs, agentSpec{host: fmt.Sprintf("b%d", i), files: []string{f}, tls: &right})
		}
		publishAgents(t, url, specs)
		want, _ := normalize(t, runKwire(t, append([]string{"analyze", "--json"}, files...)...))
		got, agg := normalize(t, runKwire(t, "aggregate", "--json", "--from", url, "--exit-idle", "1s",
			"--tls-ca-file", ca.caFile, "--tls-cert-file", cert, "--tls-key-file", key))
		compareLines(t, want, got)
		if agg == nil || len(agg.Agents) != len(files) {
			t.Errorf("aggregate line %+v: want %d agents", agg, len(files))
		}
	})

	for _, tc := range []struct {
		name  string
		flags []string // without the prefix: tls, tls-ca-file...
		want  string
	}{
		{"plaintext", nil, "refused a plaintext connection: broker closed the connection immediately"},
		{"plaintext/what to do", nil, "the broker speaks TLS on that port: add --PREFIXtls"},
		{"system roots", []string{"tls"}, "not signed by a CA kwire trusts: give the CA that signed it with --PREFIXtls-ca-file"},
		{"wrong CA", []string{"tls-ca-file", other.caFile, "tls-cert-file", cert, "tls-key-file", key},
			"not signed by a CA kwire trusts: give the CA that signed it with --PREFIXtls-ca-file"},
		{"no client certificate", []string{"tls-ca-file", ca.caFile},
			"the broker requires a client certificate (mutual TLS): give it with --PREFIXtls-cert-file and --PREFIXtls-key-file"},
		{"client certificate of another CA", []string{"tls-ca-file", ca.caFile, "tls-cert-file", otherCert, "tls-key-file", otherKey},
			"the broker refused kwire's client certificate: give one signed by a CA the brokers trust"},
		{"key without certificate", []string{"tls-ca-file", ca.caFile, "tls-key-file", key},
			"--PREFIXtls-cert-file and --PREFIXtls-key-file go together"},
		{"not a CA file", []string{"tls-ca-file", key}, "--PREFIXtls-ca-file " + key + ": no PEM certificate in it"},
	} {
		for _, cmd := range []struct{ prefix, flag string }{{"publish-", "--publish"}, {"", "--from"}} {
			t.Run(tc.name+"/"+strings.TrimPrefix(cmd.flag, "--"), func(t *testing.T) {
				args := []string{"aggregate", "--from", url, "--duration", "5s"}
				if cmd.flag == "--publish" {
					// Port 1: nothing to capture, were the check to let it start.
					args = []string{"live", "-i", "lo", "--port", "1", "--duration", "5s", "--publish", url}
				}
				for _, f := range tc.flags {
					if !strings.Contains(f, "/") {
						f = "--" + cmd.prefix + f
					}
					args = append(args, f)
				}
				var stdout, stderr bytes.Buffer
				start := time.Now()
				if code := run(args, &stdout, &stderr); code != 1 {
					t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
				}
				if took := time.Since(start); took >= topicCheckTimeout {
					t.Errorf("took %v: want the failure said at once, not after the check's %v", took, topicCheckTimeout)
				}
				want := strings.ReplaceAll(tc.want, "--PREFIX", "--"+cmd.prefix)
				if got := stderr.String(); !strings.HasPrefix(got, "kwire: "+cmd.flag+": ") || !strings.Contains(got, want) {
					t.Errorf("stderr: want \"kwire: %s: ...%s...\", got:\n%s", cmd.flag, want, got)
				}
				if stdout.Len() > 0 {
					t.Errorf("stdout: %.300s, want nothing (the check comes before the capture)", stdout.String())
				}
			})
		}
	}
}
