//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"
	"golang.org/x/net/bpf"
)

// Ring geometry. A TPACKET_V3 block holds whole packets, so it must be
// larger than the largest one: 64 KiB GSO segments on loopback and on
// NICs with offloads. A block is handed to user space when it is full or
// blockTimeout after its first packet, which bounds the delay a quiet
// capture adds.
const (
	blockBytes      = 1 << 20
	smallBlockBytes = 256 << 10
	blockTimeout    = 50 * time.Millisecond
	// pollTimeout is the longest Run waits for a packet before it looks
	// at its context and moves the capture clock to the wall clock.
	pollTimeout = 100 * time.Millisecond
)

// Live is a Source capturing from a network interface with a Linux
// AF_PACKET socket and a TPACKET_V3 memory-mapped ring (gopacket's
// afpacket: pure Go, no libpcap, builds with CGO_ENABLED=0). A classic
// BPF program in the kernel passes only TCP to or from the broker ports
// (Options.Ports; every TCP packet when the set is empty), full length.
//
// The socket is SOCK_DGRAM on every interface, "any" included: each
// packet comes from its network header (the kernel's own VLAN untagging
// has already happened), and frames are delivered as raw IP
// (layers.LinkTypeRaw). On a loopback device, where an AF_PACKET socket
// sees every packet twice, only the outgoing copy passes the filter.
//
// Time is the kernel's packet timestamp; while no packet arrives the
// capture clock follows the wall clock, so idle connections are closed
// (Options.IdleTimeout) and reordering timeouts expire on a quiet link.
// When the kernel reports ring drops, reassembly stops waiting for the
// segments it misses (they may be among the dropped): their gaps are
// delivered at once.
type Live struct {
	tp       *afpacket.TPacket
	asm      *Assembler
	opts     LiveOptions
	ports    Ports
	anyPort  bool      // no ports given: every TCP packet is wanted
	userPort bool      // the kernel filter does not test ports: wantRaw does
	attached time.Time // packets stamped earlier may predate the filter
	filter   string
	ran      bool

	kern     [3]uint32 // cumulative socket counters last read
	st       LiveStats // owned by Run's goroutine
	writeErr error
	mu       sync.Mutex
	pub      LiveStats // st as of the last tick
}

// OpenLive opens a packet socket on lo.Interface, sizes its ring and
// attaches the kernel filter. opts (may be nil) tune reassembly as for
// files. It needs CAP_NET_RAW (ErrPermission) and an existing interface
// (ErrNoInterface). Run starts the capture; Close releases a Live that is
// never run.
func OpenLive(lo *LiveOptions, opts *Options) (*Live, error) {
	l := &Live{opts: lo.withDefaults(), asm: NewAssembler(opts, nil)}
	l.ports = l.asm.opts.Ports
	l.anyPort = l.ports.Empty()
	if name := l.opts.Interface; name != "" {
		if _, err := net.InterfaceByName(name); err != nil {
			return nil, fmt.Errorf("%w %q: the interfaces here are %s", ErrNoInterface, name, strings.Join(Interfaces(), ", "))
		}
	}
	block := blockBytes
	if l.opts.RingBytes < 8*blockBytes {
		block = smallBlockBytes
	}
	tp, err := afpacket.NewTPacket(
		afpacket.OptInterface(l.opts.Interface),
		afpacket.OptSocketType(afpacket.SocketDgram),
		afpacket.TPacketVersion3,
		afpacket.OptBlockSize(block),
		afpacket.OptNumBlocks(max(2, (l.opts.RingBytes+block-1)/block)),
		afpacket.OptBlockTimeout(blockTimeout),
		afpacket.OptPollTimeout(pollTimeout),
	)
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("%w: %w", ErrPermission, err)
	case err != nil && strings.Contains(err.Error(), "packet_rx_ring"):
		return nil, fmt.Errorf("capture on %s: the kernel refused a ring of %d MiB (%w): ask for a smaller one", l.Interface(), l.opts.RingBytes>>20, err)
	case err != nil:
		return nil, fmt.Errorf("capture on %s: %w", l.Interface(), err)
	}
	l.tp = tp
	l.attachFilter()
	return l, nil
}

// attachFilter builds and attaches the kernel filter, falling back to a
// TCP-only filter (ports tested in user space) when the port set does not
// fit in one, and to none at all when the kernel refuses it.
func (l *Live) attachFilter() {
	text := filterText(&l.ports)
	ins, err := filterProgram(&l.ports, true)
	if err != nil {
		l.userPort = true
		text = fmt.Sprintf("tcp (%v: ports tested in user space)", err)
		ins, err = filterProgram(&Ports{}, true)
	}
	var raw []bpf.RawInstruction
	if err == nil {
		raw, err = bpf.Assemble(ins)
	}
	if err == nil {
		err = l.tp.SetBPF(raw)
	}
	if err != nil {
		l.userPort = !l.anyPort
		text = fmt.Sprintf("none (%v): every packet is copied to user space and filtered there", err)
	} else {
		text += ", IPv4 and IPv6" + loopbackNote(l.opts.Interface)
	}
	l.filter = text
	l.attached = time.Now()
}

// loopbackNote says what the filter does on loopback devices, for the
// interface captured on: nothing for a device that is not one (a veth or
// an Ethernet card sees each packet once).
func loopbackNote(iface string) string {
	if iface == "" || iface == "any" {
		return "; loopback devices: outgoing copies only"
	}
	if ifi, err := net.InterfaceByName(iface); err == nil && ifi.Flags&net.FlagLoopback != 0 {
		return "; loopback: outgoing copies only"
	}
	return ""
}

