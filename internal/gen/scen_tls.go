package gen

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The TLS scenarios are explicit (kwire-gen makes them with -only, into
// testdata/tls): their captures hold ciphertext, which the tests of the
// clear-text captures in testdata/ must not pick up.
func init() {
	Register(tlsScenario("tls13", "TLS 1.3 (the suite Go picks)", tls.VersionTLS13, 0, 0))
	Register(tlsScenario("tls12", "TLS 1.2: the producer and truth clients with ECDHE-ECDSA-AES128-GCM-SHA256, "+
		"the members with ECDHE-ECDSA-CHACHA20-POLY1305", tls.VersionTLS12,
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256))
}

// keyLog is the NSS key log every client of a scenario writes to
// (tls.Config.KeyLogWriter), written next to the capture as <case>.keylog.
type keyLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (k *keyLog) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.buf.Write(p)
}

func (k *keyLog) bytes() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return bytes.Clone(k.buf.Bytes())
}

// tlsScenario is a kfake cluster listening with TLS (version max, a
// self-signed ECDSA certificate made for the run), a kgo producer and a
// kgo consumer group of two members, every client writing the key log.
// suite, if set, is the producer's and truth clients' TLS 1.2 suite;
// memberSuite the members'.
func tlsScenario(name, what string, max, suite, memberSuite uint16) Scenario {
	srv, cli, err := tlsConfigs(max)
	if err != nil {
		panic("gen: " + err.Error())
	}
	kl := &keyLog{}
	cli.KeyLogWriter = kl
	withSuite := func(s uint16) *tls.Config {
		c := cli.Clone()
		if s != 0 {
			c.CipherSuites = []uint16{s}
		}
		return c
	}
	topic, group := name+"-orders", name+"-group"
	return Scenario{
		Name: name,
		Doc: "kfake listening with " + what + ", a self-signed ECDSA certificate: a kgo producer writes 20 records every " +
			"100ms to " + topic + " (3 partitions) while " + group + " grows to 2 kgo members, each committing after every " +
			"poll; then they leave one at a time. Every client writes the NSS key log " + name + ".keylog",
		Explicit: true,
		Options: Options{Link: LinkEthernet, Encrypted: true,
			Kfake:      []kfake.Opt{kfake.TLS(srv), kfake.SeedTopics(3, topic)},
			ClientOpts: []kgo.Opt{kgo.DialTLSConfig(withSuite(suite))},
		},
		Run: func(ctx context.Context, c *Cluster) error {
			c.AddFile(".keylog", kl.bytes)
			return runTLS(ctx, c, topic, group, kgo.DialTLSConfig(withSuite(memberSuite)))
		},
	}
}

// tlsConfigs returns a server config with a new self-signed certificate
// for 127.0.0.1 and a client config that trusts it, both at most max.
func tlsConfigs(max uint16) (srv, cli *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwire-gen"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MaxVersion: max}
	return srv, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, MaxVersion: max}, nil
}

// runTLS: a producer while the group grows to two members, then the
// members leave one at a time; the truth records the group and offsets.
func runTLS(ctx context.Context, c *Cluster, topic, group string, memberTLS kgo.Opt) error {
	const parts = 3
	prod, err := startProducer(ctx, c, "tls-producer", topic, 20, 60, 100*time.Millisecond)
	if err != nil {
		return err
	}
	var members []*tlsMember
	defer func() {
		for _, m := range members {
			m.leave()
		}
	}()
	for i := range 2 {
		// The generator's probe records each generation's plan and
		// assignments, as for the clear-text group scenarios, so that
		// the decrypted capture is checked against them.
		id := fmt.Sprintf("tls-member-%d", i+1)
		p := newProbe(group, id, "", c.groups.add)
		cl, err := c.Kgo(memberTLS, kgo.ClientID(id), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(250*time.Millisecond), kgo.WithHooks(p, tlsJoins{p}), kgo.Balancers(p.balancers(kgo.CooperativeStickyBalancer())...))
		if err != nil {
			return err
		}
		p.cl.Store(cl)
		members = append(members, startTLSMember(ctx, cl))
		if _, err := c.waitStable(ctx, group, i+1, parts); err != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
	}
	if err := prod.halt(); err != nil {
		return err
	}
	if err := c.waitCaughtUp(ctx, group, topic); err != nil {
		return err
	}
	for i := len(members) - 1; i >= 0; i-- {
		id, _ := members[i].cl.GroupMetadata()
		c.groups.script(group, CauseMemberLeft, id, time.Now())
		members[i].leave()
		if i > 0 {
			if _, err := c.waitStable(ctx, group, i, parts); err != nil {
				return err
			}
		}
	}
	members = nil
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

// tlsMember is an in-process group member that commits after every poll.
type tlsMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startTLSMember(ctx context.Context, cl *kgo.Client) *tlsMember {
	ctx, cancel := context.WithCancel(ctx)
	m := &tlsMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if fs := cl.PollFetches(ctx); fs.NumRecords() > 0 {
				_ = cl.CommitUncommittedOffsets(ctx)
			}
		}
	}()
	return m
}

// leave stops polling and closes the client (LeaveGroup).
func (m *tlsMember) leave() {
	m.once.Do(func() {
		m.cancel()
		<-m.done
		m.cl.Close()
	})
}

// tlsJoins reports a member's JoinGroup writes to the groups truth, with
// its member id: over TLS the generator's tap cannot read them
// (recordJoins), and the truth names who started each rebalance from
// them. The client's clock, not the broker's read: fine for one member
// rejoining at a time, as here.
type tlsJoins struct{ p *probe }

func (h tlsJoins) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	cl := h.p.cl.Load()
	if key != int16(kmsg.JoinGroup) || err != nil || cl == nil {
		return
	}
	if id, _ := cl.GroupMetadata(); id != "" {
		h.p.report(groupReport{Kind: "join", MemberID: id})
	}
}
