package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/jsonout"
)

const aggregateHelp = `Usage: kwire aggregate --from kafka://HOST:PORT[,HOST:PORT...]/TOPIC [flags]

Analyse what several kwire live agents publish (kwire live --publish, one
agent per broker host) as one capture: a consumer's JoinGroup and
Heartbeat reach the coordinator, its Fetches each partition leader, its
FindCoordinator any broker, and only together do they tell its story.
The agents' items are merged by capture time behind a watermark
(--max-lateness) and go through the same correlator as kwire analyze:
the same events, and on SIGINT/SIGTERM or after --duration the summary
and stats (exit status 0). Design, format and limits: docs/aggregate.md.

Duplicate batches (producer retries) are dropped; missing ones are
counted per agent (agent_records_missing), with items that came later
than the watermark (late_exchanges) and the batches agents dropped
(publish_batches_dropped), in a final "aggregate" line.

Examples:
  kwire aggregate --from kafka://k1:9092,k2:9092/kwire --json
  kwire aggregate --from kafka://k1:9093/kwire --tls --sasl-mechanism SCRAM-SHA-512 --user kwire --password-file pw

Flags:
`

// aggregateFlags are kwire aggregate's flags.
type aggregateFlags struct {
	common      commonFlags
	from        kafkaFlags
	group       string
	duration    time.Duration
	idleExit    time.Duration
	maxLateness time.Duration
	maxSkew     time.Duration
	quietAfter  time.Duration
	hook        *groupHook // tests of --group only
}

func (f *aggregateFlags) register(fs *flag.FlagSet) {
	f.common.register(fs)
	f.from = kafkaFlags{envPass: "KWIRE_AGGREGATE_PASSWORD"}
	f.from.register(fs, "from", "read the agents' items from `kafka://HOST:PORT[,HOST:PORT...]/TOPIC`")
	fs.StringVar(&f.group, "group", "", "split the work with the other instances of consumer group `NAME`: each routes part of the topic to TOPIC.NAME by consumer group and writes the lines of the groups it owns (docs/aggregate.md)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long, as on SIGINT (0: run until interrupted)")
	fs.DurationVar(&f.idleExit, "exit-idle", 0, "stop once caught up, with no agent still sending (each stopped, restarted or quiet), and nothing new came for this long (0: never; for batch use)")
	fs.DurationVar(&f.maxLateness, "max-lateness", 5*time.Second, "how long (capture time) items wait for the other agents' before they are correlated; later ones are still used and counted")
	fs.DurationVar(&f.maxSkew, "max-skew", 50*time.Millisecond, "how far apart the agents' host clocks may be: cross-host orderings and graces the correlator relies on allow for it (docs/aggregate.md)")
	fs.DurationVar(&f.quietAfter, "quiet-after", 30*time.Second, "an agent silent this long (wall clock) stops holding the others back; it is shown as quiet")
}

func cmdAggregate(args []string, stdout, stderr io.Writer) error {
	var f aggregateFlags
	fs := newFlagSet("aggregate", aggregateHelp, stderr)
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "kwire aggregate: unexpected argument %q\n\n", fs.Arg(0))
	case f.from.url == "":
		fmt.Fprint(stderr, "kwire aggregate: --from kafka://HOST:PORT/TOPIC is required\n\n")
	case f.maxLateness < 0, f.maxSkew < 0, f.quietAfter <= 0:
		fmt.Fprint(stderr, "kwire aggregate: --max-lateness and --max-skew must not be negative, --quiet-after must be positive\n\n")
	default:
		ctx, stop := runContext(f.duration)
		defer stop()
		return runAggregate(ctx, &f, stdout, stderr)
	}
	fs.Usage()
	return errUsage
}

// aggregator feeds the merged items to a pipeline's correlator and output.
type aggregator struct {
	p *pipeline
	m *merger
	// records holds the record batches of the Fetch response being
	// correlated: items wait in the merge without them (decodeOptions).
	records []byte
}

// decodeOptions: a Fetch response's record batches are rebuilt (header
// and zeros, at full size) only when it is correlated, into one buffer.
var decodeOptions = &wire.Options{DeferRecords: true}

func runAggregate(ctx context.Context, f *aggregateFlags, stdout, stderr io.Writer) error {
	if f.group != "" {
		return runAggregateGroup(ctx, f, stdout, stderr) // aggregate_group.go
	}
	opts, topic, err := f.from.options()
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	defer cl.Close()
	p := newPipeline(&f.common, stdout, false)
	p.out = jsonout.New(stdout, &jsonout.Options{Text: p.text, LineFlush: true})
	ag := &aggregator{p: p}
	ag.m = newMerger(f.maxLateness, f.quietAfter, ag.item)
	ag.m.maxSkew = f.maxSkew
	// The correlator's events go through the coverage filter
	// (aggregate_cover.go); its graces allow for the agents' skew.
	p.corr = correlate.New(f.correlateOptions(), correlate.SinkFunc(ag.event))
	fmt.Fprintf(stderr, "kwire: aggregating %s\n", f.from.url)
	runErr := ag.consume(ctx, cl, f.idleExit)
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		runErr = nil
	}
	ag.m.release(time.Now(), releaseAll)
	return errors.Join(runErr, ag.finish(stdout))
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
func (ag *aggregator) consume(ctx context.Context, cl *kgo.Client, idleExit time.Duration) error {
	lastNew := time.Now()
	for ctx.Err() == nil {
		fetches, closed := poll(ctx, cl, os.Stderr, "consuming")
		if closed {
			return nil
		}
		now := time.Now()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			b, err := wire.Decode(r.Value, decodeOptions)
			if err != nil {
				ag.m.corrupt++
				return
			}
			ag.m.add(b, now)
		})
		mode := releaseWatermark
		if n == 0 {
			mode = releaseCaughtUp
		}
		ag.m.release(now, mode)
		if n > 0 {
			lastNew = now
		} else if idleExit > 0 && now.Sub(lastNew) >= idleExit && !ag.m.sending(now) {
			return nil
		}
		if err := ag.p.out.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return ctx.Err()
}

