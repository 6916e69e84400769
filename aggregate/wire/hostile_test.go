package wire

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// hostileConn is a connection for the hostile records of tests.
func hostileConn() *capture.Conn {
	return &capture.Conn{ID: 1, Client: netip.MustParseAddrPort("10.0.0.2:40000"), Server: netip.MustParseAddrPort("10.0.0.1:9092")}
}

// fetchBomb is an exchange whose Fetch response's record bytes are size
// bytes that are no batch (a raw segment: published as its size and its
// first bytes), in a response frame of respSize bytes.
func fetchBomb(size, respSize int) *decode.Exchange {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = make([]byte, size) // zeros: never touched, no RSS
	resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{p}}}
	return &decode.Exchange{Conn: hostileConn(), Key: 1, Version: 12, Resp: resp, RespSize: respSize}
}

// TestDecodeHostile: records an agent's encoder writes only when it is
// given what no decoder gives (an item without a connection, record bytes
// larger than their frame or than MaxExpand) are rejected as corrupt, not
// passed on to a correlator that would dereference the connection or
// rebuild the claimed bytes as zeros (issue 39: a 36-byte record
// crash-looped kwire aggregate, a 61-byte one made --group keep 256 MiB).
func TestDecodeHostile(t *testing.T) {
	at := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		add       func(e *Encoder)
		maxExpand int
		wantErr   bool
	}{
		{name: "anomaly without a connection", wantErr: true, add: func(e *Encoder) {
			e.Anomaly(at, &decode.Anomaly{Kind: decode.AnomalyGap, Time: at})
		}},
		{name: "exchange without a connection", wantErr: true, add: func(e *Encoder) {
			e.Exchange(at, &decode.Exchange{Key: 18, Version: 3, ReqTime: at})
		}},
		{name: "records above their frame", wantErr: true, add: func(e *Encoder) {
			e.Exchange(at, fetchBomb(256<<20, 1000))
		}},
		{name: "records above MaxExpand", maxExpand: 1 << 20, wantErr: true, add: func(e *Encoder) {
			e.Exchange(at, fetchBomb(2<<20, 3<<20))
		}},
		{name: "records within both", maxExpand: 1 << 20, add: func(e *Encoder) {
			e.Exchange(at, fetchBomb(1<<20, 1<<20+100))
		}},
		{name: "anomaly with its connection", add: func(e *Encoder) {
			e.Anomaly(at, &decode.Anomaly{Kind: decode.AnomalyGap, Conn: hostileConn(), Time: at})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEncoder(Agent{Host: "h", Run: 1})
			e.Reset(1)
			tt.add(e)
			t.Logf("%d bytes", e.Len())
			for _, opts := range []*Options{{MaxExpand: tt.maxExpand}, {MaxExpand: tt.maxExpand, DeferRecords: true}} {
				b, err := Decode(e.Bytes(), opts)
				if tt.wantErr {
					if !errors.Is(err, ErrCorrupt) {
						t.Errorf("defer %v: Decode gave %v, want ErrCorrupt", opts.DeferRecords, err)
					}
					continue
				}
				if err != nil || len(b.Items) != 1 {
					t.Fatalf("defer %v: Decode gave %v (%v), want the item", opts.DeferRecords, b, err)
				}
			}
		})
	}
}
