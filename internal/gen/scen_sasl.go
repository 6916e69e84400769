package gen

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASLPasswords are the passwords the sasl scenario's clients authenticate
// with. Tests grep every kwire output format for them: they must never
// appear (nor may anything else from the authentication bytes).
var SASLPasswords = []string{"kw-plain-Secr3t-pw", "kw-scram-Secr3t-pw", "kw-sarama-Secr3t-pw"}

func init() { Register(saslScenario) }

var saslScenario = Scenario{
	Name: "sasl",
	Doc: "kfake with SASL: a kgo producer authenticates with PLAIN, a kgo consumer group with SCRAM-SHA-256, " +
		"a sarama producer with PLAIN (SaslHandshake v1 + SaslAuthenticate); passwords in gen.SASLPasswords",
	Options: Options{
		Link: LinkEthernet,
		Kfake: []kfake.Opt{kfake.EnableSASL(), kfake.SeedTopics(2, "s-topic"),
			kfake.Superuser("PLAIN", "kw-plain", SASLPasswords[0]),
			kfake.Superuser("SCRAM-SHA-256", "kw-scram", SASLPasswords[1]),
			kfake.Superuser("PLAIN", "kw-sarama", SASLPasswords[2]),
		},
	},
	Run: runSASL,
}

func runSASL(ctx context.Context, c *Cluster) error {
	const n = 200
	prod, err := c.Kgo(kgo.ClientID("sasl-plain-producer"),
		kgo.SASL(plain.Auth{User: "kw-plain", Pass: SASLPasswords[0]}.AsMechanism()))
	if err != nil {
		return err
	}
	err = produce(ctx, prod, "s-topic", 0, n, 100, 50)
	prod.Close()
	if err != nil {
		return fmt.Errorf("plain producer: %w", err)
	}

	cons, err := c.Kgo(kgo.ClientID("sasl-scram-consumer"), kgo.ConsumerGroup("sasl-group"), kgo.ConsumeTopics("s-topic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SASL(scram.Auth{User: "kw-scram", Pass: SASLPasswords[1]}.AsSha256Mechanism()))
	if err != nil {
		return err
	}
	got := 0
	for got < n {
		if err := ctx.Err(); err != nil {
			cons.Close()
			return fmt.Errorf("scram consumer: %d of %d records: %w", got, n, err)
		}
		fs := cons.PollFetches(ctx)
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		cons.Close()
		return fmt.Errorf("scram consumer commit: %w", err)
	}
	cons.Close()

	cfg := c.Sarama("sasl-sarama-producer")
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "kw-sarama", SASLPasswords[2]
	cfg.Net.SASL.Handshake = true
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	if err != nil {
		return fmt.Errorf("sarama producer: %w", err)
	}
	defer p.Close()
	for i := 0; i < 20; i++ {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "s-topic", Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}); err != nil {
			return fmt.Errorf("sarama send: %w", err)
		}
	}
	return nil
}
