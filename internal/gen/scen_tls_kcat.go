package gen

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The kcat TLS scenarios cover the TLS 1.3 suites Go's client never
// negotiates against Go's server (it prefers AES-128-GCM): kcat (OpenSSL)
// offers only the one suite, set through an OpenSSL config file
// (OPENSSL_CONF), and Go's server takes it. The key log is the server's:
// its lines carry the same client random and secrets as the client's.
// Every connection is kcat's (the truth is read from kfake, not asked
// through a Go client), so every session of the capture has the suite.
func init() {
	Register(kcatTLSScenario("tls13_aes256", "TLS_AES_256_GCM_SHA384"))
	Register(kcatTLSScenario("tls13_chacha", "TLS_CHACHA20_POLY1305_SHA256"))
}

// kcatRecords is how many records kcat produces, and its group member
// then consumes and commits.
const kcatRecords = 30

func kcatTLSScenario(name, suite string) Scenario {
	srv, _, err := tlsConfigs(tls.VersionTLS13)
	if err != nil {
		panic("gen: " + err.Error())
	}
	kl := &keyLog{}
	srv.KeyLogWriter = kl
	srv.MinVersion = tls.VersionTLS13
	topic, group := name+"-orders", name+"-group"
	return Scenario{
		Name: name,
		Doc: "kfake listening with TLS 1.3, a self-signed ECDSA certificate; kcat (OpenSSL, limited to " + suite +
			" by an OPENSSL_CONF file) produces " + strconv.Itoa(kcatRecords) + " keyed records to " + topic +
			" (3 partitions), then one kcat member of " + group + " consumes them all, commits and leaves. " +
			"kfake's server writes the NSS key log " + name + ".keylog. The truth's commits are kfake's (no Go client connects)",
		Explicit: true,
		Options: Options{Link: LinkEthernet, Encrypted: true,
			Kfake: []kfake.Opt{kfake.TLS(srv), kfake.SeedTopics(3, topic)},
		},
		Run: func(ctx context.Context, c *Cluster) error {
			c.AddFile(".keylog", kl.bytes)
			return runKcatTLS(ctx, c, srv, suite, topic, group)
		},
	}
}

func runKcatTLS(ctx context.Context, c *Cluster, srv *tls.Config, suite, topic, group string) error {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		return fmt.Errorf("kcat not found (apt-get install -y kcat): %w", err)
	}
	dir, err := os.MkdirTemp("", "kwire-gen-kcat")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificates[0].Certificate[0]}), 0o600); err != nil {
		return err
	}
	conf := filepath.Join(dir, "openssl.cnf")
	if err := os.WriteFile(conf, []byte("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"+
		"[ssl_sect]\nsystem_default = system_default_sect\n[system_default_sect]\n"+
		"Ciphersuites = "+suite+"\nMinProtocol = TLSv1.3\n"), 0o600); err != nil {
		return err
	}
	common := []string{"-b", strings.Join(c.Addrs(), ","), "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca,
		"-X", "enable.ssl.certificate.verification=false", "-X", "client.id=kcat-" + suite}
	run := func(stdin []byte, args ...string) error {
		cmd := exec.CommandContext(ctx, kcat, append(args, common...)...)
		cmd.Env = append(os.Environ(), "OPENSSL_CONF="+conf)
		cmd.Stdin = bytes.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kcat %v: %w: %s", args, err, stderr.String())
		}
		return nil
	}
	var in bytes.Buffer
	for i := range kcatRecords {
		fmt.Fprintf(&in, "key-%d:order-%d\n", i, i)
	}
	if err := run(in.Bytes(), "-P", "-K", ":", "-t", topic); err != nil {
		return err
	}
	if err := run(nil, "-G", group, "-c", strconv.Itoa(kcatRecords), "-q", "-X", "auto.offset.reset=earliest", topic); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.waitCaughtUp(cctx, group, topic); err != nil {
		return err
	}
	// The truth from kfake itself: a Go truth client would add sessions
	// with the suite Go picks.
	committed, ends := map[string]int64{}, map[string]int64{}
	gi := c.kf.GroupInfo(group)
	var total int64
	for _, p := range c.kf.PartitionInfos(topic) {
		k := strconv.Itoa(int(p.Partition))
		committed[k], ends[k] = gi.Commits[topic][p.Partition].Offset, p.HighWatermark
		total += p.HighWatermark
	}
	if total != kcatRecords {
		return fmt.Errorf("%d records in %s, kcat produced %d", total, topic, kcatRecords)
	}
	c.mu.Lock()
	c.truth.committed = map[string]map[string]map[string]int64{group: {topic: committed}}
	c.truth.endOffsets = map[string]map[string]int64{topic: ends}
	c.mu.Unlock()
	return nil
}
