package capture

import (
	"testing"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// TestPackedPacketRoundTrip: what crosses to the reassembling goroutine
// is the CaptureInfo the reader gave, including a pcapng simple packet
// block's zero time and lengths beyond 2 GiB from a crafted file.
func TestPackedPacketRoundTrip(t *testing.T) {
	for _, ci := range []gopacket.CaptureInfo{
		{Timestamp: time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC), CaptureLength: 1500, Length: 9000, InterfaceIndex: 3},
		{Timestamp: time.Unix(0, 0).UTC(), CaptureLength: 0, Length: 0},
		{CaptureLength: 1<<32 - 1, Length: 1<<32 - 1, InterfaceIndex: 1<<32 - 1}, // zero time
		{Timestamp: time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC), CaptureLength: 60, Length: 60},
	} {
		p := packPacket(layers.LinkTypeLinuxSLL2, &ci, 5, ci.CaptureLength)
		got := p.info()
		if !got.Timestamp.Equal(ci.Timestamp) || got.Timestamp != ci.Timestamp || got.CaptureLength != ci.CaptureLength ||
			got.Length != ci.Length || got.InterfaceIndex != ci.InterfaceIndex || p.lt != layers.LinkTypeLinuxSLL2 || p.off != 5 || p.n != ci.CaptureLength {
			t.Errorf("%+v came back as %+v (link %v, off %d, n %d)", ci, got, p.lt, p.off, p.n)
		}
	}
	if n := unsafe.Sizeof(packedPacket{}); n > 48 {
		t.Errorf("packedPacket is %d bytes, want 48 at most", n)
	}
}
