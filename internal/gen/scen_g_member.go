package gen

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gMember is an in-process group member of the g_ and h_ scenarios.
type gMember struct {
	args   GMemberArgs
	c      *Cluster
	p      *probe
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// probedClient makes a's client, its generations reported to the truth
// through the member probe.
func (c *Cluster) probedClient(a GMemberArgs) (*kgo.Client, *probe, error) {
	p := newProbe(a.Group, a.ClientID, a.InstanceID, c.groups.add)
	opts, err := a.opts(p)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.Kgo(opts...)
	if err != nil {
		return nil, nil, err
	}
	p.cl.Store(cl)
	return cl, p, nil
}

// pollN polls cl until it has given n records.
func pollN(ctx context.Context, cl *kgo.Client, n int) error {
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		got += len(fs.Records())
	}
	return nil
}

// startGMember starts a member and its poll loop (see GMemberArgs).
func startGMember(ctx context.Context, c *Cluster, a GMemberArgs) (*gMember, error) {
	cl, p, err := c.probedClient(a)
	if err != nil {
		return nil, err
	}
	m := &gMember{args: a, c: c, p: p, cl: cl, done: make(chan struct{})}
	ctx, m.cancel = context.WithCancel(ctx)
	go func() {
		defer close(m.done)
		pollLoop(ctx, cl, a, p)
	}()
	return m, nil
}

