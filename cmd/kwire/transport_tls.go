package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tlsFlags are the TLS settings of the Kafka cluster kwire publishes to
// or aggregates from: the CA that signed the brokers' certificates
// (system roots without it) and the client certificate and key of
// mutual TLS. Any of them turns TLS on.
type tlsFlags struct {
	caFile, certFile, keyFile string
}

func (t *tlsFlags) register(fs *flag.FlagSet, prefix string) {
	fs.StringVar(&t.caFile, prefix+"tls-ca-file", "", "trust the brokers' certificates signed by the CA certificates in `FILE` (PEM) instead of the system roots; implies --"+prefix+"tls")
	fs.StringVar(&t.certFile, prefix+"tls-cert-file", "", "for mutual TLS, present the client certificate (chain) in `FILE` (PEM), with --"+prefix+"tls-key-file; implies --"+prefix+"tls")
	fs.StringVar(&t.keyFile, prefix+"tls-key-file", "", "the client certificate's private key, in `FILE` (PEM; readable by kwire's user only)")
}

// set says whether any of the flags is given.
func (t *tlsFlags) set() bool { return t.caFile != "" || t.certFile != "" || t.keyFile != "" }

// tlsConfig is the client TLS configuration of k's cluster: nil without
// TLS. Its errors name the flag and the file, never the key's bytes.
func (k *kafkaFlags) tlsConfig() (*tls.Config, error) {
	if !k.tls && !k.tlsFiles.set() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := k.tlsFiles.caFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--%stls-ca-file: %w", k.prefix, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--%stls-ca-file %s: no PEM certificate in it (want -----BEGIN CERTIFICATE-----)", k.prefix, f)
		}
	}
	cert, key := k.tlsFiles.certFile, k.tlsFiles.keyFile
	switch {
	case (cert == "") != (key == ""):
		return nil, fmt.Errorf("--%stls-cert-file and --%stls-key-file go together: give both for mutual TLS", k.prefix, k.prefix)
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("--%stls-cert-file %s, --%stls-key-file %s: %w", k.prefix, cert, k.prefix, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// dialTimeout is kgo's default: how long a connection may take to open.
const dialTimeout = 10 * time.Second

// dialer returns how kwire's clients connect to a broker: TCP, then a TLS
// handshake with cfg when it is set (the server name is the broker's host,
// as kgo.DialTLSConfig does); own, when set, records every connection
// (kwire live leaves its own connections out of the capture).
func dialer(cfg *tls.Config, own *ownConns) func(ctx context.Context, network, host string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if cfg == nil {
			conn, err = nd.DialContext(ctx, network, host)
		} else {
			c := cfg.Clone()
			if c.ServerName == "" {
				if c.ServerName, _, err = net.SplitHostPort(host); err != nil {
					return nil, fmt.Errorf("unable to split host:port for dialing: %w", err)
				}
			}
			conn, err = (&tls.Dialer{NetDialer: nd, Config: c}).DialContext(ctx, network, host)
		}
		if err != nil || own == nil {
			return conn, err
		}
		return own.add(conn), nil
	}
}

// tlsFailure says what to do about err when it is a TLS failure with the
// cluster (a certificate refused either way, a handshake refused), and ""
// otherwise.
func (k *kafkaFlags) tlsFailure(err error) string {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		alert      tls.AlertError
		remote     *net.OpError
		recordHdr  tls.RecordHeaderError
		firstEOF   *kgo.ErrFirstReadEOF
		caFlag     = "--" + k.prefix + "tls-ca-file"
		clientFlag = "--" + k.prefix + "tls-cert-file and --" + k.prefix + "tls-key-file"
	)
	switch {
	case errors.As(err, &unknownCA):
		return "the brokers' certificate is not signed by a CA kwire trusts: give the CA that signed it with " + caFlag
	case errors.As(err, &hostname):
		return "the brokers' certificate is not for the address kwire connects to: use a host name in the URL that the certificate names"
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "the brokers' certificate is not valid (expired, or not for a server?): check it, and " + caFlag
	case errors.As(err, &recordHdr):
		return "the broker does not speak TLS on that port: leave out --" + k.prefix + "tls (and its files), or use the brokers' TLS listener"
	case errors.As(err, &alert), errors.As(err, &remote) && strings.Contains(remote.Error(), "remote error: tls:"):
		// The broker refused the handshake: with TLS 1.3 the client
		// learns it only at its first read, as an alert.
		msg := err.Error()
		switch {
		case !strings.Contains(msg, "certificate required") && !strings.Contains(msg, "certificate unknown") &&
			!strings.Contains(msg, "bad certificate") && !strings.Contains(msg, "unknown certificate authority"):
			return "the broker refused the TLS handshake: check " + caFlag + ", " + clientFlag + " against the brokers' TLS settings"
		case k.tlsFiles.certFile == "":
			return "the broker requires a client certificate (mutual TLS): give it with " + clientFlag
		}
		// Go's client sends no certificate at all when the broker
		// names the CAs it trusts and kwire's is not signed by one.
		return "the broker refused kwire's client certificate: give one signed by a CA the brokers trust (their ssl.truststore), with " + clientFlag
	case errors.As(err, &firstEOF) && !k.tls && !k.tlsFiles.set():
		return "the broker speaks TLS on that port: add --" + k.prefix + "tls (with --" + k.prefix + "tls-ca-file for a private CA)"
	}
	return ""
}
