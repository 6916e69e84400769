// Package gen makes kwire's test captures from real Kafka traffic.
//
// It takes in scenarios: Go functions that drive real clients (franz-go kgo,
// sarama) against a real broker implementation (franz-go kfake) on loopback.
// It gives out pcapng captures of exactly the bytes those clients and brokers
// exchanged, plus a truth file per scenario recorded without any kwire code.
//
// The capture is made by a tap, not by sniffing: every broker listener is
// wrapped ([kfake.ListenFn]) and every accepted connection records its Reads
// (client -> broker bytes) and Writes (broker -> client bytes) with the time
// they happened. The tap turns them into faithful TCP/IPv4 packets (handshake,
// MSS-sized segments, seq/ack numbers, ACKs, FIN or RST) so no privileges are
// needed. Packets are held in memory until the scenario is over, so an [Edit]
// can leave some out (a capture that starts mid-stream, lost segments) and the
// truth can say exactly which Kafka frames are still whole in the file.
//
// A [Cluster] is kfake plus taps plus the truth recorder; a [Scenario] is a
// named func(ctx, *Cluster) error in a registry ([Scenarios]); [Run] runs one
// and writes <dir>/<name>.pcapng (and per-broker files) and
// <dir>/<name>.truth.json. Clients can run in a child process ([Cluster.StartChild])
// so that a scenario can SIGKILL or SIGSTOP a group member, and a tapped
// connection can be closed from the broker side ([Conn.Close]). The Apache
// Kafka Java clients run the same way from java/driver ([FindJavaDriver],
// [Cluster.StartJava], [JavaDriver.Start]; built by make java-driver).
package gen
