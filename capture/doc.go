// Package capture turns packet sources into one thing: ordered byte chunks
// per TCP connection and direction, with capture timestamps, gaps and
// closes (see Chunk). Nothing downstream knows where the bytes came from.
//
// In: pcap and pcapng files (Files, several merged by timestamp), or any
// packet source feeding an Assembler frame by frame (link types Ethernet
// with 802.1Q/QinQ tags, Linux cooked SLL and SLL2, BSD loopback, raw
// IPv4/IPv6). Live (AF_PACKET on Linux) produces the same chunks, and so
// does EBPF (socket probes on Linux, bpf/), which also names the process
// owning each connection's client side (Conn.Process), and with
// EBPFOptions.TLS delivers TLS connections' plaintext, read by uprobes on
// the clients' OpenSSL or Go crypto/tls, instead of their ciphertext.
//
// Out: calls to a Sink, synchronously, from one goroutine:
//
//   - Data chunks carry the next bytes of a direction, in stream order;
//     retransmitted bytes are delivered once, out-of-order segments are put
//     back in order.
//   - Gap chunks stand for bytes missing from the capture: Len is their
//     exact count. A lost segment is waited for (Options.ReorderTimeout,
//     buffer limits) before its gap is given; the part of a segment a
//     snaplen cut off is a gap at once, after the part captured.
//   - Close chunks end a direction: FIN, RST (which ends both), idle
//     timeout, end of input, eviction to make room for a new connection
//     (Options.MaxConns). Every connection seen gets a Close for each
//     of its directions before a Source's Run returns.
//
// Each connection is a *Conn with an ID in order of first packet and a
// broker side (Server) decided from the broker ports, the handshake or a
// guess (Role). Offline runs are deterministic: time is capture time, and
// chunks produced by timeouts are delivered in order of connection ID.
//
// DecryptTLS wraps a Sink: TLS connections whose secrets a key log has
// (TLSKeys) go on as plaintext chunks, as if captured in the clear.
//
// Stats counts what was seen, skipped and repaired.
package capture
