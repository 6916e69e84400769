package jsonout

// remedies are what to do about each hazard kind, one line each: the text
// report's "what to do" block. docs/runbook.md says more about each (what
// it means, how to confirm it); a test holds both to correlate.HazardKinds.
var remedies = map[string]string{
	"commit_regression": "find who committed the lower offset (the hazard's member or client); commit only the highest offset " +
		"processed in order, and reset a group's offsets only while it is empty; expect the range to be processed again",
	"commit_gap": "a consumer commits each record as it finishes, out of order: commit the lowest offset not yet processed, " +
		"not the last one that finished; reprocess the missing offsets (reset the group to the first of them)",
	"commit_beyond_fetch": "fix the client's commit arithmetic (it commits offsets it was never delivered: +1 twice, or the high " +
		"watermark); reset the group to the offset it was delivered to, to read the skipped records",
	"commit_rejected": "the member committed after it lost its membership: commit in the partitions-revoked callback, keep " +
		"processing between polls under max.poll.interval.ms, and make processing idempotent for the range replayed",
	"non_owner_commit": "stop the other committer (an admin tool, a second application with the same group.id, a zombie); reset " +
		"offsets with kafka-consumer-groups.sh only while the group is empty",
	"non_owner_fetch": "a member still fetches partitions it no longer owns (a zombie after expiry or revocation): stop processing " +
		"in the partitions-revoked and -lost callbacks; find what held it past its session",
	"offset_reset": "the committed offset was out of range (retention deleted it, or offsets.retention.minutes expired it): keep " +
		"consumers within retention, alert on lag, set auto.offset.reset=none to fail loudly; recover the skipped range from the source",
	"commit_on_receive": "commits cover records delivered moments before: if the application processes records asynchronously, " +
		"commit after processing (enable.auto.commit=false and commit what is done)",
	"member_expired": "a member stopped heartbeating (crash, GC pause, network) or did not rejoin a rebalance in time (a blocked " +
		"poll loop): shorten the work per poll (max.poll.records), raise max.poll.interval.ms, close() consumers on shutdown",
	"heartbeat_late": "heartbeats come too far apart: keep heartbeat.interval.ms at a third of session.timeout.ms at most, and " +
		"find what starves the heartbeat (GC, CPU limits, a handler blocking it)",
	"rebalance_storm": "stop the cause of the expiries first (slow processing against max.poll.interval.ms); use static " +
		"membership (group.instance.id) for restarts and a cooperative assignor",
	"rebalance_slow": "the rebalance waited for a member: make members poll (and so rejoin) promptly; an empty group's first " +
		"rebalance waits group.initial.rebalance.delay.ms on purpose",
	"inconsistent_group_protocol": "members offer assignors with none in common: roll assignor changes out in two steps (offer " +
		"both, then only the new one)",
	"producer_acks_weak": "acknowledged records can be lost when a leader fails: produce with acks=all (enable.idempotence=true) " +
		"and a topic min.insync.replicas of 2 or more",
	"client_id_churn": "a host keeps making new client ids: give each application instance a stable client.id and reuse " +
		"clients instead of creating one per request",
	"acked_records_lost": "a leader failed holding acknowledged records its followers did not have: produce with acks=all " +
		"(enable.idempotence=true) and min.insync.replicas of 2 or more; resend the lost offsets' records from the source",
	"zombie_producer": "an old producer instance still sends after a new one took its transactional.id: stop it (it must close " +
		"on PRODUCER_FENCED, not retry), and give each instance its own transactional.id",
	"hanging_transaction": "read_committed consumers wait behind an open transaction: find its producer (the transactional id), " +
		"restart or fix it; kafka-transactions.sh find-hanging and abort end it on the broker",
	"txn_offset_commit_rejected": "the transaction's offsets were refused: abort it and start again from the committed offset; " +
		"pass the consumer's groupMetadata() to sendOffsetsToTransaction",
	"txn_offsets_aborted": "the transaction holding the group's offsets aborted, so its records are processed again (its output " +
		"was aborted too); if it is frequent, find why transactions abort (timeouts, fencing)",
	"share_redelivery": "records keep coming back (a poison message): find them by offset, fix the handler or reject them " +
		"(acknowledge REJECT) before group.share.delivery.count.limit archives them unprocessed",
	"share_ack_lost": "a member held records past their acquisition lock without acknowledging them: shorten processing or raise " +
		"group.share.record.lock.duration.ms; find the stuck or killed consumer",
	"share_member_died": "a member died (or lost its connection) holding records: they went to another member, so make " +
		"processing idempotent; find why the consumer process ended without close()",
	"consumer_stopped": "the group commits nothing while its partition grows: if it fetches, its commits fail or are disabled " +
		"(check the commit errors and enable.auto.commit); if it only heartbeats, its processing is stuck (take a thread dump); " +
		"if nothing comes from it, restart or replace the consumer",
	"consumer_stalled": "the group commits the same offset again and again while its partition grows: processing is stuck on the " +
		"record at that offset (a poison message, a blocked call); find it, skip or dead-letter it, and alert on lag in seconds",
}

// Remedy is what to do about hazards of kind, in one line ("" for a kind
// kwire does not report).
func Remedy(kind string) string { return remedies[kind] }
