package gen

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

var compressScenario = Scenario{
	Name: "compress",
	Doc: "four kgo producers (gzip, snappy, lz4, zstd; one topic each: c-gzip...), a sarama producer with acks=1 " +
		"(c-sarama, no compression) and a kgo producer with acks=0 (c-noack) each write 400 records of 300 bytes; " +
		"a group-less kgo consumer reads all six topics back from the start",
	Options: Options{
		Link:  LinkSLL2,
		MSS:   EthernetMSS,
		Kfake: []kfake.Opt{kfake.SeedTopics(3, compressTopics...)},
	},
	Run: runCompress,
}

var compressTopics = []string{"c-gzip", "c-snappy", "c-lz4", "c-zstd", "c-sarama", "c-noack"}

func runCompress(ctx context.Context, c *Cluster) error {
	const n, size = 400, 300
	codecs := []struct {
		topic string
		codec kgo.CompressionCodec
	}{
		{"c-gzip", kgo.GzipCompression()},
		{"c-snappy", kgo.SnappyCompression()},
		{"c-lz4", kgo.Lz4Compression()},
		{"c-zstd", kgo.ZstdCompression()},
	}
	for _, cc := range codecs {
		cl, err := c.Kgo(kgo.ClientID("producer-"+cc.topic), kgo.ProducerBatchCompression(cc.codec))
		if err != nil {
			return err
		}
		err = produce(ctx, cl, cc.topic, 0, n, size, 100)
		cl.Close()
		if err != nil {
			return err
		}
	}

	noack, err := c.Kgo(kgo.ClientID("producer-noack"), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	err = produce(ctx, noack, "c-noack", 0, n, size, 100)
	noack.Close()
	if err != nil {
		return err
	}

	if err := saramaProduce(c, "c-sarama", n, size); err != nil {
		return err
	}
	if err := consumeAll(ctx, c, "compress-reader", n*len(compressTopics), nil, compressTopics...); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, compressTopics...)
}

// saramaProduce writes n records to topic with a sarama sync producer,
// acks=1 (leader only), in batches of 50.
func saramaProduce(c *Cluster, topic string, n, size int) error {
	cfg := c.Sarama("sarama-producer")
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	if err != nil {
		return fmt.Errorf("sarama producer: %w", err)
	}
	defer p.Close()
	for i := 0; i < n; i += 50 {
		var msgs []*sarama.ProducerMessage
		for j := i; j < min(i+50, n); j++ {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic: topic,
				Key:   sarama.StringEncoder(fmt.Sprintf("k%d", j)),
				Value: sarama.ByteEncoder(value(j, size)),
			})
		}
		if err := p.SendMessages(msgs); err != nil {
			return fmt.Errorf("sarama produce to %s: %w", topic, err)
		}
		for _, m := range msgs {
			c.AddProduced(m.Topic, m.Partition, 1)
		}
	}
	return nil
}
