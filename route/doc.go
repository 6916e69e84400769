// Package route splits the work of correlating Kafka traffic by consumer
// group: it binds clients to the groups their requests name, as the
// correlator does, and says which of N shards each exchange, anomaly and
// event belongs to. kwire aggregate --group uses it across processes (a
// shard is a partition of the routed topic, docs/aggregate.md, "Several
// aggregators"); the same rules split one capture between correlators.
//
// It takes decoded exchanges and anomalies (decode) and the correlator's
// events and snapshots (correlate), and gives shard numbers: a Router
// hands each item it is given to the shards whose correlator needs it,
// and the key functions (GroupKey, ClientKey, HostKey, AgentKey, EventKey)
// with Shard say which shard owns a line of output. It knows nothing of
// how items travel between shards.
//
// The rules, for a client (host + client id):
//
//   - its items go to its own key's shard and to the shard of every group
//     it was ever bound to (sticky: the correlator's attribution needs the
//     other groups' requests to call a client ambiguous); a client newly
//     bound to a group gets its buffered earlier items sent to that
//     group's shard too;
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
