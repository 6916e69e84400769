package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kafkaFlags are the flags of the Kafka cluster kwire publishes to
// (--publish-*) or aggregates from: its address and topic, TLS and SASL.
// The password is read from a file or the environment, never a flag
// (it would show in ps), and never printed.
type kafkaFlags struct {
	prefix    string // "publish-" or ""
	envPass   string // the environment variable holding the password
	url       string
	tls       bool
	tlsFiles  tlsFlags // the CA, and the client certificate of mutual TLS (transport_tls.go)
	mechanism string
	user      string
	passFile  string
	// own, when set, records the connections kwire opens to that
	// cluster (kwire live --publish: left out of the capture).
	own *ownConns
}

func (k *kafkaFlags) register(fs *flag.FlagSet, urlFlag, urlHelp string) {
	fs.StringVar(&k.url, urlFlag, "", urlHelp)
	fs.BoolVar(&k.tls, k.prefix+"tls", false, "connect to that Kafka cluster over TLS (system roots, or --"+k.prefix+"tls-ca-file)")
	k.tlsFiles.register(fs, k.prefix)
	fs.StringVar(&k.mechanism, k.prefix+"sasl-mechanism", "", "SASL `MECHANISM` for that cluster: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&k.user, k.prefix+"user", "", "SASL user name")
	fs.StringVar(&k.passFile, k.prefix+"password-file", "", "read the SASL password from `FILE` (else from $"+k.envPass+")")
}

// parseKafkaURL splits kafka://HOST:PORT[,HOST:PORT...]/TOPIC. Its
// errors show the URL without any user:password@ part (redactURL).
func parseKafkaURL(s string) (brokers []string, topic string, err error) {
	rest, ok := strings.CutPrefix(s, "kafka://")
	if !ok {
		return nil, "", fmt.Errorf("%q: want kafka://HOST:PORT[,HOST:PORT...]/TOPIC", redactURL(s))
	}
	hosts, topic, ok := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		// A password in a flag shows in ps and in shell histories, and
		// the URL is echoed in messages: credentials have flags and a
		// file or variable of their own.
		return nil, "", fmt.Errorf("%q: %w", redactURL(s), errURLCredentials)
	}
	if !ok || topic == "" || hosts == "" || strings.Contains(topic, "/") {
		return nil, "", fmt.Errorf("%q: want kafka://HOST:PORT[,HOST:PORT...]/TOPIC", redactURL(s))
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, "", fmt.Errorf("%q: empty broker address", redactURL(s))
		}
		brokers = append(brokers, h)
	}
	return brokers, topic, nil
}

// errURLCredentials is parseKafkaURL's error for a URL with a
// user:password@ part.
var errURLCredentials = errors.New("the URL holds credentials (USER:PASSWORD@), which kwire never takes from a URL")

// redactURL is s with everything up to the last '@' of its host part
// (user:password@) replaced by "REDACTED@", for messages.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	} else {
		scheme += "://"
	}
	hosts, path, slash := strings.Cut(rest, "/")
	at := strings.LastIndexByte(hosts, '@')
	if at < 0 {
		return s
	}
	s = scheme + "REDACTED@" + hosts[at+1:]
	if slash {
		s += "/" + path
	}
	return s
}

// options returns the client options for the cluster and the topic.
func (k *kafkaFlags) options() ([]kgo.Opt, string, error) {
	brokers, topic, err := parseKafkaURL(k.url)
	if errors.Is(err, errURLCredentials) {
		return nil, "", fmt.Errorf("%w: give the user with --%suser and the password in --%spassword-file or $%s (with --%ssasl-mechanism)",
			err, k.prefix, k.prefix, k.envPass, k.prefix)
	}
	if err != nil {
		return nil, "", err
	}
	cfg, err := k.tlsConfig()
	if err != nil {
		return nil, "", err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.Dialer(dialer(cfg, k.own))}
	if k.mechanism == "" {
		if k.user != "" || k.passFile != "" {
			return nil, "", fmt.Errorf("--%suser and --%spassword-file need --%ssasl-mechanism", k.prefix, k.prefix, k.prefix)
		}
		return opts, topic, nil
	}
	pass, err := k.password()
	if err != nil {
		return nil, "", err
	}
	switch strings.ToUpper(k.mechanism) {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: k.user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, "", fmt.Errorf("--%ssasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", k.prefix, k.mechanism)
	}
	return opts, topic, nil
}

