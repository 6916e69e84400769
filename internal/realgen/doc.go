// Package realgen makes kwire's real-Kafka test captures (issue 37): it
// runs scenarios of Apache Kafka's own Java client (java/driver, through
// [gen.JavaDriver]) against a real 3-node Kafka 4.4.0 cluster
// ([realkafka.Cluster], every listener relayed and recorded) and writes,
// per scenario, <name>.pcapng and <name>.truth.json into a directory. A
// scenario may ask for the separate listener layout (inter-broker traffic
// on a listener of its own) and for the 3.9.2 line, whose scenarios run
// the 3.9.2 Java clients and read their truth with 3.9's own tools.
//
// The truth is the broker's, never kwire's: after the capture is written,
// the cluster's __consumer_offsets log is read with Kafka's own formatters
// (kafka-tools' ConsoleConsumer with OffsetsMessageFormatter and
// GroupMetadataMessageFormatter): every accepted commit and every group
// metadata record (generation, protocol, leader, members and their
// assignments); the KIP-848 records (group epochs, members, target and
// current assignments) through the same CoordinatorRecordMessageFormatter
// with every record type allowed (GroupRecords.java, run in Java's
// source-file mode). Transactions are read from __transaction_state with
// TransactionLogMessageFormatter (every state change: producer id and
// epoch, state, partitions), with the coordinators' "due to timeout"
// rollback log lines. A scenario may add its own (Scenario.Truth): a
// partition's records read back from the broker with their offsets and
// the producers' keys (the acknowledged records a log lost), the
// committed offsets and log bounds the Admin client gave before a
// consumer started (its offset reset). Beside it are the coordinators' log lines ("Stabilized
// group ... generation N"), the Java clients' reports (member ids,
// generations, owned partitions, commits) and the relayed ports kwire
// must be told (--port).
//
// [Run] runs one [Scenario]; [Scenarios] lists them. `make real-captures`
// (kwire-gen -real -out testdata/real) regenerates the committed ones; the
// test in this package compares kwire analyze on the committed captures
// with their truth and needs neither Java nor Kafka.
package realgen
