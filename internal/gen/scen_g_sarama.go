package gen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

var gSaramaScenario = Scenario{
	Name: "g_sarama",
	Doc: "kfake capped at Kafka 2.8 versions; a sarama sync producer writes records one at a time (one record per " +
		"batch) to gsa-payments (4 partitions) in three rounds; sarama consumer group gsa-group (range) has member " +
		"1, member 2 joins, member 2 leaves gracefully (LeaveGroup), member 1 closes; members commit after each " +
		"drained claim, and every rebalance happens with the group caught up",
	Options: Options{
		Link:        LinkNull,
		MaxVersions: kversion.V2_8_0(),
		Kfake:       []kfake.Opt{kfake.SeedTopics(4, "gsa-payments")},
	},
	Run: runGSarama,
}

// saramaProbe instruments one sarama group member: its strategy keeps
// the plan when it leads, its handler's Setup reports the generation's
// member id and claims (and the plan, naming itself leader), and its
// interceptor counts the messages sarama parsed out of Fetch responses.
type saramaProbe struct {
	group, clientID string
	sink            func(groupReport) // the cluster's recorder, or a child's stdout

	mu       sync.Mutex
	memberID string
	planGen  int32
	plan     groupReport
	once     sync.Once
	assigned chan struct{}
}

func (p *saramaProbe) report(r groupReport) {
	r.Group, r.ClientID = p.group, p.clientID
	p.sink(r)
}

// OnConsume counts one message: with one record per batch and no
// rebalance while messages are buffered, these are exactly the records
// of the Fetch responses sarama read (sarama has no batch hook).
func (p *saramaProbe) OnConsume(m *sarama.ConsumerMessage) {
	p.report(groupReport{Kind: "fetch", Topic: m.Topic, Partition: m.Partition, Records: 1})
}

// recStrategy wraps a sarama BalanceStrategy to keep the leader's plan.
type recStrategy struct {
	sarama.BalanceStrategy
	p *saramaProbe
}

func (s *recStrategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	plan, err := s.BalanceStrategy.Plan(members, topics)
	if err != nil {
		return plan, err
	}
	r := groupReport{Kind: "plan", Protocol: s.Name(), Plan: map[string]map[string][]int32{}, Topics: map[string]int32{},
		Nanos: time.Now().UnixNano()}
	for m := range members {
		r.Plan[m] = normAssignment(plan[m])
	}
	for t, ps := range topics {
		r.Topics[t] = int32(len(ps))
	}
	s.p.mu.Lock()
	s.p.plan, s.p.planGen = r, -1
	s.p.mu.Unlock()
	return plan, nil
}

// AssignmentData is called by the leader for each planned member with
// the generation: it dates the plan.
func (s *recStrategy) AssignmentData(memberID string, topics map[string][]int32, generation int32) ([]byte, error) {
	s.p.mu.Lock()
	s.p.planGen = generation
	s.p.mu.Unlock()
	return s.BalanceStrategy.AssignmentData(memberID, topics, generation)
}

type gSaramaHandler struct{ p *saramaProbe }

func (h *gSaramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	p := h.p
	claims := normAssignment(s.Claims())
	p.mu.Lock()
	p.memberID = s.MemberID()
	plan, gen := p.plan, p.planGen
	p.plan = groupReport{}
	p.mu.Unlock()
	if plan.Kind != "" && gen == s.GenerationID() {
		plan.MemberID, plan.Generation = s.MemberID(), gen
		p.report(plan)
	}
	p.report(groupReport{Kind: "sync", MemberID: s.MemberID(), Generation: s.GenerationID(), Protocol: "range", Assignment: claims})
	p.report(groupReport{Kind: "owned", MemberID: s.MemberID(), Generation: s.GenerationID(), Assignment: maps.Clone(claims)})
	if len(claims) > 0 {
		p.once.Do(func() { close(p.assigned) })
	}
	return nil
}

func (h *gSaramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim marks every message and commits whenever the claim is
// drained.
func (h *gSaramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(msg, "")
			if len(claim.Messages()) == 0 {
				s.Commit()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

type gSaramaMember struct {
	p      *saramaProbe
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func startGSaramaMember(ctx context.Context, c *Cluster, name, group, topic string) (*gSaramaMember, error) {
	p := &saramaProbe{group: group, clientID: name, sink: c.groups.add, assigned: make(chan struct{})}
	cfg := c.Sarama(name)
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{&recStrategy{BalanceStrategy: sarama.NewBalanceStrategyRange(), p: p}}
	cfg.Consumer.Interceptors = []sarama.ConsumerInterceptor{p}
	g, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama group member %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &gSaramaMember{p: p, group: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, &gSaramaHandler{p: p}); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}()
	select {
	case <-p.assigned:
		return m, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("sarama member %s never got partitions: %w", name, ctx.Err())
	}
}

// leave scripts the leave and closes the member (LeaveGroup).
func (m *gSaramaMember) leave(c *Cluster) error {
	m.p.mu.Lock()
	id := m.p.memberID
	m.p.mu.Unlock()
	c.groups.script(m.p.group, CauseMemberLeft, id, time.Now())
	m.cancel()
	<-m.done
	return m.group.Close()
}

func runGSarama(ctx context.Context, c *Cluster) error {
	const topic, group, parts, per = "gsa-payments", "gsa-group", 4, 100
	cfg := c.Sarama("gsa-producer")
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	prod, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	if err != nil {
		return fmt.Errorf("sarama producer: %w", err)
	}
	defer prod.Close()
	next := 0
	round := func() error {
		for range per {
			msg := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", next)), Value: sarama.ByteEncoder(value(next, 60))}
			if _, _, err := prod.SendMessage(msg); err != nil {
				return fmt.Errorf("sarama produce: %w", err)
			}
			c.AddProduced(msg.Topic, msg.Partition, 1)
			next++
		}
		return c.waitCaughtUp(ctx, group, topic)
	}
	m1, err := startGSaramaMember(ctx, c, "gsa-member-1", group, topic)
	if err != nil {
		return err
	}
	if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
		return err
	}
	if err := round(); err != nil {
		return err
	}
	m2, err := startGSaramaMember(ctx, c, "gsa-member-2", group, topic)
	if err != nil {
		return err
	}
	if _, err := c.waitStable(ctx, group, 2, parts); err != nil {
		return err
	}
	if err := round(); err != nil {
		return err
	}
	if err := m2.leave(c); err != nil {
		return fmt.Errorf("close sarama member: %w", err)
	}
	if _, err := c.waitStable(ctx, group, 1, parts); err != nil {
		return err
	}
	if err := round(); err != nil {
		return err
	}
	if err := m1.leave(c); err != nil {
		return fmt.Errorf("close sarama member: %w", err)
	}
	c.Note("g_sarama: groups.gsa-group.fetched counts the messages sarama parsed out of Fetch responses (a consumer " +
		"interceptor; sarama has no batch hook); with one record per batch and every rebalance taken with nothing " +
		"buffered, that is every record the Fetch responses carried")
	if err := c.RecordGroups(ctx, group); err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}