// password reads the SASL password; errors never contain it.
func (k *kafkaFlags) password() (string, error) {
	if k.user == "" {
		return "", fmt.Errorf("--%ssasl-mechanism needs --%suser", k.prefix, k.prefix)
	}
	b, _, err := readSecret(k.prefix+"password-file", k.passFile, k.envPass)
	switch {
	case err != nil:
		return "", err
	case b == nil:
		return "", errors.New("no SASL password: give --" + k.prefix + "password-file or set $" + k.envPass)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// readSecret reads a secret (a password, agents' keys) from file, named by
// flag in errors, or else from the environment variable env: never from a
// flag's value, which ps shows. Neither: nil. source says where it came
// from ("--flag FILE" or "$ENV"), for messages that must not print it.
func readSecret(flag, file, env string) (text []byte, source string, err error) {
	switch {
	case file != "":
		if text, err = os.ReadFile(file); err != nil {
			return nil, "", fmt.Errorf("--%s: %w", flag, err)
		}
		return text, "--" + flag + " " + file, nil
	case os.Getenv(env) != "":
		return []byte(os.Getenv(env)), "$" + env, nil
	}
	return nil, "", nil
}

// cluster names k's cluster in messages: its seed brokers.
func (k *kafkaFlags) cluster() string {
	brokers, _, _ := parseKafkaURL(k.url)
	return strings.Join(brokers, ",")
}

// errNoTopic is the cluster's answer for a topic that does not exist;
// errNoPartitions for one it gives no partitions of (yet).
var (
	errNoTopic      = errors.New("does not exist")
	errNoPartitions = errors.New("no partitions")
)

// topicCheckTimeout bounds checkTopic: a broker that answers does so in
// milliseconds; a cluster that cannot be reached is reported while the
// user still waits for kwire to start.
const topicCheckTimeout = 10 * time.Second

// checkTopic asks the cluster (its seed brokers named by cluster) through
// cl for topic's metadata, letting the brokers create it when autoCreate
// is set, and returns its partition count (0 when the brokers are still
// creating it). It is asked at start-up because later nobody says it: a
// producer retries an unknown topic until its records time out, a
// consumer waits for the topic in silence. The errors name the topic and
// the cluster; one for a missing topic wraps errNoTopic (the caller says
// how to create it).
func checkTopic(ctx context.Context, cl *kgo.Client, cluster, topic string, autoCreate bool) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	n, err := topicPartitions(ctx, cl, topic, autoCreate)
	var kerrErr *kerr.Error
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return 0, fmt.Errorf("topic %q %w on the Kafka cluster at %s", topic, errNoTopic, cluster)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return 0, fmt.Errorf("topic %q on the Kafka cluster at %s: %w (give this user access to it)", topic, cluster, err)
	case autoCreate && errors.Is(err, errNoPartitions), errors.As(err, &kerrErr) && kerr.IsRetriable(err):
		// LEADER_NOT_AVAILABLE and the like: the topic is there (or
		// being created), and the client retries these by itself.
		return 0, nil
	case errors.As(err, &kerrErr), errors.Is(err, errNoPartitions):
		return 0, fmt.Errorf("topic %q on the Kafka cluster at %s: %w", topic, cluster, err)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return 0, fmt.Errorf("cannot reach the Kafka cluster at %s (asking for topic %q): no answer within %v", cluster, topic, topicCheckTimeout)
	default:
		return 0, fmt.Errorf("cannot reach the Kafka cluster at %s (asking for topic %q): %w", cluster, topic, err)
	}
}

// checkTopic is checkTopic on k's cluster, through a client of its own
// made with opts (k's options). A failed SASL authentication or TLS
// handshake is said to be one, at once, with what to do, instead of
// "cannot reach the Kafka cluster" after topicCheckTimeout.
func (k *kafkaFlags) checkTopic(ctx context.Context, opts []kgo.Opt, topic string, autoCreate bool) error {
	w := &authWatch{failed: make(chan struct{}), tls: k.tlsFailure}
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.DisableClientMetrics(), kgo.WithHooks(w))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.failed:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err = checkTopic(ctx, cl, k.cluster(), topic, autoCreate)
	switch {
	case err == nil:
	case w.tlsFailed() != nil:
		return k.tlsFailed(w.tlsFailed())
	case k.tlsFailure(err) != "":
		return k.tlsFailed(err)
	case w.closed() || errors.Is(err, kerr.SaslAuthenticationFailed):
		return k.authFailed(err, w.closed())
	}
	return err
}

