package main

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/route"
)

// handoff is a decode.Handler that runs the handler after it (correlate
// and output) on a goroutine of its own, so that an offline analysis uses
// both cores: the decoder's goroutine reassembles and decodes while this
// one correlates. Exchanges and anomalies reach next in exactly the order
// the decoder produced them, so the output is the same as without it.
//
// What the decoder hands over is only valid during its call: each exchange
// is copied with its connection as it was then, and the byte slices the
// Correlator reads are copied into the batch's arena (correlate.Detach).
// Batches are recycled, and so are the kmsg messages: when the decoder's
// goroutine takes a processed batch back, it returns their messages to
// the decoder. At steady state only large response bodies (handoffOwn)
// are allocated.
//
// The decoder leaves Produce and Fetch responses undecoded
// (decode.Options.DeferResponses): their bodies are copied whole, and this
// goroutine decodes them (decode.ResponseDecoder) just before next gets
// them, so that the two goroutines share the work more evenly.
//
// kwire read's exchange lines are made and written on this goroutine too,
// just before the exchange is correlated (lines), so that they come before
// the events the exchange gives, as without a handoff. Of what a line
// shows, only a Produce request's record batches are not carried over
// (Detach drops them): the decoder's goroutine summarises them
// (decode.ScanProduce) while they are there.
type handoff struct {
	next       decode.Handler
	format     func([]byte, *decode.Exchange, []decode.Batches) []byte // see lines
	write      func([]byte)
	line       []byte                            // format's, on the run goroutine
	recycle    func(kmsg.Request, kmsg.Response) // may be nil
	rd         *decode.ResponseDecoder           // of the run goroutine
	cur        *handoffBatch
	full, free chan *handoffBatch
	done       chan struct{}
	batches    int // in flight at most
	// shards, when set, correlates in place of next (handoff_shards.go);
	// out writes each item's lines and events.
	shards *route.Shards
	out    shardWriter
}

// Batching: a batch goes over when it holds handoffItems items or
// handoffArena bytes; handoffBatches are in flight at most. A response
// body of handoffOwn bytes or more is copied into a buffer of its own, let
// go once correlated, so that the arenas kept for reuse stay small: kept
// arenas that grew with the largest responses made memory grow with the
// length of a capture. An arena that grew past handoffKeep anyway (large
// group metadata) is not kept. An exchange of more than handoffHuge bytes
// is correlated before the next is copied.
const (
	handoffItems   = 128
	handoffArena   = 256 << 10
	handoffOwn     = 64 << 10
	handoffKeep    = 2 * handoffArena
	handoffHuge    = 2 << 20
	handoffBatches = 4
)

type handoffBatch struct {
	items []handoffItem
	arena []byte
	own   int // bytes in the items' own buffers
	// work and from are the items as given to shards, and the index in
	// items of each (-1: an anomaly of a deferred response's decoding).
	work []route.Item
	from []int
}

type handoffItem struct {
	ex      decode.Exchange
	produce []decode.Batches // with format: the Produce request's batches
	an      decode.Anomaly
	conn    capture.Conn
	anomaly bool
	// deferred: its response was decoded on the run goroutine, to be
	// recycled there (handoff_shards.go).
	deferred bool
	// closed: the item is a connection's end (decode.CloseHandler) at
	// at, for reason; conn is the connection.
	closed bool
	at     time.Time
	reason capture.CloseReason
}

// handlerFuncs adapts two functions to a decode.Handler.
type handlerFuncs struct {
	exchange func(*decode.Exchange)
	anomaly  func(*decode.Anomaly)
	closed   func(*capture.Conn, time.Time, capture.CloseReason) // may be nil
}

func (h handlerFuncs) Exchange(e *decode.Exchange) { h.exchange(e) }
func (h handlerFuncs) Anomaly(a *decode.Anomaly)   { h.anomaly(a) }

// ConnClosed implements decode.CloseHandler.
func (h handlerFuncs) ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	if h.closed != nil {
		h.closed(c, at, reason)
	}
}

// newHandoff starts the goroutine calling next. close must be called.
// recycle, if not nil, gets every exchange's messages back once next is
// done with them (decode.Decoder.Recycle), on the caller's goroutine.
func newHandoff(next decode.Handler, recycle func(kmsg.Request, kmsg.Response)) *handoff {
	return startHandoff(&handoff{next: next, recycle: recycle, batches: handoffBatches})
}

func startHandoff(h *handoff) *handoff {
	h.rd, h.full, h.free, h.done = decode.NewResponseDecoder(), make(chan *handoffBatch, h.batches),
		make(chan *handoffBatch, h.batches), make(chan struct{})
	for range h.batches {
		h.free <- &handoffBatch{} // made on first use (take)
	}
	if h.shards != nil {
		go h.runShards()
	} else {
		go h.run()
	}
	return h
}

func (h *handoff) run() {
	defer close(h.done)
	for b := range h.full {
		for i := range b.items {
			it := &b.items[i]
			if it.anomaly {
				h.next.Anomaly(&it.an)
				continue
			}
			if it.closed {
				if ch, ok := h.next.(decode.CloseHandler); ok {
					ch.ConnClosed(&it.conn, it.at, it.reason)
				}
				continue
			}
			// A response the decoder left for this goroutine
			// (decode.Options.DeferResponses).
			deferred := it.ex.RespBody != nil
			if deferred {
				if an := h.rd.Decode(&it.ex); an != nil {
					h.next.Anomaly(an)
				}
			}
			h.exchangeLine(it)
			h.next.Exchange(&it.ex)
			if deferred {
				h.rd.Recycle(it.ex.Resp)
				it.ex.Resp = nil
			}
		}
		h.free <- b
	}
}

