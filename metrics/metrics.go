package metrics

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// Options tune an Exporter. A nil *Options means the defaults.
type Options struct {
	// NoPartitionLabels aggregates the per-partition metrics per group
	// and topic, to keep label cardinality down on large clusters.
	NoPartitionLabels bool
	// MemberInfo exports kwire_group_member_info, one series per live
	// member with its member id: every consumer restart makes new ones.
	MemberInfo bool
	// LatencyBuckets are the request latency histogram's upper bounds,
	// in seconds (default 0.5 ms to 30 s, for Fetch long polls).
	LatencyBuckets []float64
	// The caps on label values (caps.go); zero means the default. Values
	// past a cap are exported as "other".
	//
	// MaxGroups caps the group label's values of groups seen real
	// (members, a generation or an accepted commit; default 10000, as
	// correlate.Options.MaxGroups); groups only named in requests get a
	// tenth of it, apart.
	MaxGroups int
	// MaxTopics caps the topic label's values (default 10000).
	MaxTopics int
	// MaxPartitions caps the partition rows of the per-partition metrics
	// of real groups (default 50000); groups only named get a tenth of
	// it, apart.
	MaxPartitions int
	// MaxMembers caps the rows of group_member_info (default 20000).
	MaxMembers int
	// MaxTransactionalIDs caps the transactional_id label's values of
	// ids with a producer or a transaction (default 10000); ids only
	// named in FindCoordinator answers get a tenth of it, apart.
	MaxTransactionalIDs int
	// MaxBrokers caps the broker label's values (default 1000): one per
	// broker address requests went to.
	MaxBrokers int
}

var defaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Exporter holds the metrics. Exchange and Event must be called from one
// goroutine (the pipeline's); Snapshot, Stats and LastPacket from any one
// goroutine; Handler serves from any.
type Exporter struct {
	opts Options
	reg  *prometheus.Registry

	requests, errors *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	// byAPI caches the children of an API key and broker address;
	// brokers decides the broker label.
	byAPI         map[apiBroker]*apiMetrics
	errByKey      map[apiError]prometheus.Counter
	brokers       labelSet
	brokersFolded map[netip.AddrPort]struct{}

	rebalances, memberEvents, commits, coordinators, hazards *prometheus.CounterVec
	// labels decides the group label of events and state alike; folded
	// counts the events counted under group="other".
	labels      *tiered
	folded      prometheus.Counter
	foldedCount atomic.Int64 // folded's value, for Folded

	state *stateCollector
}

type apiBroker struct {
	key    int16
	broker netip.AddrPort
}

type apiError struct {
	apiBroker
	code int16
}

// apiMetrics are one API key's children at one broker, looked up once.
type apiMetrics struct {
	key         apiBroker // broker foldedBroker past the cap
	api, broker string    // label values
	requests    prometheus.Counter
	latency     prometheus.Observer
}

// New returns an Exporter with its own registry. opts may be nil.
func New(opts *Options) *Exporter {
	x := &Exporter{reg: prometheus.NewRegistry(), byAPI: map[apiBroker]*apiMetrics{}, errByKey: map[apiError]prometheus.Counter{},
		brokersFolded: map[netip.AddrPort]struct{}{}}
	if opts != nil {
		x.opts = *opts
	}
	if len(x.opts.LatencyBuckets) == 0 {
		x.opts.LatencyBuckets = defaultBuckets
	}
	for _, c := range []struct {
		v   *int
		def int
	}{{&x.opts.MaxGroups, defaultMaxGroups}, {&x.opts.MaxTopics, defaultMaxTopics},
		{&x.opts.MaxPartitions, defaultMaxPartitions}, {&x.opts.MaxMembers, defaultMaxMembers},
		{&x.opts.MaxTransactionalIDs, defaultMaxTxnIDs}, {&x.opts.MaxBrokers, defaultMaxBrokers}} {
		if *c.v <= 0 {
			*c.v = c.def
		}
	}
	x.labels = newTiered(x.opts.MaxGroups)
	x.brokers = newLabelSet(x.opts.MaxBrokers)
	counter := func(name string) *prometheus.CounterVec {
		f := family(name)
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: f.Help}, f.Labels)
	}
	x.requests = counter("kwire_requests_total")
	x.errors = counter("kwire_response_errors_total")
	lf := family("kwire_request_latency_seconds")
	x.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: lf.Name, Help: lf.Help, Buckets: x.opts.LatencyBuckets}, lf.Labels)
	x.rebalances = counter("kwire_rebalances_total")
	x.memberEvents = counter("kwire_member_events_total")
	x.commits = counter("kwire_offset_commits_total")
	x.coordinators = counter("kwire_coordinator_changes_total")
	x.hazards = counter("kwire_hazards_total")
	folded := counter("kwire_metrics_folded_total")
	x.folded = folded.WithLabelValues(groupLabel)
	x.state = newStateCollector(&x.opts, x.labels)
	x.reg.MustRegister(x.requests, x.errors, x.latency, x.rebalances, x.memberEvents, x.commits, x.coordinators, x.hazards, folded, x.state, newBuildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return x
}

// Registry returns the registry the metrics are in.
func (x *Exporter) Registry() *prometheus.Registry { return x.reg }

// Handler serves the metrics in the Prometheus text (or OpenMetrics)
// format.
func (x *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(x.reg, promhttp.HandlerOpts{Registry: x.reg, EnableOpenMetrics: true})
}

