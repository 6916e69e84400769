// Package metrics exports what kwire sees as Prometheus metrics (kwire live
// --metrics ADDR, kwire aggregate --metrics ADDR). Like jsonout it only
// consumes: decoded exchanges and decoder stats, correlator events and
// snapshots, capture stats.
//
// In: Exchange and Event from the pipeline goroutine as they happen;
// Snapshot, Stats and LastPacket whenever the caller takes them (every
// few seconds). Out: an http.Handler serving its own registry (no global
// state), safe to scrape from any goroutine.
//
// Every family is in Families (families.go, health.go) and docs/metrics.md
// lists them all (TestFamiliesDocumented). Where kafka_exporter has the
// concept, the name and labels are its own, so that dashboards made for it
// work: kafka_consumergroup_members, kafka_consumergroup_current_offset
// (committed), kafka_consumergroup_lag and their _sum per topic,
// kafka_topic_partition_current_offset (end offset); the group label is
// consumergroup in every family. What only the wire shows is under kwire_:
// generations, rebalances, member events, commits by outcome,
// coordinators, hazards, records and bytes fetched, share groups,
// transactions; per API and broker (the address of the connection's broker
// side) requests, errors and latency; the health counters of the stats
// line that mean something on a live capture (not those of capture files);
// build info and the time of the latest packet, for staleness alerts.
//
// No label takes a value per consumer restart by default: member ids,
// client ids and processes are only in kwire_group_member_info, with
// Options.MemberInfo. Label values a client chooses are capped
// (Options.MaxGroups, MaxTopics, MaxPartitions, MaxMembers,
// MaxTransactionalIDs, MaxBrokers; caps.go): any client can name any
// group in a FindCoordinator and any partition in a commit the broker
// refuses. Groups seen real (a member, a generation or an accepted commit)
// have their own budget; groups only named get a tenth of it, apart, and
// so do their partition series and topics (a topic of a real group, or
// with records fetched, is real); transactional ids with a producer or a
// transaction likewise. Values keep their label for the run once given
// one. Past a cap, values are exported as "other" (summed; offsets of
// folded partitions left out). kwire_metrics_folded_total counts the
// events counted under consumergroup="other",
// kwire_metrics_label_values_folded (label: consumergroup, topic,
// partition, member_id, transactional_id, broker) the values folded in the
// last state, and Folded says both for kwire to report at its end. A group
// that is itself named "other" shares that series.
package metrics
