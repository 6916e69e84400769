package capture

import (
	"net/netip"
	"time"
)

// Dir is the direction of bytes on a connection, relative to its broker side.
type Dir uint8

const (
	// ToServer is client -> broker (requests).
	ToServer Dir = iota
	// ToClient is broker -> client (responses).
	ToClient
)

func (d Dir) String() string {
	if d == ToServer {
		return "to_server"
	}
	return "to_client"
}

// Role says how a connection's server (broker) side was decided.
type Role uint8

const (
	// RolePort: one endpoint's port is in the user's broker port set.
	RolePort Role = iota
	// RoleSYN: the handshake was seen; the SYN sender is the client.
	RoleSYN
	// RoleGuess: neither; the lower port was taken as the server. Downstream
	// stages may swap the sides (Conn.Swap) when the bytes say otherwise.
	RoleGuess
)

func (r Role) String() string {
	switch r {
	case RolePort:
		return "port"
	case RoleSYN:
		return "syn"
	}
	return "guess"
}

// Conn is one TCP connection. A source allocates it when it sees the first
// packet of the connection and passes the same pointer with every Chunk of it.
type Conn struct {
	// ID is unique within one run, assigned in order of first packet.
	ID uint64
	// Client and Server are the two endpoints; Server is the broker side.
	Client, Server netip.AddrPort
	// Role records how Server was chosen.
	Role Role
	// Start is the capture time of the connection's first packet.
	Start time.Time
	// Handshake is set when the source saw the connection open (SYN), so
	// both directions start at their first byte; otherwise the capture
	// began mid-stream and a stream may start inside a message.
	Handshake bool
	// Ignore may be set by a Sink (during a Chunk call) to tell the source
	// that it wants no more chunks of this connection (not Kafka, TLS...).
	// The source then stops buffering it and delivers only its Close.
	Ignore bool

	// Process describes the local process owning the client side, when the
	// source knows it (eBPF). Nil for packet sources.
	Process *Process

	// swapped flips with every Swap: the only trace of one on a
	// connection from an endpoint to itself (see stream.deliver).
	swapped bool
}

// Process identifies a local process (from eBPF probes).
type Process struct {
	PID      uint32
	Comm     string
	CgroupID uint64
}

// Swap exchanges Client and Server. A Sink calls it when it learns that the
// source's guess (Role == RoleGuess) was wrong; chunk directions delivered
// after the call are relative to the swapped sides (sources compute Dir by
// comparing a packet's source endpoint with Client on every packet).
func (c *Conn) Swap() {
	c.Client, c.Server = c.Server, c.Client
	c.Role = RoleGuess
	c.swapped = !c.swapped
}

// Kind is what a Chunk carries.
type Kind uint8

const (
	// Data carries the next bytes of the stream in order.
	Data Kind = iota
	// Gap says Len bytes of the stream are missing here (lost segments,
	// bytes not copied by a probe). Len < 0 means the size is unknown.
	Gap
	// Close says this direction has ended (see Reason).
	Close
)

// CloseReason says why a direction ended.
type CloseReason uint8

const (
	CloseFIN   CloseReason = iota // orderly FIN
	CloseRST                      // reset
	CloseIdle                     // no packet for longer than the idle timeout (capture time)
	CloseEOF                      // the capture ended with the connection open
	CloseEvict                    // dropped to respect a memory or connection cap
)

func (r CloseReason) String() string {
	return [...]string{"fin", "rst", "idle", "eof", "evict"}[r]
}

// Chunk is one event on one direction of one connection. Chunks of a
// direction arrive in stream order; chunks of different connections and
// directions arrive in capture-time order as far as the source can tell.
type Chunk struct {
	Conn *Conn
	Dir  Dir
	Kind Kind
	// Time is the capture time of the (last) packet that produced the chunk.
	Time time.Time
	// Data holds the bytes (Kind == Data). It is only valid during the
	// Sink call: copy what you keep.
	Data []byte
	// Len is the number of bytes missing (Kind == Gap); -1 if unknown.
	Len int
	// NotCopied marks a Gap of bytes the source chose not to copy (an
	// eBPF probe copies at most --snap bytes per system call): expected,
	// not a loss of the capture.
	NotCopied bool
	// Reason is set when Kind == Close.
	Reason CloseReason
}

// Sink receives chunks. Sources call it synchronously from one goroutine.
type Sink interface {
	Chunk(c *Chunk)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(c *Chunk)

// Chunk calls f(c).
func (f SinkFunc) Chunk(c *Chunk) { f(c) }
