// Package wire is the encoding kwire agents publish to a Kafka topic and
// kwire aggregate reads back (docs/aggregate.md): what the correlator needs
// of one agent's capture, and nothing more.
//
// It takes decoded exchanges and anomalies (decode.Exchange, as
// correlate.Detach leaves them) and counters, and gives Kafka record
// values; Decode gives the same exchanges and anomalies back, such that
// the correlator's output from them is the same as from the originals.
//
// # Format, version 2
//
// One record value is one Batch of one agent. Integers are Go varints
// (zig-zag, encoding/binary) unless said uvarint; a string or byte
// string is a uvarint length and the bytes; a time is a varint of Unix
// nanoseconds, 0 for the zero time.
//
//	batch    = version:byte(2) host:string run:uvarint seq:uvarint item*
//	item     = kind:byte body
//	conn     (kind 16) id:uvarint client:addr server:addr role:byte
//	         start:time flags:byte [pid:uvarint comm:string cgroup:uvarint]
//	         flags: 1 handshake, 2 process present. It declares the next
//	         connection of the batch's table (index 0, 1, ...).
//	addr     = string: netip.AddrPort's binary form (address bytes,
//	         zone, port little-endian)
//	exchange (kind 1) at:at conn:uvarint key:varint version:varint
//	         correlation:varint client_id:sref req_time:near
//	         resp_time:near req_size:varint resp_size:varint state:byte
//	         req_err:string resp_err:string req:body resp:body
//	         not_copied:uvarint (topic:uvarint partition:uvarint)*
//	body     = 0 (none) | 1 (withheld: an API the correlator does not
//	         read; decoded as kmsg's default message) | 2 kmsg:string
//	         (the message re-encoded by kmsg AppendTo at its version)
//	         | 3 compact (Produce, Fetch, OffsetCommit: below)
//	anomaly  (kind 2) at:at conn:uvarint kind:sref dir:byte time:near
//	         bytes:varint key:varint version:varint correlation:varint
//	         detail:string
//	counters (kind 3) at:at json:string (Counters, encoding/json)
//	at       = varint: the item's time minus the previous item's of the
//	         batch (minus 0 for the first)
//	near     = uvarint: 0 for the zero time, else 1 + the zig-zag
//	         difference from the item's at
//	sref     = uvarint: 0 and a string (the batch's string table's next
//	         entry), or 1 + the index of an entry
//
// conn is 0 for none, else 1 + an index into the batch's table. at is the
// agent's capture clock when its decoder gave the item (the latest packet
// time it had read): the aggregator merges agents' items by it.
//
// # Compact bodies
//
// Produce, Fetch and OffsetCommit are most of what an agent publishes;
// they go as the fields the correlator (and jsonout's exchange summaries,
// the TUI's error counts) read, in field order:
//
//	topic        = name:sref id:sref (16 bytes, empty for the zero id)
//	nstring      = 0 (nil) | 1+len:uvarint bytes
//	produce_req  = txn:nstring acks timeout
//	               topics:uvarint (topic partitions:uvarint partition*)*
//	               (a transactional id: each partition followed by its
//	               first batch's producer id and epoch, -1 -1 if none)
//	produce_resp = throttle topics:uvarint (topic partitions:uvarint
//	               (partition error base_offset log_append_time log_start
//	               message:nstring)*)*
//	fetch_req    = replica replica_state_id max_wait min_bytes max_bytes
//	               isolation session_id session_epoch
//	               topics:uvarint (topic partitions:uvarint
//	               (partition fetch_offset)*)*
//	               forgotten:uvarint (topic partitions:uvarint partition*)*
//	fetch_resp   = throttle error session_id topics:uvarint
//	               (topic partitions:uvarint (partition error high_watermark
//	               last_stable log_start preferred_replica
//	               aborted:uvarint (producer first_offset)* batches)*)*
//	commit_req   = group:sref generation member:sref instance:nstring
//	               retention topics:uvarint (topic partitions:uvarint
//	               (partition offset timestamp leader_epoch
//	               metadata:nstring)*)*
//	commit_resp  = throttle topics:uvarint (topic partitions:uvarint
//	               (partition error)*)*
//
// (unnamed fields are varints; aborted is 0 for nil, else 1 + the count).
// Decode gives kmsg messages with these fields and kmsg's defaults in all
// others (a Fetch request's per-partition leader epochs and byte limits,
// rack, cluster id; tagged fields). batches are the record batches of a
// Fetch response partition, reduced to what is read of their headers:
//
//	batches  = 0 (nil) | 1 segment* 3
//	segment  = 2 base:varint size:uvarint attrs:uvarint last_delta:varint
//	           records:varint [producer_id:varint]  (a v2 batch)
//	         | 1 magic:byte base:varint size:uvarint attrs:byte
//	                                                (a v0/v1 message)
//	         | 0 size:uvarint head:string           (anything else)
//
// base is the base offset minus the previous segment's next offset (0 for
// the first); records is the record count minus last_delta+1;
// producer_id is there only for a transactional batch (attrs 0x10): what
// tells a read_committed consumer's aborted batches (KIP-98). Decode puts
// each batch back at its size: its header with these fields (length,
// magic, base offset, attributes, last offset delta, producer id, record
// count; the rest of the header zero) and zeros, so that every header read
// (decode.ScanBatches, the correlator's spans) gives the same counts,
// offsets, bytes and attributes. A cut last batch, or bytes the readers
// do not read as a batch, keep their first 18 bytes at most (raw).
//
// What is never published: record keys and values. Produce requests go
// without their records, Fetch responses with batch header fields only.
// SASL authentication bytes and delegation-token HMACs are dropped by
// decode already and again here: APIs the correlator does not read are
// withheld whole.
//
// # Signed batches, version 3
//
// An agent given a key (kwire live --publish-key-file) publishes version
// 3: the version 2 batch with version byte 3 and a 32-byte tag after its
// last item,
//
//	signed = 3 host:string run:uvarint seq:uvarint item* tag:[32]byte
//	tag    = HMAC-SHA256(key, "kwire agent batch\n" || the bytes before tag)
//
// (sign.go). The tag covers the version byte, host, run, sequence number
// and items; the host selects the key it is verified with (Keyring: a key
// per agent name, or a shared key "*" that any agent may use), so that a
// batch is verified on its own and only the holder of an agent's key
// publishes as that agent. Decode reads version 3 as version 2 without
// checking the tag: Keyring.Verify does, before. Formats 5 and 7 are
// formats 4 and 6 signed the same way.
//
// Compatibility of keys: an aggregator with keys reads only signed
// batches that verify, and drops unsigned ones (counted unverified);
// without keys it reads both (and warns at start-up). Agents can thus be
// given keys before the aggregator, then the aggregator its keyring.
//
// Version 1 (kmsg-encoded Produce, Fetch and OffsetCommit bodies, 61-byte
// batch headers, absolute times, strings and addresses as text) is no
// longer read.
//
// # The agent's build, version 6
//
// Format 6 (7 signed) is format 4 (5 signed: record batch timestamps in
// Fetch response segments and Produce request partitions) with the
// agent's kwire build after the sequence number:
//
//	batch = 6 host:string run:uvarint seq:uvarint
//	        kwire_version:string kwire_commit:string item*
//
// kwire_version is version.Build's Version (a release tag, `git
// describe`, "devel"), kwire_commit its Commit, ending in "-dirty" when
// Modified ("" when unknown). The aggregator lists it per agent in its
// aggregate line. Every later format keeps this header, changing only
// what follows it (format.go).
//
// # Compatibility
//
// The format decides, not the kwire versions: an aggregator reads every
// format up to its own (this one: 2 to 7), from agents of any kwire; an
// agent's batches of a newer format are refused (ErrVersion, a
// VersionError naming the agent and its kwire, read from the header
// above), never misread: the aggregator counts them and says on stderr to
// upgrade it. Hence aggregators first, then agents. A newer format gets a
// new version byte (routed records of kwire aggregate --group use 0x81
// and 0x82, route.go: the instances of a group read both, and write
// 0x82, which an instance of before 0x82 cannot read: upgrade a group's
// instances together).
package wire
