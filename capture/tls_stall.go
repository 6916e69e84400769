package capture

import "time"

// A followed key log (kwire live) gets a connection's secrets some time
// after its hellos cross the wire: the client appends them as it
// handshakes, and kwire reads them on its next look. Until then the
// connection's bytes cannot be decrypted, while other connections' bytes
// go on; without care its first requests (a JoinGroup, the Metadata that
// names the topics) would reach the decoder after later traffic of other
// connections, and the story would lose or misplace them. So while a
// connection waits, the chunks of every connection queue behind it, in
// arrival order, and go on when its secrets are found or it is given up
// on. The wait is bounded (tlsStallMax, maxTLSStall): a connection whose
// secrets take longer waits alone from then on (counted: tls_keys_late),
// so that a client that writes no key log stalls the others only that long.

const (
	// tlsStallMax is how long (capture or wall time) the chunks of other
	// connections queue behind one waiting for its secrets.
	tlsStallMax = 2 * time.Second
	// maxTLSStall bounds the bytes queued behind a waiting connection.
	maxTLSStall = 32 << 20
	// stallReloadEvery is how often the key log is re-read while chunks
	// queue behind a connection waiting for its secrets.
	stallReloadEvery = 10 * time.Millisecond
)

// queuedChunk is a chunk queued behind a connection waiting for its
// secrets: a copy (heldOf).
type queuedChunk struct {
	conn *Conn
	heldChunk
}

// stallOn makes the chunks after this one queue behind tc, which waits
// for its secrets since t. When the queue already holds its Close (it
// was queued behind another), it looks a last time and is given up on.
func (d *TLSDecrypter) stallOn(tc *tlsConn, t time.Time) {
	d.stall, d.stallSince = tc, t
	for i := d.qhead; i < len(d.queue); i++ {
		if q := &d.queue[i]; q.kind == Close && q.conn == tc.conn {
			tc.ending = true
			break
		}
	}
}

// enqueue keeps a copy of c behind the waiting connection, and lets the
// queue go if it can.
func (d *TLSDecrypter) enqueue(c *Chunk) {
	q := queuedChunk{conn: c.Conn, heldChunk: heldOf(c, absDir(c))}
	d.queueBytes += len(q.data)
	d.queue = append(d.queue, q)
	if c.Kind == Close && c.Conn == d.stall.conn {
		d.stall.ending = true // look a last time, then give up
	}
	d.release(c.Time)
}

// Tick lets the chunks queued behind a connection waiting for its secrets
// go on when their time is up, or its secrets were logged, although no
// chunk arrived: a live capture calls it every second or so with the wall
// clock.
func (d *TLSDecrypter) Tick(now time.Time) {
	if d.stall != nil {
		d.release(now)
	}
}

// release looks the waiting connection's secrets up again; once it is
// decrypted, given up on, or has waited tlsStallMax, the queue goes on
// until it is empty or another connection waits.
func (d *TLSDecrypter) release(now time.Time) {
	for d.stall != nil {
		tc := d.stall
		if tc.state == tlsWaiting {
			tc.advance(now)
		}
		if tc.state == tlsWaiting {
			if now.Sub(d.stallSince) < tlsStallMax && d.queueBytes <= maxTLSStall {
				return
			}
			tc.late = true // it waits alone from now on
		}
		d.stall = nil
		d.drain()
	}
}

// drain passes the queued chunks on in their order until the queue is
// empty or one of them makes a connection wait.
func (d *TLSDecrypter) drain() {
	for d.stall == nil && d.qhead < len(d.queue) {
		q := d.queue[d.qhead]
		d.queue[d.qhead] = queuedChunk{}
		d.qhead++
		d.queueBytes -= len(q.data)
		if c, ok := q.chunk(q.conn); ok {
			d.process(&c)
		}
	}
	switch {
	case d.qhead == len(d.queue):
		d.queue, d.qhead = d.queue[:0], 0
	case d.qhead > len(d.queue)/2:
		n := copy(d.queue, d.queue[d.qhead:])
		clear(d.queue[n:])
		d.queue, d.qhead = d.queue[:n], 0
	}
}
