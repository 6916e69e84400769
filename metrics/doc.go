// Package metrics exports what kwire sees as Prometheus metrics (kwire live
// --metrics ADDR). Like jsonout it only consumes: decoded exchanges and
// decoder stats, correlator events and snapshots, capture stats.
//
// In: Exchange and Event from the pipeline goroutine as they happen;
// Snapshot and Stats whenever the caller takes them (kwire live: every few
// seconds). Out: an http.Handler serving its own registry (no global
// state), safe to scrape from any goroutine.
//
// Metrics, all prefixed kwire_:
//
//   - per API (label api, kmsg's name): requests_total, errors_total
//     (+ error, Kafka's error name), request_latency_seconds (request's
//     last byte to response's first, responses seen only).
//   - per group (label group): group_members (live), group_generation,
//     rebalances_total (completed generations), member_events_total
//     (+ action: joined, left, expired), commits_total (+ outcome),
//     coordinator_changes_total, hazards_total (+ kind, severity).
//   - per group, topic and partition (partition dropped with
//     Options.NoPartitionLabels): fetch_records_total and
//     fetch_bytes_total (what Fetches attributed to the group got: the
//     group label is never empty, see field report 1), and the gauges
//     committed_offset, fetch_position, high_watermark, lag (lag is
//     summed over partitions without partition labels; the offsets are
//     then left out). Fetches no group could be named for are counted in
//     unattributed_fetch_records_total and unattributed_fetch_bytes_total
//     (label topic).
//   - per share group (KIP-932), topic and partition (partition dropped
//     likewise): share_records_total (+ kind: acquired, redelivered,
//     accepted, released, rejected, renewed, lock_expired), and the
//     gauges share_max_delivery_count and share_held_records; member,
//     generation and hazard metrics label share groups by group as any.
//   - health: every counter of capture.Stats (kernel drops, gaps,
//     reassembly limits...) as capture_<name>_total, of decode.Stats
//     (resyncs, decode errors, unmatched responses...) as
//     decode_<name>_total and of correlate.Stats (limits that bit) as
//     correlate_<name>_total, named after their NDJSON fields; the few
//     that are levels (capture_conns_open) are gauges.
//   - the Go runtime and process collectors (go_*, process_*).
//
// Label values a client chooses are capped (Options.MaxGroups, MaxTopics,
// MaxPartitions, MaxMembers, MaxTransactionalIDs; caps.go): any client
// can name any group or transactional id in a FindCoordinator and any
// partition in a commit the broker refuses. Groups seen real (a member, a
// generation or an accepted commit) have their own budget; groups only
// named get a tenth of it, apart, and so do their partition series and
// topics (a topic of a real group, or with records fetched, is real);
// transactional ids with a producer or a transaction likewise. Values
// keep their label for the run once given one. Past a cap, values are exported as "other"
// (summed; offsets of folded partitions left out). metrics_folded_total
// (label group) counts the events counted under group="other",
// metrics_label_values_folded (label: group, topic, partition,
// member_id, transactional_id) the values folded in the last state, and Folded says both
// for kwire live to report at its end. A group that is itself named
// "other" shares that series.
package metrics
