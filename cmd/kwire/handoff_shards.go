package main

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/route"
)

// With --shards above 1, the handoff's goroutine routes each batch to the
// correlators of route.Shards and writes what they give back, batch by
// batch in order (the correlators run ahead on their own goroutines): an
// item's anomaly or exchange line first, then its events, as a single
// correlator's run writes them.

// shardWriter writes the output of one item of a sharded run.
type shardWriter interface {
	// anomalyLine writes an anomaly's line.
	anomalyLine(a *decode.Anomaly)
	// events writes an item's events.
	events(evs []correlate.Event)
}

// newShardedHandoff is newHandoff correlating over shards, writing with
// out. It holds enough batches for the shards' own in flight and the
// decoder's.
func newShardedHandoff(shards *route.Shards, out shardWriter, recycle func(kmsg.Request, kmsg.Response)) *handoff {
	return startHandoff(&handoff{shards: shards, out: out, recycle: recycle, batches: route.MaxInFlight + handoffBatches})
}

func (h *handoff) runShards() {
	defer close(h.done)
	for {
		var b *handoffBatch
		select {
		case b = <-h.full:
		default:
			// Nothing to route: write what the shards have done, and
			// let its batches go back to the decoder (which may be
			// waiting for all of them, drain).
			h.shards.Flush()
			b = <-h.full
		}
		if b == nil {
			return
		}
		h.route(b)
	}
}

// route hands batch b to the shards.
func (h *handoff) route(b *handoffBatch) {
	b.work, b.from = b.work[:0], b.from[:0]
	for i := range b.items {
		it := &b.items[i]
		switch {
		case it.anomaly:
			b.work = append(b.work, route.Item{Anomaly: &it.an})
		case it.closed:
			b.work = append(b.work, route.Item{Closed: &it.conn, At: it.at, Reason: it.reason})
		default:
			if it.ex.RespBody != nil {
				if an := h.rd.Decode(&it.ex); an != nil {
					a := *an
					b.work = append(b.work, route.Item{Anomaly: &a})
					b.from = append(b.from, -1)
				}
				it.deferred = true
			}
			b.work = append(b.work, route.Item{Exchange: &it.ex})
		}
		b.from = append(b.from, i)
	}
	h.shards.Batch(b.work, func(i int, evs []correlate.Event) { h.writeItem(b, i, evs) }, func() { h.release(b) })
}

// writeItem writes item i of b's work with its events.
func (h *handoff) writeItem(b *handoffBatch, i int, evs []correlate.Event) {
	w := &b.work[i]
	switch {
	case w.Anomaly != nil:
		h.out.anomalyLine(w.Anomaly)
	case w.Exchange != nil:
		h.exchangeLine(&b.items[b.from[i]])
	}
	if len(evs) > 0 {
		h.out.events(evs)
	}
}

// release gives b back to the decoder once written.
func (h *handoff) release(b *handoffBatch) {
	for i := range b.items {
		if it := &b.items[i]; it.deferred {
			h.rd.Recycle(it.ex.Resp)
			it.ex.Resp, it.deferred = nil, false
		}
	}
	clear(b.work)
	b.work = b.work[:0]
	h.free <- b
}
