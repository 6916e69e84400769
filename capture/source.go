package capture

import (
	"context"
	"time"
)

// Source produces chunks. Files reads capture files; Live captures from a
// network interface and produces exactly the same chunks.
type Source interface {
	// Run delivers every chunk to sink, synchronously from the calling
	// goroutine, and returns when the input ends or ctx is done. Every
	// connection seen gets a Close for each direction before Run returns.
	Run(ctx context.Context, sink Sink) error
	// Stats returns the counters so far. It is safe to call from any
	// goroutine; while Run is going it may lag by up to 1024 packets.
	Stats() Stats
}

// Stats counts what a source saw and did. Every packet is counted in
// Packets and, at most once, in one of TCPPackets, SkippedNonIP,
// SkippedNonTCP, Fragments or Undecodable.
type Stats struct {
	// Packets and Bytes count every record read; Bytes is the original
	// (wire) length, not the captured length.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// TCPPackets are the packets decoded down to a TCP header.
	TCPPackets uint64 `json:"tcp_packets"`
	// SkippedNonIP counts frames that carry no IP (ARP, LLC, ...).
	SkippedNonIP uint64 `json:"skipped_non_ip"`
	// SkippedNonTCP counts IP packets of another protocol (UDP, ICMP...).
	SkippedNonTCP uint64 `json:"skipped_non_tcp"`
	// Fragments counts IP fragments; they are not reassembled.
	Fragments uint64 `json:"ip_fragments"`
	// Undecodable counts packets whose link, IP or TCP header is broken or
	// cut short, and packets of an unsupported link type.
	Undecodable uint64 `json:"undecodable"`
	// SnaplenTruncated counts packets captured shorter than they were on
	// the wire (CaptureInfo.CaptureLength < Length).
	SnaplenTruncated uint64 `json:"snaplen_truncated"`
	// Duplicates counts TCP packets dropped as copies of one seen within
	// Options.DedupeWindow (the same packet in two capture files, or on two
	// interfaces of one "any" capture).
	Duplicates uint64 `json:"duplicates"`

	// ConnsSeen counts connections tracked; ConnsOpen those not yet closed
	// in both directions.
	ConnsSeen uint64 `json:"conns_seen"`
	ConnsOpen uint64 `json:"conns_open"`
	// ConnsOverCap counts connections not tracked because MaxConns were
	// open, all of them with payload (distinct connections, remembered up
	// to MaxConns of them); PacketsOverCap counts all their packets.
	ConnsOverCap   uint64 `json:"conns_over_cap"`
	PacketsOverCap uint64 `json:"packets_over_cap"`
	// ConnsEvictedNoData counts connections closed (CloseEvict) to make
	// room for a new one while MaxConns were open: the oldest open ones
	// that had carried no payload (a SYN flood, a port scan). Omitted
	// while zero.
	ConnsEvictedNoData uint64 `json:"conns_evicted_no_data,omitempty"`

	// Gaps and GapBytes count Gap chunks delivered and the bytes they
	// stand for (gaps of unknown size add to Gaps only).
	Gaps     uint64 `json:"gaps"`
	GapBytes uint64 `json:"gap_bytes"`
	// BufferLimitGaps counts gaps forced because out-of-order data hit
	// MaxBufferedPagesPerConn or MaxBufferedPagesTotal (included in Gaps).
	BufferLimitGaps uint64 `json:"buffer_limit_gaps"`
	// OutOfOrder counts segments with data that arrived ahead of the next
	// expected byte and were buffered; Retransmitted counts segments whose
	// data starts before it (wholly or partly seen already).
	OutOfOrder    uint64 `json:"out_of_order"`
	Retransmitted uint64 `json:"retransmitted"`
	// DamagedPackets counts packets dropped because their TCP checksum is
	// wrong on a connection direction whose checksums are otherwise right,
	// where their flags or sequence number would have cut the stream short
	// (a damaged file): only their own bytes are lost, as a gap.
	DamagedPackets uint64 `json:"damaged_packets"`
	// RepairedPackets counts packets of a damaged file set back instead
	// of being skipped or misplaced: one damaged field of their IPv4 or
	// link header, or a TCP data offset no header can have (checksum.go
	// repair), or one damaged word of their TCP header, IPv4 total length
	// or address (tcp_repair.go).
	RepairedPackets uint64 `json:"repaired_packets"`
	// DeliveredBytes counts bytes delivered in Data chunks.
	DeliveredBytes uint64 `json:"delivered_bytes"`

	// FilesRead counts capture files read to their end (or to the record
	// where they were cut short).
	FilesRead int `json:"files_read"`
	// FilesTruncated counts files that end in the middle of a record (a
	// capture killed while writing): the records before it are used.
	FilesTruncated int `json:"files_truncated"`
	// FilesResynced counts files read past damage (a flipped byte in a
	// transferred file): records whose framing cannot be right, skipped
	// with the bytes after them up to the next plausible record, once or
	// more per file (see Files.Damage). FileBytesSkipped counts the bytes
	// skipped so.
	FilesResynced    int    `json:"files_resynced"`
	FileBytesSkipped uint64 `json:"file_bytes_skipped"`
	// OrigLenShort counts records whose original (wire) length is smaller
	// than their captured length, as some capture libraries write them:
	// not damage; read with the captured length, as tshark reads them.
	OrigLenShort uint64 `json:"orig_len_short,omitempty"`

	// TLSStats are the counters of a TLSDecrypter (--tls-keylog), which
	// the caller running one fills in; omitted while zero.
	TLSStats

	// Live holds the counters of a live capture (kernel drops...); nil
	// for capture files.
	Live *LiveStats `json:"live,omitempty"`
	// EBPF holds the counters of an eBPF capture (OpenEBPF); nil otherwise.
	EBPF *EBPFStats `json:"ebpf,omitempty"`
}

