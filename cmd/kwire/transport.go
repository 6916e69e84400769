package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
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
	mechanism string
	user      string
	passFile  string
}

func (k *kafkaFlags) register(fs *flag.FlagSet, urlFlag, urlHelp string) {
	fs.StringVar(&k.url, urlFlag, "", urlHelp)
	fs.BoolVar(&k.tls, k.prefix+"tls", false, "connect to that Kafka cluster over TLS (system roots)")
	fs.StringVar(&k.mechanism, k.prefix+"sasl-mechanism", "", "SASL `MECHANISM` for that cluster: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&k.user, k.prefix+"user", "", "SASL user name")
	fs.StringVar(&k.passFile, k.prefix+"password-file", "", "read the SASL password from `FILE` (else from $"+k.envPass+")")
}

// parseKafkaURL splits kafka://HOST:PORT[,HOST:PORT...]/TOPIC.
func parseKafkaURL(s string) (brokers []string, topic string, err error) {
	rest, ok := strings.CutPrefix(s, "kafka://")
	if !ok {
		return nil, "", fmt.Errorf("%q: want kafka://HOST:PORT[,HOST:PORT...]/TOPIC", s)
	}
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok || topic == "" || hosts == "" || strings.Contains(topic, "/") {
		return nil, "", fmt.Errorf("%q: want kafka://HOST:PORT[,HOST:PORT...]/TOPIC", s)
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, "", fmt.Errorf("%q: empty broker address", s)
		}
		brokers = append(brokers, h)
	}
	return brokers, topic, nil
}

// options returns the client options for the cluster and the topic.
func (k *kafkaFlags) options() ([]kgo.Opt, string, error) {
	brokers, topic, err := parseKafkaURL(k.url)
	if err != nil {
		return nil, "", err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if k.tls {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
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
	if k.passFile != "" {
		b, err := os.ReadFile(k.passFile)
		if err != nil {
			return "", fmt.Errorf("--%spassword-file: %w", k.prefix, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if p := os.Getenv(k.envPass); p != "" {
		return p, nil
	}
	return "", errors.New("no SASL password: give --" + k.prefix + "password-file or set $" + k.envPass)
}
