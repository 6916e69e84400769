package gen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// value makes a record value of size bytes: readable, compressible text
// with the index in it, like a small JSON event.
func value(i, size int) []byte {
	s := fmt.Sprintf(`{"id":%d,"kind":"order","note":"`, i)
	pad := max(size-len(s)-2, 0)
	var b strings.Builder
	b.WriteString(s)
	for b.Len() < len(s)+pad {
		b.WriteString("lorem ipsum dolor sit amet ")
	}
	out := []byte(b.String())[:len(s)+pad]
	return append(out, '"', '}')
}

// produce sends n records of size bytes to topic in batches of batch,
// waiting for each batch to be acknowledged.
func produce(ctx context.Context, cl *kgo.Client, topic string, from, n, size, batch int) error {
	for i := 0; i < n; i += batch {
		var rs []*kgo.Record
		for j := i; j < min(i+batch, n); j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", from+j), Value: value(from+j, size)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce to %s: %w", topic, err)
		}
	}
	return nil
}

// progress counts distinct records (topic, partition, offset) until a
// target is reached.
type progress struct {
	mu      sync.Mutex
	seen    map[string]struct{}
	target  int
	reached chan struct{}
}

func newProgress(target int) *progress {
	return &progress{seen: map[string]struct{}{}, target: target, reached: make(chan struct{})}
}

func (p *progress) add(topic string, partition int32, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[fmt.Sprintf("%s/%d/%d", topic, partition, offset)] = struct{}{}
	if len(p.seen) == p.target {
		close(p.reached)
	}
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// wait returns when the target is reached or ctx is done.
func (p *progress) wait(ctx context.Context, what string) error {
	select {
	case <-p.reached:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %d of %d records: %w", what, p.count(), p.target, ctx.Err())
	}
}

// member is an in-process kgo group member that commits after every poll
// and counts a record in its progress only once a commit covering it
// succeeded.
type member struct {
	name     string
	cl       *kgo.Client
	cancel   context.CancelFunc
	assigned chan struct{}
	done     chan struct{}
}

// groupOpts are the group settings every kgo member uses: short timeouts
// so scenarios stay short, commits under the scenario's control.
func groupOpts(name, group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
}

// startMember starts a member and its poll loop. Its context is ctx; stop
// ends it.
func startMember(ctx context.Context, c *Cluster, prog *progress, opts ...kgo.Opt) (*member, error) {
	m := &member{assigned: make(chan struct{}), done: make(chan struct{})}
	var once sync.Once
	opts = append(opts,
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			if len(a) > 0 {
				once.Do(func() { close(m.assigned) })
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
	)
	cl, err := c.Kgo(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	ctx, m.cancel = context.WithCancel(ctx)
	go func() {
		defer close(m.done)
		var pending []*kgo.Record
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			pending = append(pending, fs.Records()...)
			if len(pending) == 0 {
				continue
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				continue // e.g. a rebalance: the next commit covers these
			}
			for _, r := range pending {
				prog.add(r.Topic, r.Partition, r.Offset)
			}
			pending = pending[:0]
		}
	}()
	return m, nil
}

// waitAssigned waits until m owns partitions for the first time.
func (m *member) waitAssigned(ctx context.Context) error {
	select {
	case <-m.assigned:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("member never got partitions: %w", ctx.Err())
	}
}

// stop ends the poll loop and closes the client, which leaves the group.
func (m *member) stop() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// consumeAll reads topics with a group-less consumer until want distinct
// records arrived.
func consumeAll(ctx context.Context, c *Cluster, name string, want int, opts []kgo.Opt, topics ...string) error {
	cl, err := c.Kgo(append([]kgo.Opt{kgo.ClientID(name), kgo.ConsumeTopics(topics...), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	prog := newProgress(want)
	for {
		select {
		case <-prog.reached:
			return nil
		default:
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return prog.wait(ctx, name)
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) { errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err)) })
		if len(errs) > 0 {
			return fmt.Errorf("%s: %w", name, errors.Join(errs...))
		}
		fs.EachRecord(func(r *kgo.Record) { prog.add(r.Topic, r.Partition, r.Offset) })
	}
}
