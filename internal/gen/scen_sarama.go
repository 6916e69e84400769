package gen

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

var saramaScenario = Scenario{
	Name: "sarama",
	Doc: "kfake capped at Kafka 2.8 versions; a sarama consumer group sarama-group grows to 2 members one at a " +
		"time (range assignor) on payments (4 partitions) while a sarama sync producer (acks=all) writes 600 " +
		"records; members commit after each drained claim, then close one at a time (LeaveGroup)",
	Options: Options{
		Link:        LinkNull,
		MaxVersions: kversion.V2_8_0(),
		Kfake:       []kfake.Opt{kfake.SeedTopics(4, "payments")},
	},
	Run: runSarama,
}

// saramaMember is one sarama consumer group member and its Consume loop.
type saramaMember struct {
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
	h      *saramaHandler
}

type saramaHandler struct {
	prog     *progress
	once     sync.Once
	assigned chan struct{}
}

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	if len(s.Claims()) > 0 {
		h.once.Do(func() { close(h.assigned) })
	}
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim marks every message and commits synchronously whenever the
// claim is drained; only then are the messages counted.
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	var pending []*sarama.ConsumerMessage
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(msg, "")
			pending = append(pending, msg)
			if len(claim.Messages()) == 0 {
				s.Commit()
				for _, m := range pending {
					h.prog.add(m.Topic, m.Partition, m.Offset)
				}
				pending = pending[:0]
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func startSaramaMember(ctx context.Context, c *Cluster, name, group, topic string, prog *progress) (*saramaMember, error) {
	cfg := c.Sarama(name)
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	g, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama group member %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &saramaMember{group: g, cancel: cancel, done: make(chan struct{}),
		h: &saramaHandler{prog: prog, assigned: make(chan struct{})}}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m.h); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}()
	return m, nil
}

func (m *saramaMember) stop() error {
	m.cancel()
	<-m.done
	return m.group.Close()
}

func runSarama(ctx context.Context, c *Cluster) error {
	const topic, group, n = "payments", "sarama-group", 600
	prog := newProgress(n)
	cfg := c.Sarama("sarama-producer")
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	if err != nil {
		return fmt.Errorf("sarama producer: %w", err)
	}
	defer prod.Close()
	send := func(from, count int) error {
		var msgs []*sarama.ProducerMessage
		for j := from; j < from+count; j++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", j)),
				Value: sarama.ByteEncoder(value(j, 80))})
		}
		if err := prod.SendMessages(msgs); err != nil {
			return fmt.Errorf("sarama produce: %w", err)
		}
		for _, m := range msgs {
			c.AddProduced(m.Topic, m.Partition, 1)
		}
		return nil
	}
	var members []*saramaMember
	for i := range 2 {
		if err := send(i*n/2, n/2); err != nil {
			return err
		}
		m, err := startSaramaMember(ctx, c, fmt.Sprintf("sarama-member-%d", i+1), group, topic, prog)
		if err != nil {
			return err
		}
		members = append(members, m)
		select {
		case <-m.h.assigned:
		case <-ctx.Done():
			return fmt.Errorf("sarama member %d never got partitions: %w", i+1, ctx.Err())
		}
	}
	if err := prog.wait(ctx, "sarama consume"); err != nil {
		return err
	}
	for i := len(members) - 1; i >= 0; i-- {
		if err := members[i].stop(); err != nil {
			return fmt.Errorf("close sarama member: %w", err)
		}
	}
	if err := c.RecordCommitted(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
