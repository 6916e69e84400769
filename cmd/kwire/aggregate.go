package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/metrics"
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
  kwire aggregate --from kafka://k1:9093/kwire --tls-ca-file ca.pem --tls-cert-file agg.pem --tls-key-file agg-key.pem
  kwire aggregate --from kafka://k1:9092/kwire --agent-key-file agents.keys --json
  kwire aggregate --from kafka://k1:9092/kwire --metrics 127.0.0.1:9465

--metrics ADDR serves Prometheus metrics at http://ADDR/metrics: the same
families as kwire live's (docs/metrics.md), of the merged, cluster-wide
view: the groups as this aggregator rebuilds them from every agent, the
requests every agent saw, the agents' health counters summed. Not with
--group.

Without --agent-key-file (or $KWIRE_AGENT_KEYS), anyone who can write to
the topic can pose as any agent: see docs/aggregate.md, "Running agents
and aggregator safely" (keys, ACLs, the metrics bind).

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
	keyFile     string
	clockWindow time.Duration
	maxAgents   int
	maxRuns     int
	metrics     metricsFlags
	hook        *aggregate.Hook // tests of --group only
	// listening, when set, is told the --metrics address (tests).
	listening func(net.Addr)
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
	fs.StringVar(&f.keyFile, "agent-key-file", "", "verify every agent batch with the agents' keys in `FILE` (lines NAME HEXKEY, one per agent, or * for a key any agent may use; else from $"+agentKeysEnv+"): "+
		"batches not signed by the agent they name are dropped and counted (docs/aggregate.md)")
	fs.DurationVar(&f.quietAfter, "quiet-after", 30*time.Second, "an agent silent this long (wall clock) stops holding the others back; it is shown as quiet")
	fs.DurationVar(&f.clockWindow, "clock-window", aggregate.DefaultClockWindow, "an agent whose capture clock is further than this from the other agents' is held back alone and reported, not waited for (0: never; for agents replaying captures of different times)")
	fs.IntVar(&f.maxAgents, "max-agents", aggregate.DefaultMaxAgents, "agent runs remembered; beyond, runs that no longer send are forgotten and new ones refused while all still send (counted)")
	fs.IntVar(&f.maxRuns, "max-runs", aggregate.DefaultMaxRuns, "runs of one host remembered; beyond, its oldest that no longer send are forgotten (counted)")
	f.metrics.register(fs)
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
	case f.common.brokerSettingsProblem() != "":
		fmt.Fprintf(stderr, "kwire aggregate: %s\n\n", f.common.brokerSettingsProblem())
	case f.maxLateness < 0, f.maxSkew < 0, f.quietAfter <= 0, f.clockWindow < 0:
		fmt.Fprint(stderr, "kwire aggregate: --max-lateness, --max-skew and --clock-window must not be negative, --quiet-after must be positive\n\n")
	case f.maxAgents <= 0, f.maxRuns <= 0, f.common.limits.conns <= 0:
		fmt.Fprint(stderr, "kwire aggregate: --max-agents, --max-runs and --max-conns must be positive\n\n")
	case f.metrics.addr != "" && f.group != "":
		fmt.Fprint(stderr, "kwire aggregate: --metrics is for one aggregator (without --group): each --group instance correlates only its part of the groups\n\n")
	default:
		ctx, stop := runContext(f.duration)
		defer stop()
		return runAggregate(ctx, &f, stdout, stderr)
	}
	fs.Usage()
	return errUsage
}

// runAggregate turns the flags into aggregate.Options and runs it; with
// --group, the routed topic's name is checked first.
func runAggregate(ctx context.Context, f *aggregateFlags, stdout, stderr io.Writer) error {
	opts, topic, err := f.from.options()
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if f.group != "" {
		if routed := topic + "." + f.group; !legalTopic(routed) {
			return fmt.Errorf("--group %q: the routed topic %q is not a legal Kafka topic name: use letters, digits, '.', '_' and '-'", f.group, routed)
		}
	}
	f.from.warn(stderr)
	keys, source, err := readKeys("agent-key-file", f.keyFile, agentKeysEnv)
	if err != nil {
		return err
	}
	if err := f.from.checkTopic(ctx, opts, topic, false); err != nil {
		return fmt.Errorf("--from: %w", missingTopicFix(err, aggregateTopicFix))
	}
	if keys == nil {
		fmt.Fprint(stderr, noKeyWarning("aggregating", "agent-key-file", agentKeysEnv, topic))
	} else {
		fmt.Fprintf(stderr, "kwire: verifying agents' batches with the keys of %s (%s)\n", keyNames(keys), source)
	}
	var tap aggregate.Tap
	if f.metrics.addr != "" {
		x := metrics.New(f.metrics.options(f.common.limits.groups))
		srv, addr, err := serveMetrics(f.metrics.addr, x)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(stderr, "kwire: metrics on http://%s/metrics\n", addr)
		if f.listening != nil {
			f.listening(addr)
		}
		tap = x
	}
	return aggregate.Run(ctx, &aggregate.Options{Client: opts, Topic: topic, Source: f.from.url, Group: f.group, Tap: tap,
		Text: f.common.textOutput(stdout), Correlate: f.correlateOptions(),
		MaxLateness: f.maxLateness, MaxSkew: f.maxSkew, QuietAfter: f.quietAfter, IdleExit: f.idleExit,
		MaxFrame: f.common.maxFrame, ClockWindow: f.clockWindow, MaxAgents: f.maxAgents, MaxRuns: f.maxRuns,
		// --max-conns: the agents' connections whose ids are remembered
		// (conns_forgotten).
		MaxConns: f.common.limits.conns,
		Stderr:   stderr, Hook: f.hook, Keys: keys}, stdout)
}

// aggregateTopicFix is what to do when the agents' topic does not exist.
const aggregateTopicFix = "check the name, or create it (or start an agent first: kwire live --publish kafka://HOST:PORT/TOPIC --publish-create-topic)"

// legalTopic says whether s is a legal Kafka topic name: 1 to 249 of
// [a-zA-Z0-9._-] (Kafka's Topic.validate). A loop, not the regexp
// ^[a-zA-Z0-9._-]{1,249}$: compiled at start-up, its 249 repetitions were
// a twentieth of every kwire run's CPU, whatever the command.
func legalTopic(s string) bool {
	if len(s) == 0 || len(s) > 249 {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// correlateOptions are the aggregator's correlator options: its graces and
// the tolerance of cross-connection order allow for the agents' skew.
func (f *aggregateFlags) correlateOptions() *correlate.Options {
	co := f.common.correlate()
	co.Hazards.FetchGrace = 2*time.Second + 2*f.maxSkew
	co.Hazards.OrderTolerance = 10*time.Millisecond + 2*f.maxSkew
	return co
}
