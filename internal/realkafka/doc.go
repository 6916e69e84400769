// Package realkafka starts a real Apache Kafka cluster (KRaft, from the
// jars `make realkafka-deps` fetches from Maven Central) on loopback and
// records every byte its nodes exchange, for kwire's tests and capture
// generator.
//
// It takes in [Options]: how many nodes (default 3, each a combined
// broker+controller in its own JVM, so one can be SIGKILLed), the listener
// [Layout] ([Shared]: clients and replication on one listener, as many
// clusters run; [Separate]: a listener of its own for inter-broker traffic),
// the Kafka line (4.4.0, or 3.9.2 for older wire versions) and broker
// settings. It gives out a running [Cluster]: client addresses ([Cluster.Addrs]),
// node control ([Cluster.Kill], [Cluster.Restart], [Cluster.Stop]) and a
// [gen.Recorder] holding the traffic as TCP packets, written with
// [Cluster.WritePcapng].
//
// Capture is by relay, not by sniffing, so no privileges are needed: every
// listener of every node (client, inter-broker, controller) has a Go TCP
// relay in front of it, and the address the node advertises (and the
// controller quorum's voter addresses) are the relays', so clients, follower
// fetches, the controller quorum's Raft traffic and broker heartbeats all
// cross a relay. Each relay accepts through internal/gen's tap (the same
// recorder kfake captures use) and copies bytes to the JVM's real listener
// and back; closes and resets from the broker are passed on and recorded as
// the client would see them. Killing a node closes its relays' listeners
// too, so clients get "connection refused", as from a dead host.
//
// Each node lives in <Dir>/node<id>: server.properties, data/, and
// server.log (the JVM's output, logged through java/kafka/log4j2.properties
// with the group coordinator at DEBUG). [StartT] keeps that directory and
// names it in the test log when a test fails.
//
// Nothing here downloads: when java or the jars are missing, [Start] returns
// [ErrMissing] saying what is missing and the command that fixes it;
// [StartT] skips the test with that reason, or fails it when CI=true.
package realkafka
