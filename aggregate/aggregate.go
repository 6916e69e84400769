package aggregate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/jsonout"
)

// Options configure an aggregator (kwire aggregate's flags).
type Options struct {
	// Client are the options of the kgo client of the cluster holding the
	// agents' topic (brokers, TLS, SASL).
	Client []kgo.Opt
	// Topic is the agents' topic.
	Topic string
	// Source names the agents' topic in what Run writes to Stderr (the
	// --from URL).
	Source string
	// Group, when set, is the name of the consumer group whose instances
	// split the work (--group): Run then routes to the topic Topic.Group,
	// which must be a legal topic name.
	Group string
	// Text writes human-readable lines instead of NDJSON.
	Text bool
	// Correlate are the correlator's options; its graces should allow for
	// MaxSkew.
	Correlate *correlate.Options
	// MaxLateness is how long (capture time) items wait for the other
	// agents' before they are correlated; MaxSkew how far apart the
	// agents' host clocks may be; QuietAfter how long (wall time) an agent
	// may be silent before it stops holding the others back.
	MaxLateness, MaxSkew, QuietAfter time.Duration
	// IdleExit, when positive, stops Run once it is caught up, no agent is
	// still sending and nothing new came for this long.
	IdleExit time.Duration
	// MaxFrame bounds the record bytes one exchange is rebuilt into
	// (--max-frame; 0: wire.DefaultMaxExpand).
	MaxFrame int
	// ClockWindow is how far an agent's clock may be from the others'
	// before it is held back alone (--clock-window; 0: not checked).
	ClockWindow time.Duration
	// MaxAgents bounds the agent runs remembered, MaxRuns those of one
	// host, MaxConns the connections whose ids are kept (--max-agents,
	// --max-runs, --max-conns; 0: the defaults, caps.go).
	MaxAgents, MaxRuns, MaxConns int
	// Stderr gets Run's progress and the errors of its polls (nil:
	// discarded).
	Stderr io.Writer
	// Hook, when set, lets a test follow a --group instance.
	Hook *Hook
	// Keys, when set, are the agents' keys (--agent-key-file): a record
	// of the agents' topic not signed with a key of the agent it names
	// is dropped and counted (verify.go). Without, nothing is verified.
	Keys []wire.Key
	// Tap, when set, gets what the aggregator correlates (kwire aggregate
	// --metrics); not with Group.
	Tap Tap
}

// Tap is a second consumer of what an Aggregator correlates, on its
// goroutine: every exchange and every event it writes as they come, and,
// every TapEvery (and at the end), the state the final summary and stats
// would show then: the snapshot (with the coverage's patch), the agents'
// summed stats and the latest capture time of any agent's item.
// *metrics.Exporter is one.
type Tap interface {
	Exchange(e *decode.Exchange)
	Event(ev correlate.Event)
	Snapshot(s *correlate.Snapshot)
	Stats(cs capture.Stats, ds decode.Stats)
	LastPacket(t time.Time)
}

// TapEvery is how often (wall time) a Tap gets the state: a snapshot
// copies it all.
const TapEvery = 2 * time.Second

// Aggregator merges the agents' batches by capture time behind a
// watermark and correlates them, writing the correlator's events, the
// anomalies and, at the end, the summary, stats and aggregate line: kwire
// aggregate without --group. It runs on one goroutine.
type Aggregator struct {
	out  *jsonout.Writer
	corr *correlate.Correlator
	text bool
	m    *merger
	// records holds the record batches of the Fetch response being
	// correlated: items wait in the merge without them (decodeOptions).
	records        []byte
	decode         *wire.Options
	stdout, stderr io.Writer
	verify         *verifier
	newer          *newerFormats
	tap            Tap
	nextTap        time.Time
}

// keepRecords: a records buffer grown beyond it is not kept for the next
// exchange (one Fetch response may stand for --max-frame bytes).
const keepRecords = 16 << 20

// decodeOptions: a Fetch response's record batches are rebuilt (header
// and zeros, at full size, at most --max-frame) only when it is
// correlated, into one buffer.
func (opts *Options) decodeOptions() *wire.Options {
	return &wire.Options{DeferRecords: true, MaxExpand: opts.MaxFrame}
}

// merger returns a merger with opts' lateness, skew, clock window and
// caps, passing items to next.
func (opts *Options) merger(next func(*wire.Item, *agentState)) *merger {
	m := newMerger(opts.MaxLateness, opts.QuietAfter, next)
	m.maxSkew = opts.MaxSkew
	m.clock.window = opts.ClockWindow
	m.caps.maxAgents = cmp.Or(opts.MaxAgents, DefaultMaxAgents)
	m.caps.maxRuns = cmp.Or(opts.MaxRuns, DefaultMaxRuns)
	m.caps.maxConns = cmp.Or(opts.MaxConns, DefaultMaxConns)
	m.caps.stderr = cmp.Or[io.Writer](opts.Stderr, io.Discard)
	return m
}