// tlsFailed is the error for a TLS handshake with the cluster that failed
// (or for plaintext that a TLS listener refused).
func (k *kafkaFlags) tlsFailed(err error) error {
	if !k.tls && !k.tlsFiles.set() {
		return fmt.Errorf("the Kafka cluster at %s refused a plaintext connection: %v: %s", k.cluster(), err, k.tlsFailure(err))
	}
	return fmt.Errorf("TLS with the Kafka cluster at %s failed: %v: %s", k.cluster(), err, k.tlsFailure(err))
}

// authFailed is the error for credentials the cluster refused; closed
// says the broker closed the connection instead of answering.
func (k *kafkaFlags) authFailed(err error, closed bool) error {
	why := err.Error()
	if closed {
		why = "the broker closed the connection in answer to the credentials"
	}
	return fmt.Errorf("authentication failed at the Kafka cluster at %s as user %q (SASL %s): %s: check --%suser, the password (--%spassword-file or $%s), --%ssasl-mechanism and --%stls",
		k.cluster(), k.user, strings.ToUpper(k.mechanism), why, k.prefix, k.prefix, k.envPass, k.prefix, k.prefix)
}

// authWatch is a kgo hook that sees a broker refuse the SASL
// credentials by closing the connection while the client reads its
// SASLAuthenticate answer (Kafka before 1.0 does, and kfake; later
// versions answer SASL_AUTHENTICATION_FAILED, which reaches the caller
// as an error), or the TLS handshake fail (a certificate refused either
// way: with TLS 1.3 the client hears the broker's refusal only at its
// first read). kgo takes either for a network failure and retries it
// until the deadline.
type authWatch struct {
	failed chan struct{}
	once   sync.Once
	tls    func(error) string // kafkaFlags.tlsFailure
	tlsErr error              // set before failed is closed
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *authWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch {
	case err == nil:
	case w.tls(err) != "":
		w.once.Do(func() { w.tlsErr = err; close(w.failed) })
	case key == int16(kmsg.SASLAuthenticate):
		w.once.Do(func() { close(w.failed) })
	}
}

// OnBrokerConnect implements kgo.HookBrokerConnect: the handshake is part
// of opening the connection.
func (w *authWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil && w.tls(err) != "" {
		w.once.Do(func() { w.tlsErr = err; close(w.failed) })
	}
}

// closed says whether the hook saw the connection closed in answer to
// the SASL credentials.
func (w *authWatch) closed() bool {
	select {
	case <-w.failed:
		return w.tlsErr == nil
	default:
		return false
	}
}

// tlsFailed is the TLS failure the hook saw, if any.
func (w *authWatch) tlsFailed() error {
	select {
	case <-w.failed: // tlsErr was set before
		return w.tlsErr
	default:
		return nil
	}
}

// warn writes to stderr what is unsafe in k's settings: SASL PLAIN
// without TLS sends the password in the clear.
func (k *kafkaFlags) warn(stderr io.Writer) {
	if strings.EqualFold(k.mechanism, "PLAIN") && !k.tls && !k.tlsFiles.set() {
		fmt.Fprintf(stderr, "kwire: warning: SASL PLAIN without --%stls sends the password in the clear to %s: whoever captures that traffic reads it; add --%stls, or use SCRAM-SHA-512\n",
			k.prefix, k.cluster(), k.prefix)
	}
}

// missingTopicFix adds fix (how to create the topic) to err when the
// topic does not exist.
func missingTopicFix(err error, fix string) error {
	if errors.Is(err, errNoTopic) {
		return fmt.Errorf("%w: %s", err, fix)
	}
	return err
}

// topicPartitions asks the cluster how many partitions topic has,
// letting it create the topic when autoCreate is set (Metadata v4+).
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string, autoCreate bool) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	req.AllowAutoTopicCreation = autoCreate
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 {
		return 0, errNoPartitions
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return 0, err
	}
	if len(resp.Topics[0].Partitions) == 0 {
		return 0, errNoPartitions
	}
	return int32(len(resp.Topics[0].Partitions)), nil
}
