// Package burrowcmp runs Burrow, LinkedIn's consumer lag monitor, beside a
// real Kafka cluster (internal/realkafka), for the test that holds kwire's
// lag and consumer health against Burrow's on the same run (issue 41).
//
// It takes in [Options]: the brokers, Burrow's client profile and window
// settings, and where ZooKeeper's jars are (Burrow 1.2.1, Debian's, will
// not start without a ZooKeeper for its notifier lock; Kafka 3.9's lib/
// has one). It gives out a running [Burrow] whose v3 HTTP API answers
// [Burrow.Lag] (a group's evaluation, every partition with its status and
// current lag) and [Burrow.EndOffsets] (the end offsets it last fetched).
//
// Nothing here installs anything: without Burrow (make test-deps) or the
// ZooKeeper jar (make realkafka-deps), [Start] returns [ErrMissing] saying
// which and how to get it.
package burrowcmp