// New returns an aggregator writing to stdout. Of opts it reads Text,
// Correlate, MaxLateness, MaxSkew, QuietAfter, MaxFrame, ClockWindow,
// the caps and Stderr.
func New(opts *Options, stdout io.Writer) *Aggregator {
	ag := &Aggregator{stdout: stdout, stderr: cmp.Or[io.Writer](opts.Stderr, io.Discard), text: opts.Text, decode: opts.decodeOptions(), tap: opts.Tap}
	ag.out = jsonout.New(stdout, &jsonout.Options{Text: opts.Text, LineFlush: true})
	ag.verify = newVerifier(opts.Keys, ag.stderr)
	ag.newer = newNewerFormats(ag.stderr)
	ag.m = opts.merger(ag.item)
	// The correlator's events go through the coverage filter (cover.go).
	ag.corr = correlate.New(opts.Correlate, correlate.SinkFunc(ag.event))
	return ag
}

// Add takes one record value of the agents' topic that arrived at wall
// time now; one that does not decode is counted corrupt (a newer agent's
// format: newer_format_batches, and said on stderr), one that fails
// verification (Options.Keys) unverified. The items keep pointing into
// value: leave it unchanged.
func (ag *Aggregator) Add(value []byte, now time.Time) {
	defer ag.m.guard(nil, 0)
	if !ag.verify.ok(value, false) {
		return
	}
	b, err := wire.Decode(value, ag.decode)
	if err != nil {
		if !ag.newer.note(err, false) {
			ag.m.corrupt++
		}
		return
	}
	ag.m.add(b, now)
}

// Release correlates the items the watermark has passed at wall time
// now; caughtUp says the input had nothing new, so that what the agents
// still sending sent is all there: their items up to the least latest
// clock among them go too.
func (ag *Aggregator) Release(now time.Time, caughtUp bool) {
	mode := releaseWatermark
	if caughtUp {
		mode = releaseCaughtUp
	}
	ag.m.release(now, mode)
	if ag.tap != nil && !now.Before(ag.nextTap) {
		ag.nextTap = now.Add(TapEvery)
		snap, _ := ag.snapshot()
		ag.tapState(snap)
	}
}

// snapshot is the correlator's state as the summary shows it: the
// members whose expiry the coverage withholds live, its hazards without
// the withheld ones. It returns those members too.
func (ag *Aggregator) snapshot() (*correlate.Snapshot, []Unobserved) {
	snap := ag.corr.Snapshot()
	return snap, ag.m.cover.patch(snap)
}

// tapState gives the tap the state: snap, the agents' summed stats, the
// latest capture time.
func (ag *Aggregator) tapState(snap *correlate.Snapshot) {
	cs, ds, _ := ag.m.totals()
	ag.tap.Stats(cs, ds)
	ag.tap.Snapshot(snap)
	ag.tap.LastPacket(ag.m.end)
}

// Finish correlates everything still waiting, closes the correlator at
// the latest capture time seen and writes the summary, the agents'
// summed stats and the aggregate line.
func (ag *Aggregator) Finish() error {
	ag.m.release(time.Now(), releaseAll)
	return ag.finish(ag.stdout)
}

// Run is kwire aggregate: it reads the agents' topic from its start until
// ctx is done (or, with IdleExit, idle), then finishes. With Group it is
// one instance of the group (group.go).
func Run(ctx context.Context, opts *Options, stdout io.Writer) error {
	if opts.Group != "" {
		if opts.Tap != nil {
			return errors.New("aggregate: a Tap is not supported with Group")
		}
		return runGroup(ctx, opts, stdout)
	}
	cl, err := kgo.NewClient(append(slices.Clone(opts.Client), kgo.ConsumeTopics(opts.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer cl.Close()
	ag := New(opts, stdout)
	fmt.Fprintf(ag.stderr, "kwire: aggregating %s\n", opts.Source)
	runErr := ag.consume(ctx, cl, opts.IdleExit)
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		runErr = nil
	}
	return errors.Join(runErr, ag.Finish())
}

// poll fetches what the topic has within a second; closed when cl was
// closed. Errors other than the poll's own deadline go to w, as
// "kwire: VERB TOPIC[PARTITION]: ERROR".
func poll(ctx context.Context, cl *kgo.Client, w io.Writer, verb string) (fetches kgo.Fetches, closed bool) {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	fetches = cl.PollFetches(pctx)
	cancel()
	if fetches.IsClientClosed() {
		return fetches, true
	}
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(w, "kwire: %s %s[%d]: %v\n", verb, t, p, err)
		}
	})
	return fetches, false
}

