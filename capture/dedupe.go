package capture

import (
	"encoding/binary"
	"time"
)

// The dedupe table's size: a copy is caught if fewer than about this many
// packets come between it and the original. Copies from merged files (two
// hosts' captures of one connection) are apart by the clocks' skew:
// mergeSlots covers milliseconds at millions of packets per second. Copies
// within one capture (an "any" capture, a mirror port) come next to each
// other: oneSlots, whose 64 KiB table stays in cache (the large one cost
// 12% of kwire analyze's time on the 1 GB benchmark capture, in cache
// misses).
const (
	oneSlots   = 1 << 12
	mergeSlots = 1 << 16
)

// dedupe remembers fingerprints of recent TCP packets to drop copies of
// the same packet: captured on two hosts and merged, or on two interfaces
// of one "any" capture. A real retransmission differs from its original in
// the IPv4 id or the TCP timestamp, so it is not dropped.
//
// The table is direct-mapped and never grows; the hash is fixed, so runs
// are deterministic.
type dedupe struct {
	window int64 // nanoseconds
	slots  []dedupeSlot
}

type dedupeSlot struct {
	fp uint64
	t  int64
}

func newDedupe(window time.Duration, slots int) *dedupe {
	return &dedupe{window: int64(window), slots: make([]dedupeSlot, slots)}
}

// seen reports whether the packet in d is a copy of one seen within the
// window, and remembers it otherwise.
func (x *dedupe) seen(d *decoder, ts time.Time) bool {
	fp := fingerprint(d)
	t := ts.UnixNano()
	s := &x.slots[fp&uint64(len(x.slots)-1)]
	if s.fp == fp && s.t != 0 {
		if dt := t - s.t; dt <= x.window && dt >= -x.window {
			return true
		}
	}
	s.fp, s.t = fp, t
	return false
}

// fingerprint hashes what identifies one packet on the wire.
func fingerprint(d *decoder) uint64 {
	t := &d.tcp
	h := uint64(0x9e3779b97f4a7c15)
	h = mixBytes(h, d.src)
	h = mixBytes(h, d.dst)
	flags := uint64(0)
	if len(t.Contents) > 13 {
		flags = uint64(t.Contents[13])
	}
	h = mix(h, uint64(t.SrcPort)<<48|uint64(t.DstPort)<<32|uint64(d.ipID)<<16|flags)
	h = mix(h, uint64(t.Seq)<<32|uint64(t.Ack))
	h = mix(h, uint64(len(t.Payload))<<32|uint64(d.tsval()))
	return h
}

func mixBytes(h uint64, b []byte) uint64 {
	for len(b) >= 8 {
		h = mix(h, binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) >= 4 {
		h = mix(h, uint64(binary.LittleEndian.Uint32(b)))
	}
	return h
}

// mix folds v into h (a multiply-xorshift round, as in splitmix64).
func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return h
}