// exchangeLine makes and writes the exchange line of it, when lines
// asked for them.
func (h *handoff) exchangeLine(it *handoffItem) {
	if h.write == nil {
		return
	}
	h.line = h.format(h.line[:0], &it.ex, it.produce)
	h.write(h.line)
	if cap(h.line) > handoffKeep {
		h.line = nil // one huge line (a Metadata of many topics) is not kept
	}
}

// lines has each exchange's output line made with format and written with
// write, on the run goroutine, just before next gets the exchange. format
// gets the summaries of a Produce request's batches (its records are
// dropped by then). Call it before the first exchange.
func (h *handoff) lines(format func([]byte, *decode.Exchange, []decode.Batches) []byte, write func([]byte)) {
	h.format, h.write = format, write
}

// take returns a free batch, emptied: its messages go back to the
// decoder (recycle), on the decoder's goroutine.
func (h *handoff) take() *handoffBatch {
	b := <-h.free
	for i := range b.items {
		it := &b.items[i]
		if !it.anomaly && !it.closed && h.recycle != nil {
			h.recycle(it.ex.Req, it.ex.Resp)
		}
		*it = handoffItem{produce: it.produce[:0]} // drop references to messages and processes
	}
	b.items, b.own = b.items[:0], 0
	if cap(b.arena) > handoffKeep {
		b.arena = nil
	}
	b.arena = b.arena[:0]
	return b
}

// item returns the next free item of the current batch.
//
// A batch's items are made when it is first filled, and its arena grows
// as it is: made up front, the four batches were 2.3 MB, which alone took
// a small capture's heap past the garbage collector's first goal (4 MB),
// and the one collection that followed (scanning the binary's globals,
// faulting their pages in) was a fifth of the run's CPU.
func (h *handoff) item() *handoffItem {
	if h.cur == nil {
		h.cur = h.take()
	}
	b := h.cur
	if b.items == nil {
		b.items = make([]handoffItem, 0, handoffItems)
	}
	b.items = b.items[:len(b.items)+1]
	return &b.items[len(b.items)-1]
}

// sent passes the current batch on when it is full.
func (h *handoff) sent() {
	if b := h.cur; len(b.items) == cap(b.items) || len(b.arena)+b.own >= handoffArena {
		h.flush()
	}
}

func (h *handoff) flush() {
	if h.cur != nil && len(h.cur.items) > 0 {
		h.full <- h.cur
		h.cur = nil
	}
}

// snapshot points *conn at a copy of c, or nil.
func snapshot(conn **capture.Conn, c *capture.Conn, into *capture.Conn) {
	if c != nil {
		*into = *c
		*conn = into
	}
}

// Exchange implements decode.Handler.
func (h *handoff) Exchange(e *decode.Exchange) {
	it := h.item()
	it.ex = *e
	snapshot(&it.ex.Conn, e.Conn, &it.conn)
	if len(e.RecordsNotCopied) > 0 {
		it.ex.RecordsNotCopied = slices.Clone(e.RecordsNotCopied)
	}
	if r, ok := e.Req.(*kmsg.ProduceRequest); ok && h.format != nil {
		it.produce = decode.ScanProduce(r, it.produce) // before Detach drops the records
	}
	b := h.cur
	n := len(b.arena)
	b.arena = correlate.Detach(&it.ex, b.arena)
	size := len(b.arena) - n
	switch body := e.RespBody; {
	case body == nil:
	case len(body) >= handoffOwn:
		it.ex.RespBody = slices.Clone(body)
		b.own += len(body)
		size += len(body)
	default:
		n := len(b.arena)
		b.arena = append(b.arena, body...)
		it.ex.RespBody = b.arena[n:len(b.arena):len(b.arena)]
		if it.ex.RespBody == nil {
			it.ex.RespBody = []byte{} // empty, still to be decoded (and to fail)
		}
		size += len(body)
	}
	if size > handoffHuge {
		// A huge exchange (a Fetch response of many MB): wait until it
		// is correlated, so that no more than one copy of such bytes is
		// held at a time, however many batches are in flight.
		h.flush()
		h.drain()
		return
	}
	h.sent()
}

// drain waits until next has had every batch sent.
func (h *handoff) drain() {
	held := make([]*handoffBatch, h.batches)
	for i := range held {
		held[i] = h.take() // and let go of the huge arena
	}
	for _, b := range held {
		h.free <- b
	}
}

// Anomaly implements decode.Handler.
func (h *handoff) Anomaly(a *decode.Anomaly) {
	it := h.item()
	it.anomaly, it.an = true, *a
	snapshot(&it.an.Conn, a.Conn, &it.conn)
	h.sent()
}

// ConnClosed implements decode.CloseHandler: the end goes after the
// exchanges handed over before it, in order.
func (h *handoff) ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	it := h.item()
	it.closed, it.at, it.reason, it.conn = true, at, reason, *c
	h.sent()
}

// close hands over what is left and waits until next has had it all.
func (h *handoff) close() {
	h.flush()
	close(h.full)
	<-h.done
}