// consume polls the topic until ctx is done (or idle for idleExit), and
// merges what comes. A poll that finds nothing new means the aggregator
// is caught up: everything waiting is correlated.
func (ag *Aggregator) consume(ctx context.Context, cl *kgo.Client, idleExit time.Duration) error {
	lastNew := time.Now()
	for ctx.Err() == nil {
		fetches, closed := poll(ctx, cl, ag.stderr, "consuming")
		if closed {
			return nil
		}
		now := time.Now()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			ag.Add(r.Value, now)
		})
		ag.Release(now, n == 0)
		if n > 0 {
			lastNew = now
		} else if idleExit > 0 && now.Sub(lastNew) >= idleExit && !ag.m.sending(now) {
			return nil
		}
		if err := ag.out.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return ctx.Err()
}

// item passes one merged item on.
func (ag *Aggregator) item(it *wire.Item, a *agentState) {
	switch it.Kind {
	case wire.KindExchange:
		ag.exchange(it, a, ag.corr.Exchange)
	case wire.KindAnomaly:
		ag.out.Anomaly(it.Anomaly)
		ag.corr.Anomaly(it.Anomaly) // loss the absence-based hazards check
	case wire.KindCounters:
		c := it.Counters
		if c == nil {
			return
		}
		if l := c.Capture.Live; l != nil && l.KernelDrops > a.drops {
			ag.corr.SourceLoss(it.At, int64(l.KernelDrops-a.drops))
			a.drops = l.KernelDrops
		}
		a.counter = c
	}
}

// exchange gives exchange item it of agent a to the correlator by take
// (its Exchange, or ExchangeAfterTick).
func (ag *Aggregator) exchange(it *wire.Item, a *agentState, take func(*decode.Exchange)) {
	ag.withRecords(it, func(x *decode.Exchange) {
		ag.m.cover.exchange(a.agent.Host, x)
		if ag.tap != nil {
			ag.tap.Exchange(x)
		}
		take(x)
	})
}

// withRecords calls f with exchange item it, its Fetch records rebuilt
// (Options.DeferRecords) for the call only.
func (ag *Aggregator) withRecords(it *wire.Item, f func(*decode.Exchange)) {
	ag.records = it.ExpandRecords(ag.records)
	f(it.Exchange)
	if cap(ag.records) > keepRecords {
		ag.records = nil
	}
}

// event passes the correlator's events on, but for the expiries the
// coverage withholds.
func (ag *Aggregator) event(ev correlate.Event) {
	if ag.m.cover.filter(ev, ag.write) {
		ag.write(ev)
	}
}

// write writes an event: but commit events in text (the final report
// shows them).
func (ag *Aggregator) write(ev correlate.Event) {
	if ag.tap != nil {
		ag.tap.Event(ev)
	}
	if _, ok := ev.(*correlate.CommitEvent); ok && ag.text {
		return
	}
	ag.out.Event(ev)
}

// finish closes the correlator at the latest capture time seen and writes
// the summary, the agents' summed stats and the aggregate line.
func (ag *Aggregator) finish(stdout io.Writer) error {
	end := ag.m.end
	ag.corr.Close(end)
	snap, unobs := ag.snapshot()
	if ag.tap != nil {
		ag.tapState(snap)
	}
	ag.out.Summary(snap)
	cs, ds, _ := ag.m.totals()
	ag.out.Stats(end, cs, ds)
	if err := ag.out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	line := ag.line(end, time.Now())
	line.Unobserved = unobs
	if ag.text {
		_, err := fmt.Fprintf(stdout, "aggregate: %d agents (%d restarts), %d batches missing, %d duplicate, %d corrupt, %d unverified, %d late exchanges, %d batches dropped by agents, %d expiries withheld (%d unobserved members), %d hazards withheld\n",
			len(line.Agents), line.Restarts, line.Missing, line.Duplicates, line.Corrupt, line.Unverified, line.Late, line.Dropped, line.Withheld, len(unobs), line.HazardsWithheld)
		if err == nil {
			err = textCaps(stdout, line)
		}
		if err == nil {
			err = textKwire(stdout, line)
		}
		return err
	}
	b, _ := json.Marshal(line)
	_, err := stdout.Write(append(b, '\n'))
	return err
}