// Options tune a source. A nil *Options, or a zero field, means the default.
type Options struct {
	// Ports are the broker ports: a connection with exactly one endpoint
	// on one of them gets that endpoint as Server (RolePort).
	Ports Ports
	// IdleTimeout closes a connection (CloseIdle) after this much capture
	// time without a packet. Default 5 minutes.
	IdleTimeout time.Duration
	// ReorderTimeout is how much capture time a missing segment is waited
	// for before the data after it is delivered behind a Gap. Default 5s.
	ReorderTimeout time.Duration
	// MaxConns caps the connections tracked at once. When it is reached,
	// a packet source (Files, Live) lets a new connection replace the
	// oldest open one that has carried no payload (ConnsEvictedNoData);
	// if every one has, packets of the new connection are dropped and
	// counted (ConnsOverCap). Default 100000.
	MaxConns int
	// MaxBufferedPagesPerConn and MaxBufferedPagesTotal bound the
	// out-of-order data held (pages of 1900 bytes). When a bound is hit
	// the oldest missing bytes are given up on and reported as a Gap.
	// Defaults 4096 (about 8 MB) and 65536 (about 125 MB).
	MaxBufferedPagesPerConn int
	MaxBufferedPagesTotal   int
	// DedupeWindow drops a TCP packet identical to one seen less than this
	// long before (same addresses, ports, seq, ack, flags, length, IPv4 id
	// and TCP timestamp): the same packet captured twice. Default 2s;
	// negative disables.
	DedupeWindow time.Duration
	// ReferenceRead reads pcapng files with pcapgo alone, without the
	// fast reading of plain packet blocks beside it (file_fast.go): to
	// check that the two read the same.
	ReferenceRead bool
	// ReferenceTCP reassembles every segment with gopacket's reassembly
	// alone, without the in-order fast path beside it (tcp_fast.go): to
	// check that the two give the same chunks.
	ReferenceTCP bool
}

const (
	defaultIdleTimeout    = 5 * time.Minute
	defaultReorderTimeout = 5 * time.Second
	defaultMaxConns       = 100000
	defaultPagesPerConn   = 4096
	defaultPagesTotal     = 65536
	defaultDedupeWindow   = 2 * time.Second
)

// withDefaults returns a copy of o with zero (or negative) fields set to
// their defaults; a negative DedupeWindow stays negative: disabled.
func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	setDefault(&r.IdleTimeout, defaultIdleTimeout)
	setDefault(&r.ReorderTimeout, defaultReorderTimeout)
	setDefault(&r.MaxConns, defaultMaxConns)
	setDefault(&r.MaxBufferedPagesPerConn, defaultPagesPerConn)
	setDefault(&r.MaxBufferedPagesTotal, defaultPagesTotal)
	if r.DedupeWindow == 0 {
		r.DedupeWindow = defaultDedupeWindow
	}
	return r
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
