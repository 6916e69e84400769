package capture

import (
	"errors"
	"net"
	"sort"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Errors of OpenLive. They wrap the system error, when there is one.
var (
	// ErrPermission: opening a packet socket needs CAP_NET_RAW.
	ErrPermission = errors.New("live capture needs CAP_NET_RAW")
	// ErrNoInterface: the interface named does not exist; the error text
	// lists the ones that do.
	ErrNoInterface = errors.New("no such network interface")
	// ErrNotSupported: live capture is built on Linux AF_PACKET sockets.
	ErrNotSupported = errors.New("live capture needs Linux (AF_PACKET)")
)

// LiveOptions tune a live capture. A nil *LiveOptions, or a zero field,
// means the default.
type LiveOptions struct {
	// Interface is the network interface to capture on; "" or "any"
	// captures on all of them.
	Interface string
	// RingBytes is the size of the memory-mapped ring the kernel writes
	// packets into (default 64 MiB). Packets that arrive while it is full
	// are dropped by the kernel and counted (LiveStats.KernelDrops): make
	// it larger on a busy broker.
	RingBytes int
	// TickEvery is how often Run polls the kernel counters, publishes
	// Stats and calls a Sink that implements Ticker (default 1s).
	TickEvery time.Duration
	// Write, when set, is given every packet passed to reassembly, in
	// capture order, from Run's goroutine (kwire live -w). A write error
	// stops the writing, not the capture: Run returns it at the end.
	Write PacketWriter
}

// PacketWriter saves captured packets. Data is only valid during the call.
// If it also has a Flush() error method, Run calls it every TickEvery and
// at the end.
type PacketWriter interface {
	WritePacket(lt layers.LinkType, ci gopacket.CaptureInfo, data []byte) error
}

// Ticker is implemented by a Sink that wants to hear about time passing
// during a live capture, even when no packet arrives: Run calls Tick from
// its own goroutine (between chunks, never during one) every
// LiveOptions.TickEvery, with the wall-clock time. Live consumers write
// periodic stats and publish state there.
type Ticker interface {
	Tick(now time.Time)
}

// LiveStats are the counters only a live capture has (Stats.Live).
type LiveStats struct {
	// KernelPackets counts packets the kernel filter let through to the
	// ring, KernelDrops among them those dropped because the ring was
	// full (lost: they show up downstream as gaps); KernelQueueFreezes
	// counts the times the ring filled up.
	KernelPackets      uint64 `json:"kernel_packets"`
	KernelDrops        uint64 `json:"kernel_drops"`
	KernelQueueFreezes uint64 `json:"kernel_queue_freezes"`
	// UserFiltered counts packets dropped in user space by the port
	// filter: queued before the kernel filter was attached, or all the
	// non-Kafka ones when the kernel filter could not test ports.
	UserFiltered uint64 `json:"user_filtered"`
	// ConnsIdleClosed counts connections closed (and their state freed)
	// after Options.IdleTimeout without a packet.
	ConnsIdleClosed uint64 `json:"conns_idle_closed"`
	// PacketsWritten counts packets saved by LiveOptions.Write;
	// PacketsNotWritten those not saved after it failed.
	PacketsWritten    uint64 `json:"packets_written"`
	PacketsNotWritten uint64 `json:"packets_not_written"`
}

const (
	defaultRingBytes = 64 << 20
	defaultTickEvery = time.Second
)

func (o *LiveOptions) withDefaults() LiveOptions {
	var r LiveOptions
	if o != nil {
		r = *o
	}
	if r.Interface == "any" {
		r.Interface = ""
	}
	setDefault(&r.RingBytes, defaultRingBytes)
	setDefault(&r.TickEvery, defaultTickEvery)
	return r
}

// Interfaces returns the names a live capture accepts: "any" and the
// system's network interfaces, sorted.
func Interfaces() []string {
	ifs, _ := net.Interfaces()
	names := []string{"any"}
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	sort.Strings(names[1:])
	return names
}

// idleCounter passes chunks on and counts connections closed for being
// idle (a flush delivers both directions of a connection together).
type idleCounter struct {
	next Sink
	last uint64 // ID of the last connection counted
	n    uint64
}

func (c *idleCounter) Chunk(ch *Chunk) {
	if ch.Kind == Close && ch.Reason == CloseIdle && ch.Conn.ID != c.last {
		c.last = ch.Conn.ID
		c.n++
	}
	c.next.Chunk(ch)
}
