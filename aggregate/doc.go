// Package aggregate is kwire aggregate (docs/aggregate.md): it reads what
// several kwire live agents publish to a Kafka topic (package wire, one
// agent per broker host) and correlates it as one capture.
//
// It takes the agents' batches (record values of their topic, read with
// kgo) and gives what kwire analyze gives (jsonout's events, anomalies,
// summary and stats lines) and a final "aggregate" line (Line). Between
// the two:
//
//   - the merge (merge.go) puts every agent's items back into one stream
//     in capture-time order behind a watermark (the least latest clock of
//     the agents still sending, minus Options.MaxLateness), dropping
//     duplicate batches and counting missing ones per agent;
//   - the coverage (cover.go) withholds the expiries and hazards that rest
//     on a silence the aggregator did not capture (the coordinator's host's
//     agent quiet, stopped or restarting), until a later generation
//     confirms them;
//   - with Options.Group, several instances split the work (group.go): each
//     routes part of the agents' topic to the routed topic TOPIC.GROUP by
//     consumer group (router.go, route_stage.go, over package route's
//     binding), and owns some of its partitions, correlating them from
//     their start and writing the lines of the keys they own; a partition
//     changes owner through handover records committed as offset metadata
//     (handover.go, rebalance.go), so that each line is written once.
//
// Run drives it all over kgo; New gives the single aggregator's state
// machine alone, fed by Add and Release. An Aggregator runs on one
// goroutine; Run adds the router's.
package aggregate