// pollLoop polls until ctx is done or the client is closed, committing
// as a.Commit says; failed commits are reported as notes.
func pollLoop(ctx context.Context, cl *kgo.Client, a GMemberArgs, p *probe) {
	skip := map[int64]bool{}
	for _, o := range a.SkipCommit {
		skip[o] = true
	}
	for ctx.Err() == nil {
		var fs kgo.Fetches
		if a.MaxPollRecords > 0 {
			fs = cl.PollRecords(ctx, a.MaxPollRecords)
		} else {
			fs = cl.PollFetches(ctx)
		}
		if fs.IsClientClosed() {
			return
		}
		rs := fs.Records()
		if len(rs) == 0 {
			if a.BlockRebalance {
				cl.AllowRebalance()
			}
			continue
		}
		p.consumed(rs)
		if a.OnRecords != nil {
			a.OnRecords(rs)
		}
		switch a.Commit {
		case "", "poll":
			p.commitErr(cl.CommitUncommittedOffsets(ctx))
		case "record":
			for _, r := range rs {
				if !skip[r.Offset] {
					p.commitErr(cl.CommitRecords(ctx, r)) // commits r.Offset+1
				}
			}
		}
		if a.PollSleepMillis > 0 {
			sleepCtx(ctx, time.Duration(a.PollSleepMillis)*time.Millisecond)
		}
		if a.BlockRebalance {
			cl.AllowRebalance()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waitAssigned waits until m owns partitions for the first time.
func (m *gMember) waitAssigned(ctx context.Context) error {
	select {
	case <-m.p.assigned:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("member %s never got partitions: %w", m.args.ClientID, ctx.Err())
	}
}

// memberID is the member id the client has now.
func (m *gMember) memberID() string { id, _ := m.cl.GroupMetadata(); return id }

// leave ends the poll loop and closes the client, which leaves the group
// (LeaveGroup; static members do not send one), and scripts the leave.
func (m *gMember) leave() {
	if m.args.InstanceID == "" {
		m.c.groups.script(m.args.Group, CauseMemberLeft, m.memberID(), time.Now())
	}
	m.stop()
}

// stop ends the poll loop and closes the client without scripting.
func (m *gMember) stop() {
	m.cancel()
	<-m.done
	m.p.closing.Store(true)
	m.cl.Close()
}

// childGMember runs a GMemberArgs member in a child process: reports go
// to the parent as JSON lines as they happen (a killed child has
// reported everything up to its death); Ready once it owns partitions.
func childGMember(ctx context.Context, env *ChildEnv) error {
	var a GMemberArgs
	if err := json.Unmarshal(env.Args, &a); err != nil {
		return err
	}
	p := newProbe(a.Group, a.ClientID, a.InstanceID, env.report)
	opts, err := a.opts(p)
	if err != nil {
		return err
	}
	cl, err := env.Kgo(opts...)
	if err != nil {
		return err
	}
	p.cl.Store(cl)
	go func() {
		select {
		case <-p.assigned:
			env.Ready()
		case <-ctx.Done():
		}
	}()
	pollLoop(ctx, cl, a, p)
	p.closing.Store(true)
	cl.Close()
	return nil
}

// startGChild starts a GMemberArgs member in a child process and waits
// until it owns partitions.
// startPair starts member 1 of a group in process, then member 2 in a
// child, each once the group is stable without it (kfake has no initial
// rebalance delay), writes 100 records to topic (of parts partitions) as
// producer and waits until the group consumed them: the start of the
// scenarios that then freeze or kill member 2. gi is the group with both.
func startPair(ctx context.Context, c *Cluster, group, topic string, parts int, args func(int) GMemberArgs, producer string) (m1 *gMember, ch *Child, gi *kfake.GroupInfo, err error) {
	if m1, err = startGMember(ctx, c, args(1)); err != nil {
		return nil, nil, nil, err
	}
	if _, err = c.waitStable(ctx, group, 1, parts); err != nil {
		return m1, nil, nil, err
	}
	if ch, err = startGChild(ctx, c, args(2)); err != nil {
		return m1, nil, nil, err
	}
	if gi, err = c.waitStable(ctx, group, 2, parts); err != nil {
		return m1, ch, nil, err
	}
	if err = produceN(ctx, c, producer, topic, 0, 100); err != nil {
		return m1, ch, gi, err
	}
	return m1, ch, gi, c.waitCaughtUp(ctx, group, topic)
}

// startBusyMember starts member a of a group (of parts partitions) alone,
// and returns once the group is stable and a's poll loop has just begun
// processing records (its PollSleepMillis): a rebalance started now waits
// for it. a.OnRecords is set.
func startBusyMember(ctx context.Context, c *Cluster, a GMemberArgs, parts int) (*gMember, error) {
	busy := make(chan struct{}, 1)
	a.OnRecords = func([]*kgo.Record) {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	m, err := startGMember(ctx, c, a)
	if err != nil {
		return nil, err
	}
	if _, err := c.waitStable(ctx, a.Group, 1, parts); err != nil {
		return m, err
	}
	select { // drop a stale signal: wait for a poll that starts sleeping now
	case <-busy:
	default:
	}
	select {
	case <-busy:
		return m, nil
	case <-ctx.Done():
		return m, ctx.Err()
	}
}

func startGChild(ctx context.Context, c *Cluster, a GMemberArgs) (*Child, error) {
	return startChildAs(ctx, c, "gmember", a)
}

// scriptGone scripts that the member clientID last reported as left the
// group in group for cause (member_left now; member_expired one session
// timeout from now), and returns its member id.
func (c *Cluster) scriptGone(group, clientID, cause string, session time.Duration) string {
	id := c.groups.lastMember(group, clientID)
	at := time.Now()
	if cause == CauseMemberExpired {
		at = at.Add(session)
	}
	c.groups.script(group, cause, id, at)
	return id
}

// bgProducer produces small records to a topic in the background.
type bgProducer struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan error
	n    int
}

// startProducer produces per records (of size bytes) every interval to
// topic until halt.
func startProducer(ctx context.Context, c *Cluster, clientID, topic string, per, size int, every time.Duration) (*bgProducer, error) {
	cl, err := c.Kgo(kgo.ClientID(clientID))
	if err != nil {
		return nil, err
	}
	p := &bgProducer{cl: cl, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if err := produce(ctx, cl, topic, p.n, per, size, per); err != nil {
				p.done <- err
				return
			}
			p.n += per
			select {
			case <-p.stop:
				p.done <- nil
				return
			case <-t.C:
			}
		}
	}()
	return p, nil
}

// halt stops producing after the batch in flight and closes the client.
func (p *bgProducer) halt() error {
	close(p.stop)
	err := <-p.done
	p.cl.Close()
	return err
}
