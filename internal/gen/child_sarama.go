package gen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func init() { RegisterChild("saramamember", childSaramaMember) }

// SaramaMemberArgs configure a sarama consumer group member (range
// assignor, sarama's Kafka 2.8 requests) of the h_sarama scenarios, in
// process (startSaramaGMember) or in a child ("saramamember"). It is
// instrumented like g_sarama's members (saramaProbe) and commits whenever
// a claim is drained.
type SaramaMemberArgs struct {
	ClientID string   `json:"client_id"`
	Group    string   `json:"group"`
	Topics   []string `json:"topics"`
	// SessionTimeoutMillis defaults to 6000, HeartbeatMillis to 1000,
	// RebalanceTimeoutMillis to 10000.
	SessionTimeoutMillis   int `json:"session_timeout_ms,omitempty"`
	HeartbeatMillis        int `json:"heartbeat_ms,omitempty"`
	RebalanceTimeoutMillis int `json:"rebalance_timeout_ms,omitempty"`
	// StallMillis, if set, makes the member's ConsumeClaim block this
	// long, deaf to the session's end, the first time it has handled
	// and committed everything up to the high watermark: slow processing
	// that holds up sarama's next JoinGroup (field report 3).
	StallMillis int `json:"stall_ms,omitempty"`
}

// config is sarama's configuration of the member: Cluster.Sarama's
// settings (a child has no Cluster) with the member's timeouts.
func (a SaramaMemberArgs) config(p *saramaProbe) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = a.ClientID
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = time.Duration(cmpOr(a.SessionTimeoutMillis, 6000)) * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = time.Duration(cmpOr(a.HeartbeatMillis, 1000)) * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = time.Duration(cmpOr(a.RebalanceTimeoutMillis, 10000)) * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{&recStrategy{BalanceStrategy: sarama.NewBalanceStrategyRange(), p: p}}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 250 * time.Millisecond
	cfg.Consumer.Interceptors = []sarama.ConsumerInterceptor{p}
	return cfg
}

// saramaGMember is one running sarama member and its Consume loop.
type saramaGMember struct {
	args   SaramaMemberArgs
	p      *saramaProbe
	group  sarama.ConsumerGroup
	h      *stallHandler
	cancel context.CancelFunc
	done   chan struct{}
}

// runSaramaGMember starts a member whose reports go to sink; it rejoins
// (sarama's Consume again) whenever a session ends, until stopped.
func runSaramaGMember(ctx context.Context, addrs []string, a SaramaMemberArgs, sink func(groupReport)) (*saramaGMember, error) {
	p := &saramaProbe{group: a.Group, clientID: a.ClientID, sink: sink, assigned: make(chan struct{})}
	g, err := sarama.NewConsumerGroup(addrs, a.Group, a.config(p))
	if err != nil {
		return nil, fmt.Errorf("sarama group member %s: %w", a.ClientID, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &saramaGMember{args: a, p: p, group: g, cancel: cancel, done: make(chan struct{}),
		h: &stallHandler{gSaramaHandler: gSaramaHandler{p: p}, ctx: ctx, stall: time.Duration(a.StallMillis) * time.Millisecond,
			stalled: make(chan struct{})}}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, a.Topics, m.h); errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
		}
	}()
	return m, nil
}

// waitAssigned waits until the member first owns partitions.
func (m *saramaGMember) waitAssigned(ctx context.Context) error {
	select {
	case <-m.p.assigned:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sarama member %s never got partitions: %w", m.args.ClientID, ctx.Err())
	}
}

// memberID is the member id of the member's latest session.
func (m *saramaGMember) memberID() string {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	return m.p.memberID
}

// close ends the Consume loop and closes the group (LeaveGroup).
func (m *saramaGMember) close() error {
	m.cancel()
	<-m.done
	return m.group.Close()
}

// leave scripts the leave and closes the member.
func (m *saramaGMember) leave(c *Cluster) error {
	c.groups.script(m.args.Group, CauseMemberLeft, m.memberID(), time.Now())
	if err := m.close(); err != nil {
		return fmt.Errorf("close sarama member %s: %w", m.args.ClientID, err)
	}
	return nil
}

// startSaramaGMember starts an in-process member and waits until it owns
// partitions.
func startSaramaGMember(ctx context.Context, c *Cluster, a SaramaMemberArgs) (*saramaGMember, error) {
	m, err := runSaramaGMember(ctx, c.Addrs(), a, c.groups.add)
	if err != nil {
		return nil, err
	}
	c.OnClose(func() { _ = m.close() })
	if err := m.waitAssigned(ctx); err != nil {
		_ = m.close()
		return nil, err
	}
	return m, nil
}

// stallHandler is gSaramaHandler whose ConsumeClaim may stall once (see
// SaramaMemberArgs.StallMillis).
type stallHandler struct {
	gSaramaHandler
	ctx     context.Context // the member's: a stall ends early only when the member stops
	stall   time.Duration
	once    sync.Once
	stalled chan struct{} // closed as the stall begins
}

// ConsumeClaim marks every message and commits whenever the claim is
// drained; a stall starts once a claim is committed up to its high
// watermark, so that no fetched record waits unhandled meanwhile (the
// group's fetched count stays the records of whole batches).
func (h *stallHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(msg, "")
			if len(claim.Messages()) > 0 {
				continue
			}
			s.Commit()
			if h.stall > 0 && msg.Offset+1 == claim.HighWaterMarkOffset() {
				// Every claim's goroutine that gets here waits for
				// the one stall to end.
				h.once.Do(func() {
					close(h.stalled)
					sleepCtx(h.ctx, h.stall)
				})
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// childSaramaMember runs a SaramaMemberArgs member in a child process:
// reports go to the parent as JSON lines as they happen; Ready once it
// owns partitions; on SIGTERM it leaves the group.
func childSaramaMember(ctx context.Context, env *ChildEnv) error {
	var a SaramaMemberArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	m, err := runSaramaGMember(ctx, env.Brokers, a, env.report)
	if err != nil {
		return err
	}
	if m.waitAssigned(ctx) == nil {
		env.Ready()
	}
	<-ctx.Done()
	return m.close()
}

// startSaramaChild starts a SaramaMemberArgs member in a child process
// and waits until it owns partitions.
func startSaramaChild(ctx context.Context, c *Cluster, a SaramaMemberArgs) (*Child, error) {
	return c.startReady(ctx, "saramamember", a, "child sarama member "+a.ClientID, "owning partitions")
}
