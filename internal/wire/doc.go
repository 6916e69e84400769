// Package wire is the encoding kwire agents publish to a Kafka topic and
// kwire aggregate reads back (docs/aggregate.md): what the correlator needs
// of one agent's capture, and nothing more.
//
// It takes decoded exchanges and anomalies (decode.Exchange, as
// correlate.Detach leaves them) and counters, and gives Kafka record
// values; Decode gives the same exchanges and anomalies back, such that
// the correlator's output from them is the same as from the originals.
//
// # Format, version 1
//
// One record value is one Batch of one agent. Integers are Go varints
// (zig-zag, encoding/binary) unless said uvarint; a string or byte
// string is a uvarint length and the bytes; a time is a varint of Unix
// nanoseconds, 0 for the zero time.
//
//	batch    = version:byte(1) host:string run:uvarint seq:uvarint item*
//	item     = kind:byte body
//	conn     (kind 16) id:uvarint client:string server:string role:byte
//	         start:time flags:byte [pid:uvarint comm:string cgroup:uvarint]
//	         flags: 1 handshake, 2 process present. It declares the next
//	         connection of the batch's table (index 0, 1, ...).
//	exchange (kind 1) at:time conn:uvarint key:varint version:varint
//	         correlation:varint client_id:string req_time:time
//	         resp_time:time req_size:varint resp_size:varint state:byte
//	         req_err:string resp_err:string req:body resp:body
//	         not_copied:uvarint (topic:uvarint partition:uvarint)*
//	         fetch:uvarint (topic:uvarint partition:uvarint
//	         segments:uvarint (size:uvarint head:string)*)*
//	body     = 0 (none) | 1 (withheld: an API the correlator does not
//	         read; decoded as kmsg's default message) | 2 kmsg:string
//	         (the message re-encoded by kmsg AppendTo at its version)
//	anomaly  (kind 2) at:time conn:uvarint kind:string dir:byte time:time
//	         bytes:varint key:varint version:varint correlation:varint
//	         detail:string
//	counters (kind 3) at:time json:string (Counters, encoding/json)
//
// conn is 0 for none, else 1 + an index into the batch's table. at is the
// agent's capture clock when its decoder gave the item (the latest packet
// time it had read): the aggregator merges agents' items by it.
//
// What is never published: record keys and values. Produce requests go
// without their records. A Fetch response's record batches are reduced to
// segments: per batch its size and its header (61 bytes for a v2 batch,
// 18 for a v0/v1 message, 18 at most of a cut last batch); Decode puts
// each header back at its place and zeros in the rest, so that every
// header read (decode.ScanBatches, the correlator's spans) gives the same
// counts, offsets, bytes and attributes. SASL authentication bytes and
// delegation-token HMACs are dropped by decode already and again here:
// APIs the correlator does not read are withheld whole.
//
// A newer format gets a new version byte; Decode rejects versions it does
// not know (ErrVersion), so that an old aggregator says so instead of
// misreading.
package wire
