package capture

import (
	"errors"
	"time"
)

// ErrEBPFUnavailable is returned (wrapped, with the reason) by OpenEBPF
// when this system cannot run kwire's probes: not root (CAP_BPF and
// CAP_PERFMON), no kernel BTF, kernel lockdown, a kernel older than 5.8,
// not Linux. A packet capture (OpenLive) is the alternative.
var ErrEBPFUnavailable = errors.New("ebpf capture unavailable")

// EBPFOptions tune an eBPF capture. A nil *EBPFOptions, or a zero field,
// means the default.
type EBPFOptions struct {
	// PID, Comm and CgroupID restrict the capture to one process (thread
	// group id), to processes whose name (the main thread's comm, at most
	// 15 bytes) is Comm, or to one cgroup v2 (its id: the inode number of
	// its directory). All are tested in the kernel.
	PID      uint32
	Comm     string
	CgroupID uint64
	// SnapBytes is the most bytes copied per system call (default 4096,
	// at most 65536). The rest of a call becomes a Gap of known length:
	// Kafka's group-coordination frames are small and arrive whole, the
	// record bytes of big Produce and Fetch frames are left in the kernel.
	SnapBytes int
	// RingBytes is the size of the ring buffer events go through (default
	// 16 MiB, rounded up to a power of two). Events that find it full are
	// dropped and counted (EBPFStats.RingDrops).
	RingBytes int
	// Poll is how often the ring buffer is read (default 5ms). Events are
	// submitted without waking the reader, which is far cheaper for the
	// traced processes than a wake-up per event; the kernel wakes it
	// early when a quarter of the ring is in use.
	Poll time.Duration
	// ReorderWait is how long bytes that arrived ahead of a missing part
	// of their stream wait for it (default 100ms); then the missing part
	// is delivered as a Gap. Parts go missing only when the ring buffer
	// was full; calls on one socket from concurrent threads may arrive out
	// of order by a few events.
	ReorderWait time.Duration
	// TickEvery is how often Run publishes Stats and calls a Sink that
	// implements Ticker (default 1s).
	TickEvery time.Duration
	// TLS adds uprobes on the plaintext side of TLS in client processes
	// (x86-64; the kernel needs CONFIG_UPROBE_EVENTS): OpenSSL's libssl
	// (SSL_read, SSL_write and their _ex variants: librdkafka, kcat) and
	// Go's crypto/tls ((*Conn).Read and Write: franz-go, sarama). Their
	// plaintext is delivered as the connection's bytes, on the same Conn
	// (4-tuple, process) the socket probes give it, and the ciphertext of
	// those connections is counted (EBPFStats.TLSCipherBytes), not
	// delivered. The processes PID and Comm select (every process when
	// neither is set) are looked for at the start and at every tick: their
	// executables and the libssl they map are probed. JVM processes cannot
	// be (Java's TLS is Java code, not a library with symbols): they are
	// skipped and counted; decrypt them with a key log instead.
	TLS bool
	// TLSTargets are more executables or shared libraries to probe with
	// TLS (a Go binary, a libssl.so), for every process that runs them.
	TLSTargets []string
}

// EBPFStats are the counters only an eBPF capture has (Stats.EBPF). The
// kernel's totals (events submitted, dropped) are also in Stats.Live as
// KernelPackets and KernelDrops.
type EBPFStats struct {
	// Events counts ring-buffer events read; KernelEvents those the
	// probes submitted, RingDrops those lost because the ring was full.
	Events       uint64 `json:"events"`
	KernelEvents uint64 `json:"kernel_events"`
	RingDrops    uint64 `json:"ring_drops"`
	// Calls counts the data events (a system call, or an iovec of a
	// vectored one) on sockets of the broker ports, the muted ends of
	// loopback connections included up to their muting; CallBytes the
	// bytes they moved; CopiedBytes those copied to kwire.
	Calls       uint64 `json:"calls"`
	CallBytes   uint64 `json:"call_bytes"`
	CopiedBytes uint64 `json:"copied_bytes"`
	// SnapBytes counts bytes left uncopied by the per-call limit
	// (EBPFOptions.SnapBytes); SendfileBytes those sent by sendfile,
	// which no system-call probe can see. Both become known-size gaps.
	SnapBytes     uint64 `json:"snap_bytes"`
	SendfileBytes uint64 `json:"sendfile_bytes"`
	// UserReadErrors counts buffers the probe could not read (the bytes
	// become a gap); IovTruncated vectored calls with more iovecs than the
	// probe walks (the rest becomes a gap).
	UserReadErrors uint64 `json:"user_read_errors"`
	IovTruncated   uint64 `json:"iov_truncated"`
	// Sockets counts sockets seen; MutedSockets those muted as the other
	// end of a connection already followed (both ends are local, as on
	// loopback: each byte is taken once, from the first socket seen,
	// normally the client's).
	Sockets      uint64 `json:"sockets"`
	MutedSockets uint64 `json:"muted_sockets"`
	// LateEvents counts events whose bytes were already delivered or
	// given up on as a gap, or that came after their connection closed.
	LateEvents uint64 `json:"late_events"`

	// TLS probes (EBPFOptions.TLS). TLSTargets counts the binaries and
	// libraries probed, TLSProbes the uprobes attached in them.
	// TLSCalls counts TLS library calls whose plaintext was delivered,
	// TLSBytes their bytes; TLSNoSocket calls whose socket was never
	// found (their plaintext is lost); TLSCipherBytes the ciphertext the
	// system-call probes saw on those connections and left out, their
	// plaintext being delivered instead.
	TLSTargets     uint64 `json:"tls_targets,omitempty"`
	TLSProbes      uint64 `json:"tls_probes,omitempty"`
	TLSCalls       uint64 `json:"tls_calls,omitempty"`
	TLSBytes       uint64 `json:"tls_bytes,omitempty"`
	TLSNoSocket    uint64 `json:"tls_no_socket,omitempty"`
	TLSCipherBytes uint64 `json:"tls_cipher_bytes,omitempty"`
	// Processes looked at and not probed, by reason: TLSSkippedJVM are
	// JVMs (use a key log), TLSSkippedNoTLS have no TLS library kwire
	// probes (none at all, or statically linked without symbols),
	// TLSSkippedFailed could not be read or probed (gone, a Go older than
	// 1.17, not x86-64; the first reason is in EBPF.TLSReport).
	TLSSkippedJVM    uint64 `json:"tls_skipped_jvm,omitempty"`
	TLSSkippedNoTLS  uint64 `json:"tls_skipped_no_tls,omitempty"`
	TLSSkippedFailed uint64 `json:"tls_skipped_failed,omitempty"`
}

const (
	defaultSnapBytes   = 4096
	maxSnapBytes       = 65536
	defaultEBPFRing    = 16 << 20
	defaultEBPFPoll    = 5 * time.Millisecond
	defaultReorderWait = 100 * time.Millisecond
)

func (o *EBPFOptions) withDefaults() EBPFOptions {
	var r EBPFOptions
	if o != nil {
		r = *o
	}
	setDefault(&r.SnapBytes, defaultSnapBytes)
	r.SnapBytes = min(r.SnapBytes, maxSnapBytes)
	setDefault(&r.RingBytes, defaultEBPFRing)
	ring := 4096
	for ring < r.RingBytes {
		ring <<= 1
	}
	r.RingBytes = ring
	setDefault(&r.Poll, defaultEBPFPoll)
	setDefault(&r.ReorderWait, defaultReorderWait)
	setDefault(&r.TickEvery, defaultTickEvery)
	return r
}
