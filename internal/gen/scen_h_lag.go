package gen

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { Register(hLagScenario) }

// The consumers of h_lag, by what each is made to do after the first
// lagTurn seconds.
var lagConsumers = []struct {
	group, state, evidence string
	mode                   lagMode
}{
	{"hl-ok", "ok", "", lagKeepUp},
	{"hl-lagging", "lagging", "commits move, lag grows", lagSlow},
	{"hl-nocommit", "stopped", "fetches answered, no commits", lagNoCommit},
	{"hl-stuck", "stopped", "heartbeats, no fetches", lagStuck},
	{"hl-stall", "stalled", "commits the same offset", lagStall},
}

type lagMode int

const (
	lagKeepUp   lagMode = iota // polls and commits after every poll
	lagSlow                    // polls 2 records at a time, 150 ms each: falls behind
	lagNoCommit                // polls on, commits no more (commits disabled)
	lagStuck                   // polls no more (processing hangs), heartbeats on
	lagStall                   // polls no more, commits the same offsets every 500 ms
)

const (
	lagTurn = 2 * time.Second // every consumer keeps up this long
	lagRun  = 6 * time.Second // then behaves as its mode says this long
)

var hLagScenario = Scenario{
	Name: "h_lag",
	Doc: "consumer health and lag in seconds: a kgo producer writes one record to each of hl-orders' 3 partitions every " +
		"100ms (each its own batch; the truth keeps every record's timestamp) while 5 one-member groups consume them: " +
		"hl-ok keeps up; after 2s hl-lagging processes 2 records per 150ms (commits move, lag grows), hl-nocommit " +
		"stops committing but fetches on, hl-stuck stops polling (heartbeats go on, fetches stop), hl-stall stops " +
		"polling but commits the same offsets every 500ms; 6s later the producer stops and the truth records each " +
		"group's committed offsets, the timestamps of the records there, and the state each group was driven into",
	Options: Options{Link: LinkEthernet, Kfake: []kfake.Opt{kfake.SeedTopics(3, "hl-orders")}},
	Run:     runLag,
}

func runLag(ctx context.Context, c *Cluster) error {
	const topic, parts = "hl-orders", 3
	times := map[int32]map[int64]int64{} // partition -> offset -> timestamp ms
	var mu sync.Mutex
	prod, err := c.Kgo(kgo.ClientID("hl-producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for n := 0; ; n++ {
			for p := range int32(parts) {
				r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("record " + strconv.Itoa(n))}
				res := prod.ProduceSync(ctx, r)
				if err := res.FirstErr(); err != nil {
					done <- err
					return
				}
				mu.Lock()
				if times[p] == nil {
					times[p] = map[int64]int64{}
				}
				times[p][r.Offset] = r.Timestamp.UnixMilli()
				mu.Unlock()
			}
			select {
			case <-stop:
				done <- nil
				return
			case <-t.C:
			}
		}
	}()

	var consumers []*lagConsumer
	defer func() {
		for _, lc := range consumers {
			lc.close()
		}
	}()
	for _, lc := range lagConsumers {
		// The generator's probe records each generation's plan and
		// assignments for the groups truth, as for the other scenarios.
		id := lc.group + "-member"
		pr := newProbe(lc.group, id, "", c.groups.add)
		cl, err := c.Kgo(kgo.ClientID(id), kgo.ConsumerGroup(lc.group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(250*time.Millisecond),
			kgo.WithHooks(pr), kgo.Balancers(pr.balancers(kgo.CooperativeStickyBalancer())...))
		if err != nil {
			return err
		}
		pr.cl.Store(cl)
		consumers = append(consumers, startLagConsumer(ctx, cl, lc.mode))
	}
	for _, lc := range lagConsumers {
		if _, err := c.waitStable(ctx, lc.group, 1, parts); err != nil {
			return err
		}
	}
	sleepCtx(ctx, lagTurn)
	for _, lc := range consumers {
		lc.turn()
	}
	sleepCtx(ctx, lagRun)
	close(stop)
	if err := <-done; err != nil {
		return err
	}
	prod.Close()
	groups := make([]string, len(lagConsumers))
	for i, lc := range lagConsumers {
		groups[i] = lc.group
	}
	if err := c.RecordCommitted(ctx, groups...); err != nil {
		return err
	}
	for _, lc := range consumers {
		lc.close() // members leave (LeaveGroup) before the groups are described
	}
	if err := c.RecordGroups(ctx, groups...); err != nil {
		return err
	}
	if err := c.RecordEndOffsets(ctx, topic); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.truth.lag = map[string]*LagTruth{}
	for _, lc := range lagConsumers {
		lt := &LagTruth{State: lc.state, Evidence: lc.evidence, RecordTimes: map[string]map[string]int64{topic: {}}}
		for ps, off := range c.truth.committed[lc.group][topic] {
			p, _ := strconv.Atoi(ps)
			mu.Lock()
			ms, ok := times[int32(p)][off]
			mu.Unlock()
			if ok {
				lt.RecordTimes[topic][ps] = ms
			}
		}
		c.truth.lag[lc.group] = lt
	}
	return nil
}

// lagConsumer is an in-process group member run in one of the lagModes.
type lagConsumer struct {
	cl     *kgo.Client
	mode   lagMode
	turned chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startLagConsumer(ctx context.Context, cl *kgo.Client, mode lagMode) *lagConsumer {
	ctx, cancel := context.WithCancel(ctx)
	lc := &lagConsumer{cl: cl, mode: mode, turned: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(lc.done)
		turned := false
		for ctx.Err() == nil {
			if !turned {
				select {
				case <-lc.turned:
					turned = true
				default:
				}
			}
			if !turned || mode == lagKeepUp {
				if fs := cl.PollFetches(ctx); fs.NumRecords() > 0 {
					_ = cl.CommitUncommittedOffsets(ctx)
				}
				continue
			}
			switch mode {
			case lagSlow:
				if fs := cl.PollRecords(ctx, 2); fs.NumRecords() > 0 {
					sleepCtx(ctx, 150*time.Millisecond)
					_ = cl.CommitUncommittedOffsets(ctx)
				}
			case lagNoCommit:
				cl.PollFetches(ctx)
			case lagStuck:
				<-ctx.Done()
			case lagStall:
				_ = commitSame(ctx, cl)
				sleepCtx(ctx, 500*time.Millisecond)
			}
		}
	}()
	return lc
}

// commitSame commits the offsets committed already again, as a consumer
// stuck on one record whose auto-commit goes on does.
func commitSame(ctx context.Context, cl *kgo.Client) error {
	var err error
	cl.CommitOffsetsSync(ctx, cl.CommittedOffsets(), func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, e error) { err = e })
	return err
}

func (lc *lagConsumer) turn() { close(lc.turned) }

func (lc *lagConsumer) close() {
	lc.once.Do(func() {
		lc.cancel()
		<-lc.done
		lc.cl.Close()
	})
}