// Filter describes the kernel filter in use, or why there is none.
func (l *Live) Filter() string { return l.filter }

// Interface returns the interface captured on ("any" for all).
func (l *Live) Interface() string {
	if l.opts.Interface == "" {
		return "any"
	}
	return l.opts.Interface
}

// Run captures until ctx is done or the socket fails, delivering chunks
// to sink synchronously from the calling goroutine; a sink that
// implements Ticker also gets Tick calls. At the end every connection
// still open gets CloseEOF. It returns ctx.Err() when stopped by ctx,
// joined with a write error of LiveOptions.Write if there was one. Run
// closes the socket; it may be called once.
func (l *Live) Run(ctx context.Context, sink Sink) error {
	if l.ran {
		return errors.New("capture: Live.Run called twice")
	}
	l.ran = true
	defer l.Close()
	idle := &idleCounter{next: sink}
	l.asm.sink = idle
	ticker, _ := sink.(Ticker)
	next := time.Now().Add(l.opts.TickEvery)
	var runErr error
	for n := 1; ; n++ {
		data, ci, err := l.tp.ZeroCopyReadPacketData()
		if err == nil {
			l.packet(data, ci)
			if n%dropCheckEvery == 0 {
				l.checkDrops()
			}
			// The packet's time stands in for the clock: a slow
			// trickle of packets still ticks on time.
			if n%64 != 0 && ci.Timestamp.Before(next) {
				continue
			}
		} else if !errors.Is(err, afpacket.ErrTimeout) && !errors.Is(err, syscall.EINTR) {
			runErr = fmt.Errorf("capture on %s: %w", l.Interface(), err)
			break
		}
		if runErr = ctx.Err(); runErr != nil {
			break
		}
		now := time.Now()
		if err != nil {
			l.asm.Advance(now) // the ring is empty: capture time is now
		}
		if !now.Before(next) {
			next = now.Add(l.opts.TickEvery)
			l.tick(idle)
			if ticker != nil {
				ticker.Tick(now)
			}
		}
	}
	l.asm.Close()
	l.tick(idle)
	if l.writeErr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("write packets: %w (the capture went on without writing)", l.writeErr))
	}
	return runErr
}

// packet filters, saves and reassembles one packet.
func (l *Live) packet(data []byte, ci gopacket.CaptureInfo) {
	if (l.userPort || ci.Timestamp.Before(l.attached)) && !wantRaw(data, &l.ports, l.anyPort) {
		l.st.UserFiltered++
		return
	}
	if w := l.opts.Write; w != nil {
		if l.writeErr == nil {
			l.writeErr = w.WritePacket(layers.LinkTypeRaw, ci, data)
		}
		if l.writeErr == nil {
			l.st.PacketsWritten++
		} else {
			l.st.PacketsNotWritten++
		}
	}
	l.asm.Packet(layers.LinkTypeRaw, data, ci)
}

// dropCheckEvery is how many packets pass between two reads of the
// kernel's drop counter (a system call).
const dropCheckEvery = 256

// checkDrops reads the kernel counters. When the kernel dropped packets
// since the last look, the segments reassembly waits for may be among
// them and will never come: it stops waiting (Options.ReorderTimeout) and
// delivers what it holds behind gaps at once, instead of buffering more.
func (l *Live) checkDrops() {
	_, v3, err := l.tp.SocketStats()
	if err != nil {
		return
	}
	// The socket's counters are 32-bit and cumulative: add the
	// differences, which survive a wrap.
	cur := [3]uint32{uint32(v3.Packets()), uint32(v3.Drops()), uint32(v3.QueueFreezes())}
	drops := uint64(cur[1] - l.kern[1])
	l.st.KernelPackets += uint64(cur[0] - l.kern[0])
	l.st.KernelDrops += drops
	l.st.KernelQueueFreezes += uint64(cur[2] - l.kern[2])
	l.kern = cur
	if drops > 0 {
		l.asm.giveUpWaiting()
	}
}

// giveUpWaiting delivers the data reassembly holds behind missing
// segments now, behind gaps, as if ReorderTimeout had passed.
func (a *Assembler) giveUpWaiting() {
	a.flush(CloseIdle, func() {
		a.asm.FlushWithOptions(reassembly.FlushOptions{T: a.now.Add(time.Nanosecond), TC: a.now.Add(-a.opts.IdleTimeout)})
	})
}

// tick reads the kernel counters, flushes the writer and publishes Stats.
func (l *Live) tick(idle *idleCounter) {
	l.checkDrops()
	l.st.ConnsIdleClosed = idle.n
	if f, ok := l.opts.Write.(interface{ Flush() error }); ok && l.writeErr == nil {
		l.writeErr = f.Flush()
	}
	l.asm.publish()
	l.mu.Lock()
	l.pub = l.st
	l.mu.Unlock()
}

// Stats returns the counters so far, Live included. Safe from any
// goroutine; while Run is going they are as of the last tick (or the last
// 1024 packets for the reassembly counters).
func (l *Live) Stats() Stats {
	s := l.asm.Stats()
	l.mu.Lock()
	ls := l.pub
	l.mu.Unlock()
	s.Live = &ls
	return s
}

// Close closes the socket. Run does it when it returns.
func (l *Live) Close() error {
	if l.tp != nil {
		l.tp.Close()
	}
	return nil
}