// Exchange counts one exchange: its request, its error, its latency, by
// API and broker. It implements decode.Handler's Exchange; e is only read
// during the call.
func (x *Exporter) Exchange(e *decode.Exchange) {
	var server netip.AddrPort
	if e.Conn != nil {
		server = e.Conn.Server
	}
	m := x.api(apiBroker{e.Key, server})
	m.requests.Inc()
	if e.Response != decode.ResponseSeen || e.Resp == nil {
		return
	}
	if d := e.Latency(); d >= 0 {
		m.latency.Observe(d.Seconds())
	}
	if code := decode.ErrorCode(e.Resp); code != 0 {
		k := apiError{m.key, code}
		c := x.errByKey[k]
		if c == nil {
			c = x.errors.WithLabelValues(m.api, m.broker, errName(code))
			x.errByKey[k] = c
		}
		c.Inc()
	}
}

// api returns the children of k, made on first use. Past the cap on
// brokers, further addresses share the broker="other" children.
func (x *Exporter) api(k apiBroker) *apiMetrics {
	if m := x.byAPI[k]; m != nil {
		return m
	}
	broker := ""
	if k.broker.IsValid() {
		broker = k.broker.String()
	}
	if !x.brokers.admit(broker) {
		if len(x.brokersFolded) < x.opts.MaxBrokers { // a count that saturates
			x.brokersFolded[k.broker] = struct{}{}
			x.state.brokersFolded.Store(int64(len(x.brokersFolded)))
		}
		k.broker, broker = foldedBroker, other
		if m := x.byAPI[k]; m != nil {
			return m
		}
	}
	m := &apiMetrics{key: k, api: apiName(k.key), broker: broker}
	m.requests, m.latency = x.requests.WithLabelValues(m.api, broker), x.latency.WithLabelValues(m.api, broker)
	x.byAPI[k] = m
	return m
}

// foldedBroker keys the children of the brokers past the cap: no broker
// listens on port 0.
var foldedBroker = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)

// Event counts one correlator event. It implements correlate.Sink. Events
// are told apart by Type(), so kinds added to correlate later (hazards)
// are counted without a change here: a "hazard" event's group, kind and
// severity are read from its JSON form.
func (x *Exporter) Event(ev correlate.Event) {
	switch ev.Type() {
	case "generation":
		if e, ok := ev.(*correlate.GenerationEvent); ok {
			x.rebalances.WithLabelValues(x.group(e.Group, true)).Inc()
		}
	case "member":
		if e, ok := ev.(*correlate.MemberEvent); ok {
			x.memberEvents.WithLabelValues(x.group(e.Group, true), e.Action).Inc()
		}
	case "commit":
		if e, ok := ev.(*correlate.CommitEvent); ok {
			// A commit the broker refused only names its group.
			x.commits.WithLabelValues(x.group(e.Group, e.Outcome == correlate.CommitAccepted), e.Outcome).Inc()
		}
	case "coordinator":
		if e, ok := ev.(*correlate.CoordinatorEvent); ok {
			x.coordinators.WithLabelValues(x.group(e.Group, false)).Inc()
		}
	case "hazard":
		var h struct{ Group, Kind, Severity string }
		if e, ok := ev.(*correlate.HazardEvent); ok {
			// correlate's own, read directly: a commit refused for
			// 100,000 partitions makes as many hazards.
			h.Group, h.Kind, h.Severity = e.Group, e.Kind, e.Severity
		} else if b, err := json.Marshal(ev); err != nil || json.Unmarshal(b, &h) != nil {
			return
		}
		x.hazards.WithLabelValues(x.group(h.Group, false), orUnknown(h.Kind), orUnknown(h.Severity)).Inc()
	}
}

// group returns the group label of an event of group, which shows the
// group real (a member, a generation, an accepted commit) or only names
// it, and counts it when folded.
func (x *Exporter) group(group string, real bool) string {
	if group == "" {
		return "" // a hazard of no group (a transaction's, a client's)
	}
	l, folded := x.labels.label(group, real)
	if folded {
		x.folded.Inc()
		x.foldedCount.Add(1)
	}
	return l
}

// Folded says what the caps on label values folded into "other" (the
// values of the last Snapshot, the events so far), for kwire live to
// report at its end; "" when nothing was.
func (x *Exporter) Folded() string {
	x.state.mu.Lock()
	f := x.state.fold
	x.state.mu.Unlock()
	n, brokers := x.foldedCount.Load(), x.state.brokersFolded.Load()
	if f == (foldCounts{}) && n == 0 && brokers == 0 {
		return ""
	}
	return fmt.Sprintf("metrics: past their caps (--max-groups, --metrics-max-*), %d groups, %d topics, %d partitions, %d members, "+
		"%d transactional ids and %d brokers were exported as \"other\" in the last state, and %d events of groups counted under consumergroup=\"other\"",
		f.groups, f.topics, f.partitions, f.members, f.txns, brokers, n)
}

// Snapshot replaces the group, partition and consumption state exported
// with the correlator's state in s. s is only read during the call.
func (x *Exporter) Snapshot(s *correlate.Snapshot) { x.state.snapshot(s) }

// Stats replaces the capture and decoder health counters exported
// (health.go). The correlator's counters come with Snapshot.
func (x *Exporter) Stats(cs capture.Stats, ds decode.Stats) { x.state.stats(cs, ds) }

// LastPacket sets the capture time of the latest packet, which
// kwire_last_packet_timestamp_seconds exports (a zero t: none yet).
func (x *Exporter) LastPacket(t time.Time) {
	if !t.IsZero() {
		x.state.lastPacket.Store(t.UnixNano())
	}
}

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return fmt.Sprintf("Unknown(%d)", key)
}

func errName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return fmt.Sprintf("UNKNOWN_%d", code)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
