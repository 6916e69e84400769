package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// TestHandoffOrderAndCopies feeds a handoff the way the decoder does: one
// Exchange, Anomaly, Conn and byte buffer reused and changed after every
// call. What reaches the other goroutine must be in order and as it was at
// the call, including a Fetch response too big to batch. Messages come
// back for recycling only after the other goroutine is done with them
// (the race detector checks the hand-over too).
func TestHandoffOrderAndCopies(t *testing.T) {
	var got []string
	next := handlerFuncs{
		exchange: func(e *decode.Exchange) {
			resp := e.Resp.(*kmsg.FetchResponse)
			r := resp.Topics[0].Partitions[0].RecordBatches
			got = append(got, fmt.Sprintf("ex %d %s %d×%d", e.CorrelationID, e.Conn.Client, len(r), bytes.Count(r, r[:1])))
			resp.ThrottleMillis = 1 // done with it
		},
		anomaly: func(a *decode.Anomaly) { got = append(got, fmt.Sprintf("an %s %s", a.Kind, a.Conn.Client)) },
	}
	recycled := 0
	recycle := func(req kmsg.Request, resp kmsg.Response) {
		if r := resp.(*kmsg.FetchResponse); r.ThrottleMillis != 1 {
			t.Errorf("a response came back before it was handled")
		}
		if _, ok := req.(*kmsg.FetchRequest); !ok {
			t.Errorf("recycled request %T, want the exchange's *kmsg.FetchRequest", req)
		}
		recycled++
	}
	h := newHandoff(next, recycle)
	conn := &capture.Conn{ID: 1, Client: netip.MustParseAddrPort("10.0.0.1:1000"), Server: netip.MustParseAddrPort("10.0.0.2:9092")}
	var ex decode.Exchange
	var an decode.Anomaly
	buf := make([]byte, 3*handoffHuge)
	var want []string
	for i := range 1000 {
		size := 1 + i%700
		if i == 500 {
			size = len(buf) // bigger than a batch keeps
		}
		fill := byte(i%250 + 1)
		for j := range size {
			buf[j] = fill
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: buf[:size]}}}}
		ex = decode.Exchange{Conn: conn, Key: 1, CorrelationID: int32(i), Req: kmsg.NewPtrFetchRequest(), Resp: resp}
		h.Exchange(&ex)
		want = append(want, fmt.Sprintf("ex %d %s %d×%d", i, conn.Client, size, size))
		if i%97 == 0 {
			an = decode.Anomaly{Kind: decode.AnomalyGap, Conn: conn}
			h.Anomaly(&an)
			want = append(want, fmt.Sprintf("an gap %s", conn.Client))
		}
		clear(buf[:size]) // the decoder reuses its memory...
		ex, an = decode.Exchange{}, decode.Anomaly{}
		conn.Swap() // ...and a connection changes after the call
	}
	h.close()
	// All but the batches still in flight at the end come back.
	if recycled < 1000-handoffBatches*handoffItems {
		t.Errorf("%d of 1000 exchanges recycled, want at least %d", recycled, 1000-handoffBatches*handoffItems)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("item %d: got %q, want %q (%d items, want %d)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("got %d items, want %d", len(got), len(want))
	}
}

// TestHandoffDecodesDeferred: a response the decoder deferred is decoded
// on the handoff's goroutine before next gets it, from a copy of its
// bytes; one that does not decode comes with its anomaly just before it,
// and is counted.
func TestHandoffDecodesDeferred(t *testing.T) {
	var got []string
	next := handlerFuncs{
		exchange: func(e *decode.Exchange) {
			s := fmt.Sprintf("ex %d err=%v", e.CorrelationID, e.RespErr != nil)
			if r, ok := e.Resp.(*kmsg.FetchResponse); ok {
				n := 0
				for _, t := range r.Topics {
					for _, p := range t.Partitions {
						n += len(p.RecordBatches) - bytes.Count(p.RecordBatches, []byte{0xff})
					}
				}
				s += fmt.Sprintf(" session=%d records=%d", r.SessionID, n) // zero bytes: the copy outlived the clear
			}
			got = append(got, s)
		},
		anomaly: func(a *decode.Anomaly) { got = append(got, fmt.Sprintf("an %s %d", a.Kind, a.CorrelationID)) },
	}
	h := newHandoff(next, nil)
	good := kmsg.NewPtrFetchResponse()
	good.SetVersion(4)
	good.SessionID = 77 // not in v4: must read as 0
	body := good.AppendTo(nil)
	big := kmsg.NewPtrFetchResponse() // copied to a buffer of its own
	big.SetVersion(4)
	big.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, handoffOwn)}}}}
	bigBody := big.AppendTo(nil)
	for i := range 300 {
		b := slices.Clone(body)
		if i%7 == 3 {
			b = slices.Clone(bigBody)
		}
		if i%100 == 50 {
			b = b[:len(b)-2] // truncated: a decode error
		}
		ex := decode.Exchange{Key: 1, Version: 4, CorrelationID: int32(i), Response: decode.ResponseSeen, RespBody: b}
		h.Exchange(&ex)
		for j := range b {
			b[j] = 0xff // the decoder's bytes are gone after the call
		}
	}
	h.close()
	records := func(i int) int {
		if i%7 == 3 {
			return handoffOwn
		}
		return 0
	}
	var want []string
	for i := range 300 {
		if i%100 == 50 {
			want = append(want, fmt.Sprintf("an %s %d", decode.AnomalyDecodeError, i), fmt.Sprintf("ex %d err=true", i))
		} else {
			want = append(want, fmt.Sprintf("ex %d err=false session=0 records=%d", i, records(i)))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if h.rd.DecodeErrors != 3 {
		t.Errorf("%d decode errors counted, want 3", h.rd.DecodeErrors)
	}
}

// TestHandoffConnClosed: a connection's end reaches next in order with
// the exchanges around it (the correlator releases a share session's
// records at it), with a copy of the connection, which the capture reuses.
func TestHandoffConnClosed(t *testing.T) {
	var got []string
	next := handlerFuncs{
		exchange: func(e *decode.Exchange) { got = append(got, fmt.Sprintf("ex %d", e.CorrelationID)) },
		anomaly:  func(a *decode.Anomaly) {},
		closed: func(c *capture.Conn, at time.Time, r capture.CloseReason) {
			got = append(got, fmt.Sprintf("close %d %s %s", c.ID, r, at.Format(time.RFC3339)))
		},
	}
	h := newHandoff(next, nil)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var want []string
	for i := range 300 {
		ex := decode.Exchange{Key: 18, CorrelationID: int32(i), Response: decode.ResponseMissing}
		h.Exchange(&ex)
		want = append(want, fmt.Sprintf("ex %d", i))
		if i%50 == 7 {
			c := &capture.Conn{ID: uint64(i)}
			h.ConnClosed(c, at, capture.CloseRST)
			c.ID = 0 // the source's connection is gone after the call
			want = append(want, fmt.Sprintf("close %d rst %s", i, at.Format(time.RFC3339)))
		}
	}
	h.close()
	if !slices.Equal(want, got) {
		t.Errorf("next got %d items:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}
}
