package metrics

import (
	"reflect"
	"slices"
	"strings"
	"sync"

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
	descs      map[string]*prometheus.Desc // fixed metrics by name
	mu         sync.Mutex
	groups     []groupRow
	members    []memberRow
	parts      []partRow
	unattr     []partRow   // per topic (group and partition unused)
	txns       []txnRow    // transactional ids (txn.go)
	stable     []stableRow // transactional partitions (txn.go)
	shares     []shareRow
	cs         capture.Stats
	ds         decode.Stats
	cr         correlate.Stats
	fold       foldCounts                  // of the last snapshot
	health     map[string]*prometheus.Desc // health metrics, made on first use
}

type groupRow struct {
	group      string
	members    int
	generation int32
}

// memberRow is one live member: its labels. n is 1, or, for the row of
// the members folded into other, how many.
type memberRow struct {
	group, id, clientID, host, pid, comm string
	n                                    int
}

// partRow is one partition of a group (or, aggregated, one topic).
type partRow struct {
	group, topic   string
	part           string // partition label value (a number, or other)
	records, bytes int64
	// The offsets are -1 when unknown.
	committed, position, hwm, lag int64
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

// Health fields that are levels, not counters.
var gauges = map[string]bool{"capture_conns_open": true, "correlate_unresolved_topic_ids": true}

func newStateCollector(o *Options, groups *tiered) *stateCollector {
	c := &stateCollector{caps: *o, groupIDs: groups, topics: newTiered(o.MaxTopics),
		txnIDs: newTiered(o.MaxTransactionalIDs), descs: map[string]*prometheus.Desc{}, health: map[string]*prometheus.Desc{}}
	c.partLabels = []string{"group", "topic", "partition"}
	if o.NoPartitionLabels {
		c.partLabels = c.partLabels[:2]
	}
	def := func(name, help string, labels ...string) {
		c.descs[name] = prometheus.NewDesc("kwire_"+name, help, labels, nil)
	}
	def("group_members", "Live members of a group (as last seen).", "group")
	def("group_member_info", "A live member of a group (1), with its client and, when the source knows it (eBPF), its process.",
		"group", "member_id", "client_id", "client_host", "pid", "comm")
	def("group_generation", "Latest generation of a group (KIP-848: member epoch).", "group")
	def("fetch_records_total", "Records in record batches fetched by a group's consumers (batch headers, whole batches).", c.partLabels...)
	def("fetch_bytes_total", "Bytes of record batches fetched by a group's consumers.", c.partLabels...)
	def("lag", "High watermark minus fetch position (summed over partitions without partition labels).", c.partLabels...)
	def("committed_offset", "Committed offset of a group partition.", c.partLabels...)
	def("fetch_position", "Last fetch offset asked for by a group's consumer.", c.partLabels...)
	def("high_watermark", "High watermark in the last Fetch response for a group partition.", c.partLabels...)
	def("share_records_total", "Records of a share group (KIP-932) by kind: acquired (every delivery), redelivered (delivery "+
		"count above 1), accepted, released, rejected, renewed (acknowledgements the broker took), lock_expired (not "+
		"acknowledged before the acquisition lock ran out).", append(slices.Clone(c.partLabels), "kind")...)
	def("share_max_delivery_count", "Highest delivery count of a share group partition's records acquired.", c.partLabels...)
	def("share_held_records", "Records a share group's members hold: acquired, not yet acknowledged, lock not run out.", c.partLabels...)
	def("unattributed_fetch_records_total", "Records fetched by consumers kwire could not tie to one group.", "topic")
	def("unattributed_fetch_bytes_total", "Bytes fetched by consumers kwire could not tie to one group.", "topic")
	def("metrics_label_values_folded", "Values of a label (group, topic, partition, member_id, transactional_id) exported as \"other\" in the "+
		"last state taken, past the caps on series (kwire live --max-groups, --metrics-max-*).", "label")
	c.defTxn(def)
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
		parts = byTopic(parts)
		shares = sharesByTopic(shares)
		r.fold.partitions = 0 // no partition label to fold
	} else {
		parts = mergeRows(parts, func(p *partRow) [3]string { return [3]string{p.group, p.topic, p.part} }, addPart)
		shares = mergeRows(shares, func(p *shareRow) [3]string { return [3]string{p.group, p.topic, p.part} }, addShare)
	}
	groups = mergeRows(groups, func(g *groupRow) string { return g.group }, func(into, g *groupRow) {
		into.members += g.members
		into.generation = -1
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
	c.groups, c.members, c.parts, c.unattr, c.shares, c.cr = groups, members, parts, unattr, shares, s.Stats
	c.txns, c.stable, c.fold = txns, stable, r.fold
	c.mu.Unlock()
}

func val(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// byTopic sums rows per group and topic, in order of first appearance;
// offsets other than lag are dropped.
func byTopic(rows []partRow) []partRow {
	var out []partRow
	at := map[[2]string]int{}
	for _, r := range rows {
		k := [2]string{r.group, r.topic}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, partRow{group: r.group, topic: r.topic, lag: -1, committed: -1, position: -1, hwm: -1})
			i = len(out) - 1
		}
		o := &out[i]
		o.records += r.records
		o.bytes += r.bytes
		if r.lag >= 0 {
			o.lag = max(o.lag, 0) + r.lag
		}
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
	for _, g := range c.groups {
		ch <- prometheus.MustNewConstMetric(c.descs["group_members"], prometheus.GaugeValue, float64(g.members), g.group)
		if g.generation >= 0 {
			ch <- prometheus.MustNewConstMetric(c.descs["group_generation"], prometheus.GaugeValue, float64(g.generation), g.group)
		}
	}
	for _, m := range c.members {
		ch <- prometheus.MustNewConstMetric(c.descs["group_member_info"], prometheus.GaugeValue, float64(m.n), m.group, m.id, m.clientID, m.host, m.pid, m.comm)
	}
	for _, p := range c.parts {
		labels := []string{p.group, p.topic}
		if len(c.partLabels) == 3 {
			labels = append(labels, p.part)
		}
		ch <- prometheus.MustNewConstMetric(c.descs["fetch_records_total"], prometheus.CounterValue, float64(p.records), labels...)
		ch <- prometheus.MustNewConstMetric(c.descs["fetch_bytes_total"], prometheus.CounterValue, float64(p.bytes), labels...)
		for _, o := range []struct {
			name string
			v    int64
		}{{"lag", p.lag}, {"committed_offset", p.committed}, {"fetch_position", p.position}, {"high_watermark", p.hwm}} {
			if o.v >= 0 {
				ch <- prometheus.MustNewConstMetric(c.descs[o.name], prometheus.GaugeValue, float64(o.v), labels...)
			}
		}
	}
	c.collectTxn(ch)
	for _, s := range c.shares {
		labels := []string{s.group, s.topic}
		if len(c.partLabels) == 3 {
			labels = append(labels, s.part)
		}
		for _, kind := range shareKinds {
			ch <- prometheus.MustNewConstMetric(c.descs["share_records_total"], prometheus.CounterValue, float64(s.count(kind)),
				append(slices.Clone(labels), kind)...)
		}
		ch <- prometheus.MustNewConstMetric(c.descs["share_max_delivery_count"], prometheus.GaugeValue, float64(s.counts.MaxDeliveryCount), labels...)
		ch <- prometheus.MustNewConstMetric(c.descs["share_held_records"], prometheus.GaugeValue, float64(s.held), labels...)
	}
	for _, u := range c.unattr {
		ch <- prometheus.MustNewConstMetric(c.descs["unattributed_fetch_records_total"], prometheus.CounterValue, float64(u.records), u.topic)
		ch <- prometheus.MustNewConstMetric(c.descs["unattributed_fetch_bytes_total"], prometheus.CounterValue, float64(u.bytes), u.topic)
	}
	for _, f := range []struct {
		label string
		n     int
	}{{"group", c.fold.groups}, {"topic", c.fold.topics}, {"partition", c.fold.partitions}, {"member_id", c.fold.members},
		{"transactional_id", c.fold.txns}} {
		ch <- prometheus.MustNewConstMetric(c.descs["metrics_label_values_folded"], prometheus.GaugeValue, float64(f.n), f.label)
	}
	emit := func(name string, v float64) {
		typ, full := prometheus.CounterValue, "kwire_"+name+"_total"
		if gauges[name] {
			typ, full = prometheus.GaugeValue, "kwire_"+name
		}
		d := c.health[name]
		if d == nil {
			section, field, _ := strings.Cut(name, "_")
			d = prometheus.NewDesc(full, "kwire "+section+" stats field "+field+" (see docs/schema.md).", nil, nil)
			c.health[name] = d
		}
		ch <- prometheus.MustNewConstMetric(d, typ, v)
	}
	flatten("capture", reflect.ValueOf(c.cs), emit)
	flatten("decode", reflect.ValueOf(c.ds), emit)
	flatten("correlate", reflect.ValueOf(c.cr), emit)
}

// flatten calls emit for every integer field of the struct v (or pointer
// to one), named prefix_<json name>; nested structs (Stats.Live,
// Stats.Limits) add their fields under the same prefix.
func flatten(prefix string, v reflect.Value, emit func(string, float64)) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			emit(prefix+"_"+name, float64(fv.Int()))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			emit(prefix+"_"+name, float64(fv.Uint()))
		case reflect.Struct, reflect.Pointer:
			flatten(prefix, fv, emit)
		}
	}
}
