// Package route splits the work of correlating Kafka traffic by consumer
// group: it binds clients to the groups their requests name, as the
// correlator does, and says which of N shards each exchange, anomaly and
// event belongs to. kwire aggregate --group uses it across processes (a
// shard is a partition of the routed topic, docs/aggregate.md, "Several
// aggregators"); Shards uses it across goroutines, to correlate one
// capture on every core with the output of one correlator
// (docs/sharding.md).
//
// It takes decoded exchanges and anomalies (decode) and the correlator's
// events and snapshots (correlate), and gives shard numbers: a Router
// hands each item it is given to the shards whose correlator needs it,
// and the key functions (GroupKey, TxnKey, ClientKey, HostKey, AgentKey,
// EventKey) with Shard say which shard owns a line of output.
//
// The rules, for a client (host + client id):
//
//   - its items go to the shard of every key it was ever bound to
//     (sticky: the correlator's attribution needs the other groups'
//     requests to call a client ambiguous): the groups the correlator
//     binds it to and those of its transactions' offsets, and TxnKey
//     (every transaction, and the partitions' last stable offsets) once
//     it names a transactional id or fetches a transactional partition;
//   - until it is bound to a group they also go to its own key's shard,
//     its home, and what it consumes (Fetch, ListOffsets) to every shard
//     (the group it binds to later needs it); once bound, its home is its
//     first group's shard, and only its Produce requests still go to its
//     own key's (producer_acks_weak);
//   - a client newly bound to a key gets its buffered earlier items sent
//     to that key's shard too (kwire aggregate; Shards buffers none: a
//     shard gets an item in its time or never);
//   - a request naming groups without binding (LeaveGroup,
//     DescribeGroups) goes to those groups' shards too;
//   - its earliest item so far also goes to its host's shard
//     (client_id_churn counts the client ids a host creates);
//   - what teaches everyone (Metadata: topic names and brokers;
//     ListGroups), and the anomalies of connections no exchange named a
//     client of, go to every shard (Router.All for anything else that
//     does, such as a source's counters).
//
// A Router runs on one goroutine; Shard and the key functions are pure.
package route
