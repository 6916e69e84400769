package decode

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// closeRecorder is a recorder that is also a CloseHandler.
type closeRecorder struct {
	recorder
	closes []string
}

func (r *closeRecorder) ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	r.closes = append(r.closes, fmt.Sprintf("%d %s +%v after %d exchanges", c.ID, reason, at.Sub(t0), len(r.ex)))
}

// TestCloseHandler: a connection ended on the wire (FIN both ways, or RST)
// is reported after its exchanges still awaiting a response; one ended by
// the capture's end, idleness or eviction is not, nor is a half close.
func TestCloseHandler(t *testing.T) {
	tests := []struct {
		name    string
		reasons []capture.CloseReason // one per direction, in order
		want    []string
	}{
		{name: "fin both ways", reasons: []capture.CloseReason{capture.CloseFIN, capture.CloseFIN}, want: []string{"1 fin +2s after 2 exchanges"}},
		{name: "rst", reasons: []capture.CloseReason{capture.CloseRST}, want: []string{"1 rst +1s after 2 exchanges"}},
		{name: "half close", reasons: []capture.CloseReason{capture.CloseFIN}},
		{name: "capture end", reasons: []capture.CloseReason{capture.CloseEOF}},
		{name: "idle", reasons: []capture.CloseReason{capture.CloseIdle}},
		{name: "evicted", reasons: []capture.CloseReason{capture.CloseEvict}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &closeRecorder{}
			d := New(r, nil)
			conn := &capture.Conn{ID: 1, Handshake: true}
			req := kmsg.NewPtrApiVersionsRequest()
			d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Kind: capture.Data, Time: t0,
				Data: cat(reqFrame(req, 3, 1, "c"), reqFrame(kmsg.NewPtrMetadataRequest(), 9, 2, "c"))})
			d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToClient, Kind: capture.Data, Time: t0,
				Data: respFrame(kmsg.NewPtrApiVersionsResponse(), 3, 1)})
			for i, reason := range tc.reasons {
				dir := capture.Dir(i)
				d.Chunk(&capture.Chunk{Conn: conn, Dir: dir, Kind: capture.Close, Reason: reason,
					Time: t0.Add(time.Duration(i+1) * time.Second)})
			}
			if !slices.Equal(r.closes, tc.want) {
				t.Errorf("closes %q, want %q", r.closes, tc.want)
			}
		})
	}
}
