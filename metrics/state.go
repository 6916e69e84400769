package metrics

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// stateCollector exports the last snapshot and stats handed to it. It
// keeps compact rows, not the snapshot, and builds the metrics when
// scraped.
type stateCollector struct {
	caps       Options // the caps, defaults set
	groupIDs   *tiered // the group label, shared with the events
	topics     *tiered // topic label values, admitted by snapshots
	txnIDs     *tiered // transactional_id label values (txn.go)
	partLabels []string
	descs      map[string]*prometheus.Desc // by family name
	health     *healthCollector
	// lastPacket is LastPacket's time in Unix nanoseconds (0: none);
	// brokersFolded counts broker addresses past the cap.
	lastPacket, brokersFolded atomic.Int64
	mu                        sync.Mutex
	groups                    []groupRow
	members                   []memberRow
	parts                     []partRow
	sums                      []partRow   // per group and topic
	unattr                    []partRow   // per topic (group and partition unused)
	txns                      []txnRow    // transactional ids (txn.go)
	stable                    []stableRow // transactional partitions (txn.go)
	shares                    []shareRow
	cs                        capture.Stats
	ds                        decode.Stats
	cr                        correlate.Stats
	fold                      foldCounts // of the last snapshot
}

type groupRow struct {
	group      string
	members    int
	generation int32
	lagSeconds float64 // the largest of its partitions', -1 unknown
}

// memberRow is one live member: its labels. n is 1, or, for the row of
// the members folded into other, how many.
type memberRow struct {
	group, id, clientID, host, pid, comm string
	n                                    int
}

// partRow is one partition of a group (or, summed, one topic).
type partRow struct {
	group, topic   string
	part           string // partition label value (a number, or other)
	records, bytes int64
	// The offsets are -1 when unknown; committedSum sums the committed
	// offsets known of the partitions summed into the row.
	committed, position, hwm, lag, committedSum int64
	// lagSeconds is -1 when unknown; summed rows keep the largest.
	lagSeconds float64
}

// shareRow is one partition of a share group (or, aggregated, one topic).
type shareRow struct {
	group, topic string
	part         string // partition label value
	counts       correlate.ShareCounts
	held         int64
}

// shareKinds are the kind label values of kwire_share_records_total.
var shareKinds = []string{"acquired", "redelivered", "accepted", "released", "rejected", "renewed", "lock_expired"}

func (r *shareRow) count(kind string) int64 {
	switch kind {
	case "acquired":
		return r.counts.Acquired
	case "redelivered":
		return r.counts.Redelivered
	case "accepted":
		return r.counts.Accepted
	case "released":
		return r.counts.Released
	case "rejected":
		return r.counts.Rejected
	case "renewed":
		return r.counts.Renewed
	}
	return r.counts.LockExpired
}

func newStateCollector(o *Options, groups *tiered) *stateCollector {
	c := &stateCollector{caps: *o, groupIDs: groups, topics: newTiered(o.MaxTopics),
		txnIDs: newTiered(o.MaxTransactionalIDs), descs: map[string]*prometheus.Desc{}, health: newHealthCollector()}
	c.partLabels = partLabels
	if o.NoPartitionLabels {
		c.partLabels = topicLabels
	}
	for _, f := range families {
		labels := f.Labels
		if o.NoPartitionLabels {
			labels = slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return l == "partition" })
		}
		c.descs[f.Name] = desc(f.Name, labels)
	}
	return c
}

// Describe sends nothing: the health metrics are named after the stats
// structs' fields, so the collector is unchecked.
func (c *stateCollector) Describe(chan<- *prometheus.Desc) {}

func (c *stateCollector) snapshot(s *correlate.Snapshot) {
	r := rowMaker{c: c, partsLeft: [2]int{max(c.caps.MaxPartitions/10, 1), c.caps.MaxPartitions},
		membersLeft: c.caps.MaxMembers, topicsFolded: map[string]bool{}}
	groups := make([]groupRow, 0, len(s.Groups))
	for _, i := range realFirst(s.Groups) {
		groups = append(groups, r.group(&s.Groups[i]))
	}
	parts, shares := r.parts, r.shares
	if len(c.partLabels) == 2 {
		shares = sharesByTopic(shares)
		r.fold.partitions = 0 // no partition label to fold
	} else {
		parts = mergeRows(parts, func(p *partRow) [3]string { return [3]string{p.group, p.topic, p.part} }, addPart)
		shares = mergeRows(shares, func(p *shareRow) [3]string { return [3]string{p.group, p.topic, p.part} }, addShare)
	}
	sums := byTopic(parts)
	if len(c.partLabels) == 2 {
		parts = nil
	}
	groups = mergeRows(groups, func(g *groupRow) string { return g.group }, func(into, g *groupRow) {
		into.members += g.members
		into.generation = -1
		into.lagSeconds = max(into.lagSeconds, g.lagSeconds)
	})
	members := mergeRows(r.members, func(m *memberRow) memberRow { k := *m; k.n = 0; return k },
		func(into, m *memberRow) { into.n += m.n })
	var unattr []partRow
	for _, u := range s.Unattributed {
		for _, p := range u.Partitions {
			unattr = append(unattr, partRow{topic: r.topic(p.Topic, p.Records > 0), records: p.Records, bytes: p.Bytes, lag: -1})
		}
	}
	unattr = byTopic(unattr)
	r.fold.topics = len(r.topicsFolded)
	txns, folded := c.txnRows(s)
	r.fold.txns = folded
	stable := c.stableRows(s)
	c.mu.Lock()
	c.groups, c.members, c.parts, c.sums, c.unattr, c.shares, c.cr = groups, members, parts, sums, unattr, shares, s.Stats
	c.txns, c.stable, c.fold = txns, stable, r.fold
	c.mu.Unlock()
}

