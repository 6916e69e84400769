// Package correlate rebuilds Kafka consumer groups from the exchanges of
// package decode, across every connection and broker of the capture(s):
// coordinators, members, generations and their assignments, commits, and
// what each group consumed.
//
// It takes in decode.Exchange values (Correlator.Exchange, synchronously,
// in capture order) and gives out events through a Sink as it learns them
// (GenerationEvent, MemberEvent, CommitEvent, CoordinatorEvent,
// TransactionEvent, ShareGroupEvent, HazardEvent) and, on demand, a Snapshot of the state
// for the final summary and report.
//
// Time comes only from capture timestamps, and every map is iterated in
// sorted order before anything is emitted, so an offline run is
// deterministic.
//
// # What is read from the wire
//
//   - Coordinators: FindCoordinator answers (one key v0-v3, batched v4+),
//     confirmed by the broker that then answers the group's requests;
//     NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE answers are counted.
//   - Classic groups: JoinGroup (session and rebalance timeouts, instance id,
//     subscription; the MEMBER_ID_REQUIRED two-step of KIP-394 counts as one
//     member), SyncGroup (the leader's assignments and each member's own),
//     Heartbeat, LeaveGroup (batched v3+, reasons v5+), DescribeGroups and
//     ListGroups answers. Consumer-protocol metadata and assignments are
//     decoded with kmsg; other protocol types are kept as sizes only.
//   - KIP-848 groups: ConsumerGroupHeartbeat; the member epoch stands for
//     the generation, with each member's reconciled assignment of it (see
//     GenerationEvent). Classic members of a consumer group (a classic
//     group the broker converted when a ConsumerGroupHeartbeat joined it,
//     and back when the last such member left: Conversion) are answered
//     their member epoch as generation, with no leader: their SyncGroup
//     assignments count as a heartbeat's.
//   - Commits: every partition of every OffsetCommit with the broker's
//     answer; OffsetFetch answers give the committed offset the broker has.
//   - Consumption: a Fetch names no group. It is attributed through its
//     client's bindings: client host + client id, bound to a group by any
//     group request of that client, for as long as its member lives, not
//     for the life of one connection (field report 1). A client bound to
//     several groups is ambiguous and is not guessed.
//   - Transactions (KIP-98): InitProducerID, AddPartitionsToTxn,
//     AddOffsetsToTxn, TxnOffsetCommit, EndTxn, transactional Produce
//     (producer id and epoch from batch headers; KIP-890 part 2 adds
//     partitions and groups implicitly), the coordinators' WriteTxnMarkers
//     (the epoch a KIP-890 abort on timeout or fence bumps to, which no
//     client is told) and FindCoordinator key type 1, per transactional id
//     and producer id/epoch (TransactionEvent).
//   - Share groups (KIP-932): ShareGroupHeartbeat (members, epochs and
//     assignments, as for KIP-848 groups), ShareFetch (records acquired
//     under an acquisition lock, with delivery counts; acknowledgements
//     carried on it) and ShareAcknowledge (accept, release, reject,
//     renew), per group and partition (ShareGroupEvent, share.go).
//   - Streams groups (KIP-1071): StreamsGroupHeartbeat (members, epochs,
//     the topology, active, standby and warm-up tasks, the statuses the
//     broker answers with; a member's partitions are its active tasks'
//     source partitions) and StreamsGroupDescribe answers (streams.go). A
//     Kafka Streams application on the classic protocol is a classic group
//     (protocol "stream"); Streams' own user data in its assignments is
//     not decoded.
//
// Topic ids (Fetch v13+, OffsetCommit v10+, KIP-848) are named from Metadata
// responses; until one is, the topic appears as "id:" followed by 32 hex
// digits, and the state is renamed when a Metadata response names it.
//
// # Judgements
//
// A member expires when it sends nothing to the coordinator for its session
// timeout. The capture confirms an expiry when the member is missing from a
// later generation, when the broker answers it UNKNOWN_MEMBER_ID, when it
// stays silent past its rebalance timeout as well (a member waiting in
// JoinGroup is silent that long), or at Close. A generation's cause is the
// earliest join, leave or expiry before it; with none, the same members
// rejoined (metadata_change); and when the capture does not show enough, the
// cause is unknown and says what is missing.
//
// # Hazards
//
// Consumer and producer mistakes that lose or replay data, read from the
// same state (field reports 2, 3 and 4): commits going back, striding over
// records delivered, above what was delivered, refused, or made by a
// member not owning the partition; fetches by such a member; offset
// resets; commits on receive; expiries, late heartbeats, rebalance storms
// and slow rebalances; mixed assignors; weak producer acks; client id
// churn; zombie transactional producers, hanging transactions (no EndTxn,
// or a last stable offset stuck under read_committed consumers), refused
// TxnOffsetCommits and offsets committed in aborted transactions; share
// group records redelivered again and again, and acquisitions whose lock
// ran out unacknowledged. HazardEvent lists the kinds, their severities
// and episodes;
// Options.Hazards their thresholds. Each is judged from the exchanges the
// capture holds: what it does not show is not guessed.
//
// # Bounds
//
// Every table is capped (Options), and Limits counts what a cap cost. Any
// client can name any group, transactional id or partition in a request
// (FindCoordinator, DescribeGroups, ListGroups, OffsetFetch, a commit the
// broker refuses), so a name is not a group: a group is loose until a
// member, a generation or an accepted commit of it is seen, and a full
// table forgets loose groups to make room, never the others (groups.go).
// Transactional ids only named go first likewise.
package correlate