// item passes one merged item on.
func (ag *aggregator) item(it *wire.Item, a *agentState) {
	switch it.Kind {
	case wire.KindExchange:
		ag.records = it.ExpandRecords(ag.records)
		ag.m.cover.exchange(a.agent.Host, it.Exchange)
		ag.p.exchange(it.Exchange)
	case wire.KindAnomaly:
		ag.p.anomaly(it.Anomaly)
	case wire.KindCounters:
		c := it.Counters
		if c == nil {
			return
		}
		if l := c.Capture.Live; l != nil && l.KernelDrops > a.drops {
			ag.p.corr.SourceLoss(it.At, int64(l.KernelDrops-a.drops))
			a.drops = l.KernelDrops
		}
		a.counter = c
	}
}

// event passes the correlator's events on, but for the expiries the
// coverage withholds.
func (ag *aggregator) event(ev correlate.Event) {
	if ag.m.cover.filter(ev, ag.p.event) {
		ag.p.event(ev)
	}
}

// finish closes the correlator at the latest capture time seen and writes
// the summary, the agents' summed stats and the aggregate line.
func (ag *aggregator) finish(stdout io.Writer) error {
	end := ag.m.end
	p := ag.p
	p.corr.Close(end)
	snap := p.corr.Snapshot()
	unobs := ag.m.cover.patch(snap)
	p.out.Summary(snap)
	cs, ds, _ := ag.m.totals()
	p.out.Stats(end, cs, ds)
	if err := p.out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	line := ag.line(end, time.Now())
	line.Unobserved = unobs
	if p.text {
		_, err := fmt.Fprintf(stdout, "aggregate: %d agents (%d restarts), %d batches missing, %d duplicate, %d corrupt, %d late exchanges, %d batches dropped by agents, %d expiries withheld (%d unobserved members), %d hazards withheld\n",
			len(line.Agents), line.Restarts, line.Missing, line.Duplicates, line.Corrupt, line.Late, line.Dropped, line.Withheld, len(unobs), line.HazardsWithheld)
		return err
	}
	b, _ := json.Marshal(line)
	_, err := stdout.Write(append(b, '\n'))
	return err
}

// aggregateLine is the final "aggregate" NDJSON line (docs/aggregate.md).
type aggregateLine struct {
	V          int              `json:"v"`
	Type       string           `json:"type"`
	TS         time.Time        `json:"ts"`
	Agents     []aggregateAgent `json:"agents"`
	Missing    uint64           `json:"agent_records_missing"`
	Duplicates int64            `json:"duplicate_batches"`
	Corrupt    int64            `json:"corrupt_batches"`
	Late       int64            `json:"late_exchanges"`
	Dropped    uint64           `json:"publish_batches_dropped"`
	// Restarts counts agent runs that ended without saying so, a later
	// run of their host being heard.
	Restarts int `json:"agent_restarts"`
	// Withheld counts expiries concluded from a silence the coordinator's
	// host's agents did not capture (confirmed ones included); Unobserved
	// lists the members still withheld at the end.
	Withheld   int64        `json:"expiries_withheld"`
	Unobserved []unobserved `json:"unobserved,omitempty"`
	// HazardsWithheld counts member_expired and heartbeat_late hazards
	// dropped because the silence they rest on was the aggregator's: the
	// coordinator's host was not captured for all of it.
	HazardsWithheld int64 `json:"hazards_withheld"`
}

type aggregateAgent struct {
	Agent   string            `json:"agent"`
	State   string            `json:"state"`
	Batches uint64            `json:"batches"`
	Missing uint64            `json:"records_missing"`
	First   time.Time         `json:"first"`
	Latest  time.Time         `json:"latest"`
	Publish wire.PublishStats `json:"publish"`
}

func (ag *aggregator) line(end, now time.Time) *aggregateLine {
	m := ag.m
	l := &aggregateLine{V: 1, Type: "aggregate", TS: end.UTC(), Duplicates: m.duplicates, Corrupt: m.corrupt, Late: m.late,
		Withheld: m.cover.expiries, HazardsWithheld: m.cover.hazards}
	for _, a := range m.agents {
		x := aggregateAgent{Agent: a.name, State: m.state(a, now), Batches: a.got, Missing: a.missing(), First: a.first.UTC(), Latest: a.latest.UTC()}
		if a.restarted {
			l.Restarts++
		}
		if a.counter != nil {
			x.Publish = a.counter.Publish
		}
		l.Agents = append(l.Agents, x)
		l.Missing += x.Missing
		l.Dropped += x.Publish.BatchesDropped
	}
	slices.SortFunc(l.Agents, func(a, b aggregateAgent) int { return cmp.Compare(a.Agent, b.Agent) })
	return l
}

// correlateOptions are the aggregator's correlator options: its graces and
// the tolerance of cross-connection order allow for the agents' skew.
func (f *aggregateFlags) correlateOptions() *correlate.Options {
	co := f.common.limits.correlate()
	co.ConsumerSessionTimeout = f.common.consumerSession
	co.Hazards.FetchGrace = 2*time.Second + 2*f.maxSkew
	co.Hazards.OrderTolerance = 10*time.Millisecond + 2*f.maxSkew
	return co
}
