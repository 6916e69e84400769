package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Family is one metric family kwire can export: its name, type (counter,
// gauge or histogram), labels and help. docs/metrics.md lists every one
// (TestFamiliesDocumented).
type Family struct {
	Name, Type string
	Labels     []string
	Help       string
}

// The group's label is kafka_exporter's name for it, so that its
// dashboards and kwire's share a variable; share groups (KIP-932) are
// labelled the same.
const groupLabel = "consumergroup"

var (
	groupLabels = []string{groupLabel}
	partLabels  = []string{groupLabel, "topic", "partition"}
	topicLabels = []string{groupLabel, "topic"}
	// apiLabels label the per-request metrics: the broker is the address
	// the connection's broker side listens on, as captured.
	apiLabels = []string{"api", "broker"}
)

// families are the families other than the health counters (health.go),
// by name. Where kafka_exporter (danielqsj/kafka_exporter) has the same
// concept, the name and labels are its own.
var families = []Family{
	// Consumer groups, as kafka_exporter names them.
	{"kafka_consumergroup_members", "gauge", groupLabels, "Live members of a consumer group, as last seen."},
	{"kafka_consumergroup_current_offset", "gauge", partLabels, "Committed offset of a consumer group's partition (with partition labels)."},
	{"kafka_consumergroup_current_offset_sum", "gauge", topicLabels, "Committed offsets of a consumer group summed over a topic's partitions (those with one)."},
	{"kafka_consumergroup_lag", "gauge", partLabels, "Lag of a consumer group's partition, as the summary's lag field (docs/schema.md) (with partition labels)."},
	{"kafka_consumergroup_lag_sum", "gauge", topicLabels, "Lag of a consumer group summed over a topic's partitions (those with a lag)."},
	{"kafka_consumergroup_lag_seconds", "gauge", partLabels, "Lag of a consumer group's partition in seconds: how long ago the record at its committed offset was made, as the summary's lag_seconds field (docs/schema.md) (with partition labels; the largest over a topic's partitions without)."},
	{"kafka_consumergroup_lag_seconds_max", "gauge", groupLabels, "The largest lag in seconds of a consumer group's partitions."},
	{"kafka_topic_partition_current_offset", "gauge", []string{"topic", "partition"}, "End offset (high watermark) of a partition in the latest Fetch response seen for it (with partition labels)."},

	// Consumer groups, what only the wire shows.
	{"kwire_group_generation", "gauge", groupLabels, "Latest generation of a group (KIP-848: member epoch)."},
	{"kwire_group_member_info", "gauge", []string{groupLabel, "member_id", "client_id", "client_host", "pid", "comm"},
		"A live member of a group (1), with its client and, when the source knows it (eBPF), its process. Only with --metrics-member-info: " +
			"every consumer restart makes new series."},
	{"kwire_rebalances_total", "counter", groupLabels, "Generations of a group completed (each one a rebalance)."},
	{"kwire_member_events_total", "counter", []string{groupLabel, "action"}, "Members joining, leaving or expiring, by group and action."},
	{"kwire_offset_commits_total", "counter", []string{groupLabel, "outcome"}, "Committed partitions, by group and outcome (accepted, rejected, unknown)."},
	{"kwire_coordinator_changes_total", "counter", groupLabels, "Coordinators learned or changed, by group."},
	{"kwire_hazards_total", "counter", []string{groupLabel, "kind", "severity"}, "Hazards detected, by group (empty for a client's or a transaction's), kind and severity."},
	{"kwire_fetch_records_total", "counter", partLabels, "Records in record batches fetched by a group's consumers (batch headers, whole batches)."},
	{"kwire_fetch_bytes_total", "counter", partLabels, "Bytes of record batches fetched by a group's consumers."},
	{"kwire_fetch_offset", "gauge", partLabels, "Fetch offset last asked for by a group's consumer (with partition labels)."},
	{"kwire_unattributed_fetch_records_total", "counter", []string{"topic"}, "Records fetched by consumers kwire could not tie to one group."},
	{"kwire_unattributed_fetch_bytes_total", "counter", []string{"topic"}, "Bytes fetched by consumers kwire could not tie to one group."},
	{"kwire_share_records_total", "counter", append(slices.Clone(partLabels), "kind"), "Records of a share group (KIP-932) by kind: acquired (every delivery), " +
		"redelivered (delivery count above 1), accepted, released, rejected, renewed (acknowledgements the broker took), lock_expired (not " +
		"acknowledged before the acquisition lock ran out)."},
	{"kwire_share_max_delivery_count", "gauge", partLabels, "Highest delivery count of a share group partition's records acquired."},
	{"kwire_share_held_records", "gauge", partLabels, "Records a share group's members hold: acquired, not yet acknowledged, lock not run out."},

	// Transactions (txn.go).
	{"kwire_transactions_total", "counter", []string{"transactional_id", "outcome"}, "Transactions of a transactional id that ended, by outcome: " +
		"committed, aborted (EndTxn, or a new InitProducerID), timed_out (no EndTxn within the transaction timeout)."},
	{"kwire_transaction_fenced_requests_total", "counter", []string{"transactional_id"}, "Requests of fenced instances of a transactional id refused (zombie_producer)."},
	{"kwire_transaction_open", "gauge", []string{"transactional_id"}, "1 while a transactional id has a transaction open, else 0."},
	{"kwire_transaction_open_seconds", "gauge", []string{"transactional_id"}, "Age of a transactional id's open transaction, by capture time."},
	{"kwire_transaction_producer_epoch", "gauge", []string{"transactional_id"}, "Latest producer epoch of a transactional id."},
	{"kwire_last_stable_offset", "gauge", []string{"topic", "partition"}, "Last stable offset of a transactional partition in the last Fetch response with it (with partition labels)."},
	{"kwire_unstable_offsets", "gauge", []string{"topic", "partition"}, "High watermark minus last stable offset of a transactional partition: " +
		"offsets open transactions hold back from read_committed consumers (summed without partition labels)."},
	{"kwire_last_stable_offset_stuck_seconds", "gauge", []string{"topic", "partition"}, "How long a transactional partition's last stable offset " +
		"has stayed below its high watermark unmoved (0 when it is at it; the longest without partition labels)."},
	{"kwire_last_stable_offset_max_stuck_seconds", "gauge", []string{"topic", "partition"}, "The longest a transactional partition's last stable " +
		"offset stayed below its high watermark unmoved."},

	// Requests.
	{"kwire_requests_total", "counter", apiLabels, "Kafka requests decoded, by API and broker."},
	{"kwire_response_errors_total", "counter", append(slices.Clone(apiLabels), "error"), "Responses carrying a Kafka error code (the first one in the response), by API, broker and error."},
	{"kwire_request_latency_seconds", "histogram", apiLabels, "Time from a request's last byte to its response's first byte on the wire, by API and broker " +
		"(responses seen only; a Fetch's includes its long-poll wait, up to the request's max wait)."},

	// kwire itself.
	{"kwire_build_info", "gauge", []string{"version", "revision", "goversion"}, "Always 1: the kwire that exports these metrics (version, commit it was built from, Go version)."},
	{"kwire_last_packet_timestamp_seconds", "gauge", nil, "Capture time of the latest packet (kwire aggregate: of the latest item of any agent), in seconds " +
		"since the Unix epoch; absent before the first."},
	{"kwire_metrics_folded_total", "counter", []string{"label"}, "Events counted under the label value \"other\": their group was past the cap on group label values (--max-groups)."},
	{"kwire_metrics_label_values_folded", "gauge", []string{"label"}, "Values of a label (consumergroup, topic, partition, member_id, transactional_id, broker) " +
		"exported as \"other\" in the last state taken, past the caps on series (--max-groups, --metrics-max-*)."},
}

// Families returns every family kwire can export, its own and the health
// counters, with all their labels (partition labels included; the
// client library's go_*, process_* and promhttp_* families left out).
func Families() []Family {
	out := slices.Clone(families)
	for _, h := range health {
		out = append(out, h.family())
	}
	return out
}

// family returns the family called name of the table; it panics on a name
// not in it, which a test run finds.
func family(name string) *Family {
	for i := range families {
		if families[i].Name == name {
			return &families[i]
		}
	}
	panic("metrics: no family " + name)
}

// desc returns the descriptor of family name with labels (nil: the
// family's own).
func desc(name string, labels []string) *prometheus.Desc {
	f := family(name)
	if labels == nil {
		labels = f.Labels
	}
	return prometheus.NewDesc(name, f.Help, labels, nil)
}
