package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kwire/kwire/capture"
)

// tlsKeylogUsage is --tls-keylog's help.
const tlsKeylogUsage = "decrypt TLS connections with the session secrets in this `FILE`, an NSS key log (SSLKEYLOGFILE format, " +
	"as Go's tls.Config.KeyLogWriter and OpenSSL's keylog callback write it; JVM clients need a Java agent to write one); " +
	"repeat for more files. TLS 1.2 (ECDHE, RSA, DHE with AES-GCM or ChaCha20-Poly1305) and TLS 1.3 are decrypted and " +
	"decoded as if in the clear; connections without secrets are reported as TLS and counted (stats: tls_no_keys). " +
	"kwire live re-reads the file as clients append to it. Key material is never printed"

// fileList is a repeatable flag of file names.
type fileList []string

func (f *fileList) String() string { return strings.Join(*f, ",") }

// Set adds a file.
func (f *fileList) Set(s string) error {
	*f = append(*f, s)
	return nil
}

// entry returns the Sink a run's chunks enter the pipeline by: the
// decoder, behind a TLS decrypter when --tls-keylog is given. follow
// (kwire live) re-reads the key logs as they grow. Warnings about the key
// logs go to stderr; they never quote a line.
func (p *pipeline) entry(cf *commonFlags, follow bool, stderr io.Writer) (capture.Sink, error) {
	if len(cf.tlsKeylog) == 0 {
		return p.dec, nil
	}
	keys, err := capture.LoadTLSKeys(cf.tlsKeylog, follow)
	if err != nil {
		return nil, fmt.Errorf("--tls-keylog: %w", err)
	}
	if n := keys.Malformed(); n > 0 {
		fmt.Fprintf(stderr, "kwire: warning: --tls-keylog: %d line(s) are not NSS key log lines (LABEL <client random hex> <secret hex>): ignored\n", n)
	}
	if keys.Sessions() == 0 && !follow {
		fmt.Fprintf(stderr, "kwire: warning: --tls-keylog: no session secrets in %s: TLS connections will not be decrypted\n", cf.tlsKeylog.String())
	}
	p.tls = capture.DecryptTLS(p.dec, keys)
	return p.tls, nil
}

// captureStats adds the TLS decrypter's counters to a source's.
func (p *pipeline) captureStats(cs capture.Stats) capture.Stats {
	if p.tls != nil {
		cs.TLSStats = p.tls.Stats()
	}
	return cs
}