func val(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

func valFloat(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// byTopic sums rows per group and topic, in order of first appearance:
// records, bytes, lag and committed offsets; the other offsets are
// dropped.
func byTopic(rows []partRow) []partRow {
	out := mergeRows(slices.Clone(rows), func(r *partRow) [2]string { return [2]string{r.group, r.topic} }, addPart)
	for i := range out {
		out[i].part = ""
	}
	return out
}

// sharesByTopic sums share rows per group and topic, in order of first
// appearance (the highest delivery count is the topic's highest).
func sharesByTopic(rows []shareRow) []shareRow {
	return mergeRows(rows, func(r *shareRow) [2]string { return [2]string{r.group, r.topic} }, addShare)
}

func (c *stateCollector) stats(cs capture.Stats, ds decode.Stats) {
	if cs.Live != nil {
		l := *cs.Live
		cs.Live = &l // the caller may reuse it
	}
	c.mu.Lock()
	c.cs, c.ds = cs, ds
	c.mu.Unlock()
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	metric := func(name string, typ prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], typ, v, labels...)
	}
	gauge := func(name string, v float64, labels ...string) { metric(name, prometheus.GaugeValue, v, labels...) }
	count := func(name string, v float64, labels ...string) { metric(name, prometheus.CounterValue, v, labels...) }
	for _, g := range c.groups {
		gauge("kafka_consumergroup_members", float64(g.members), g.group)
		if g.generation >= 0 {
			gauge("kwire_group_generation", float64(g.generation), g.group)
		}
		if g.lagSeconds >= 0 {
			gauge("kafka_consumergroup_lag_seconds_max", g.lagSeconds, g.group)
		}
	}
	for _, m := range c.members {
		gauge("kwire_group_member_info", float64(m.n), m.group, m.id, m.clientID, m.host, m.pid, m.comm)
	}
	for _, p := range c.parts {
		labels := []string{p.group, p.topic, p.part}
		count("kwire_fetch_records_total", float64(p.records), labels...)
		count("kwire_fetch_bytes_total", float64(p.bytes), labels...)
		for _, o := range []struct {
			name string
			v    int64
		}{{"kafka_consumergroup_lag", p.lag}, {"kafka_consumergroup_current_offset", p.committed}, {"kwire_fetch_offset", p.position}} {
			if o.v >= 0 {
				gauge(o.name, float64(o.v), labels...)
			}
		}
		if p.lagSeconds >= 0 {
			gauge("kafka_consumergroup_lag_seconds", p.lagSeconds, labels...)
		}
	}
	for _, p := range c.sums {
		if len(c.partLabels) == 2 {
			count("kwire_fetch_records_total", float64(p.records), p.group, p.topic)
			count("kwire_fetch_bytes_total", float64(p.bytes), p.group, p.topic)
			if p.lagSeconds >= 0 {
				gauge("kafka_consumergroup_lag_seconds", p.lagSeconds, p.group, p.topic)
			}
		}
		if p.lag >= 0 {
			gauge("kafka_consumergroup_lag_sum", float64(p.lag), p.group, p.topic)
		}
		if p.committedSum >= 0 {
			gauge("kafka_consumergroup_current_offset_sum", float64(p.committedSum), p.group, p.topic)
		}
	}
	c.collectEndOffsets(gauge)
	c.collectTxn(gauge, count)
	for _, s := range c.shares {
		labels := []string{s.group, s.topic}
		if len(c.partLabels) == 3 {
			labels = append(labels, s.part)
		}
		for _, kind := range shareKinds {
			count("kwire_share_records_total", float64(s.count(kind)), append(slices.Clone(labels), kind)...)
		}
		gauge("kwire_share_max_delivery_count", float64(s.counts.MaxDeliveryCount), labels...)
		gauge("kwire_share_held_records", float64(s.held), labels...)
	}
	for _, u := range c.unattr {
		count("kwire_unattributed_fetch_records_total", float64(u.records), u.topic)
		count("kwire_unattributed_fetch_bytes_total", float64(u.bytes), u.topic)
	}
	for _, f := range []struct {
		label string
		n     int64
	}{{groupLabel, int64(c.fold.groups)}, {"topic", int64(c.fold.topics)}, {"partition", int64(c.fold.partitions)},
		{"member_id", int64(c.fold.members)}, {"transactional_id", int64(c.fold.txns)}, {"broker", c.brokersFolded.Load()}} {
		gauge("kwire_metrics_label_values_folded", float64(f.n), f.label)
	}
	if t := c.lastPacket.Load(); t != 0 {
		gauge("kwire_last_packet_timestamp_seconds", float64(t)/1e9)
	}
	c.health.collect(ch, statsFields(c.cs, c.ds, c.cr))
}

// collectEndOffsets exports each partition's end offset: the highest
// high watermark of it in the groups' latest Fetch responses (a
// partition's offsets only grow; one group may not have fetched it
// lately). Partitions folded into other have none.
func (c *stateCollector) collectEndOffsets(gauge func(string, float64, ...string)) {
	if len(c.partLabels) == 2 {
		return
	}
	type tp struct{ topic, part string }
	var order []tp
	end := map[tp]int64{}
	for _, p := range c.parts {
		k := tp{p.topic, p.part}
		if p.hwm < 0 || p.topic == other || p.part == other {
			continue
		}
		if v, ok := end[k]; !ok || p.hwm > v {
			if !ok {
				order = append(order, k)
			}
			end[k] = p.hwm
		}
	}
	for _, k := range order {
		gauge("kafka_topic_partition_current_offset", float64(end[k]), k.topic, k.part)
	}
}
