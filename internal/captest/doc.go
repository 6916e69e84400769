// Package captest derives damaged or lossy test inputs from real capture
// files (pcap or pcapng, as internal/gen and tcpdump write them), for tests
// of the stages that must survive them.
//
// It takes a whole capture file as bytes and gives back a new one: DropData
// leaves out TCP data segments, as a lossy capture point would; FlipBytes
// flips bytes anywhere past the file header, as a damaged transfer would.
// Reorder moves TCP segments within their direction, as a loaded host or
// a multi-queue NIC delivers them (FIN or RST before the last data, the
// handshake's ACK after the first data, neighbouring data segments
// swapped), keeping every packet and the timestamps' sequence, and with
// ReorderOptions.Skew delivers one side's packets late, as a tap with one
// feed per direction does (a request after its response). All three
// are deterministic for a given seed, so a failing case can be replayed. ToPcap converts a pcapng capture to pcap, and SpareFraming
// undoes the damage outside packet data: what a perfect resynchronisation
// would leave, the baseline to compare a reader of damaged files with.
// The package is for tests only: it reads whole files into memory.
package captest
