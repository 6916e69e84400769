package gen

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// recorder holds every packet of a cluster's taps in time order. One mutex
// serializes all recording, so packet timestamps are strictly increasing
// across connections and the written capture needs no sorting.
type recorder struct {
	mss   int
	chunk int
	rate  int // bytes per second per connection and direction; 0: no limit
	// encrypted: the tapped bytes are TLS records (Options.Encrypted),
	// not Kafka frames: nothing is framed.
	encrypted bool

	mu      sync.Mutex
	last    time.Time
	packets []*Packet
	conns   []*Conn
	onFrame []func(*Conn, Dir, Frame)
}

// now returns time.Now, nudged forward so no two packets share a time.
// Called with mu held.
func (r *recorder) now() time.Time {
	t := time.Now()
	if !t.After(r.last) {
		t = r.last.Add(time.Nanosecond)
	}
	r.last = t
	return t
}

// pace holds a relaying goroutine for as long as n bytes take at the
// configured rate, like a slower link would.
func (r *recorder) pace(n int) {
	if r.rate > 0 {
		time.Sleep(time.Duration(int64(n) * int64(time.Second) / int64(r.rate)))
	}
}

// listener wraps one broker's listener so that every accepted connection is
// tapped.
type listener struct {
	net.Listener
	r    *recorder
	node int32
}

func (l *listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: nc, c: l.r.open(nc, l.node)}, nil
}

// Conn is one client connection to a broker, as seen by that broker's tap.
type Conn struct {
	// ID numbers connections in accept order across the cluster.
	ID int
	// Node is the broker (kfake node id) that accepted the connection.
	Node int32
	// Client is the client's address, Server the broker's listen address.
	Client, Server netip.AddrPort

	r       *recorder
	nc      net.Conn
	closing atomic.Bool // Close was called: errors after it are ours
	once    sync.Once
	done    chan struct{}

	// Guarded by r.mu.
	isn      [2]uint32
	sent     [2]int64
	ipID     [2]uint16
	fin      [2]bool
	dead     bool
	closedBy string
	framers  [2]*framer
	inflight map[int32][]Frame // requests by correlation id, awaiting a response
}

func (r *recorder) open(nc net.Conn, node int32) *Conn {
	c := &Conn{
		Node:     node,
		Client:   addrPort(nc.RemoteAddr()),
		Server:   addrPort(nc.LocalAddr()),
		r:        r,
		nc:       nc,
		done:     make(chan struct{}),
		isn:      [2]uint32{rand.Uint32(), rand.Uint32()},
		ipID:     [2]uint16{uint16(rand.Uint32()), uint16(rand.Uint32())},
		framers:  [2]*framer{{dir: ToServer, broken: r.encrypted}, {dir: ToClient, broken: r.encrypted}},
		inflight: map[int32][]Frame{},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.ID = len(r.conns)
	r.conns = append(r.conns, c)
	r.emit(c, ToServer, SYN, nil)
	r.emit(c, ToClient, SYN|ACK, nil)
	r.emit(c, ToServer, ACK, nil)
	return c
}

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// seq is the next sequence number in dir. Called with r.mu held.
func (c *Conn) seq(d Dir) uint32 {
	s := c.isn[d] + 1 + uint32(c.sent[d])
	if c.fin[d] {
		s++
	}
	return s
}

// emit appends one packet. Called with r.mu held.
func (r *recorder) emit(c *Conn, d Dir, f Flags, payload []byte) *Packet {
	p := &Packet{Time: r.now(), Conn: c, Dir: d, Flags: f, Off: c.sent[d], Payload: payload, ipID: c.ipID[d]}
	c.ipID[d]++
	if f&SYN != 0 {
		p.Seq = c.isn[d]
	} else {
		p.Seq = c.seq(d)
	}
	if f&ACK != 0 {
		p.Ack = c.seq(d.other())
	}
	r.packets = append(r.packets, p)
	return p
}

// data records one burst of bytes relayed in direction d: MSS-sized
// segments, PSH on the last, then an ACK from the other side.
func (r *recorder) data(c *Conn, d Dir, b []byte) {
	r.mu.Lock()
	if c.fin[d] || c.dead {
		r.mu.Unlock()
		return
	}
	fr := c.framers[d]
	before := len(fr.frames)
	b = append([]byte(nil), b...)
	for len(b) > 0 {
		n := min(r.mss, len(b))
		f := ACK
		if n == len(b) {
			f |= PSH
		}
		p := r.emit(c, d, f, b[:n:n])
		fr.feed(b[:n], p.Time)
		c.sent[d] += int64(n)
		b = b[n:]
	}
	if d == ToClient && c.fin[ToServer] {
		// Kafka clients close both ways at once (never a half-close):
		// the client's kernel answers bytes that reach a closed socket
		// with a bare RST, and the broker's socket, reset, sends no FIN
		// of its own. A TLS broker's close_notify after the client's
		// does this on every such close.
		r.emit(c, ToServer, RST, nil)
		c.dead = true
		if c.closedBy == "" {
			c.closedBy = "client"
		}
		close(c.done)
	} else {
		r.emit(c, d.other(), ACK, nil)
	}
	for i := before; i < len(fr.frames); i++ {
		c.match(d, &fr.frames[i])
	}
	var fresh []Frame
	if len(r.onFrame) > 0 && len(fr.frames) > before {
		fresh = append(fresh, fr.frames[before:]...)
	}
	fns := r.onFrame
	r.mu.Unlock()
	for _, f := range fresh {
		for _, fn := range fns {
			fn(c, d, f)
		}
	}
}

// match remembers a request's key and version by correlation id and gives
// them to the response that carries the same id: brokers answer on the
// connection the request came in on. Called with r.mu held.
func (c *Conn) match(d Dir, f *Frame) {
	if d == ToServer {
		if f.Key >= 0 {
			c.inflight[f.CorrelationID] = append(c.inflight[f.CorrelationID], *f)
		}
		return
	}
	q := c.inflight[f.CorrelationID]
	if len(q) == 0 {
		return
	}
	f.Key, f.Version, f.API = q[0].Key, q[0].Version, q[0].API
	if len(q) == 1 {
		delete(c.inflight, f.CorrelationID)
	} else {
		c.inflight[f.CorrelationID] = q[1:]
	}
}

// fin records a FIN from d and the other side's ACK.
func (r *recorder) fin(c *Conn, d Dir, by string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finLocked(c, d, by)
}

func (r *recorder) finLocked(c *Conn, d Dir, by string) {
	if c.fin[d] || c.dead {
		return
	}
	r.emit(c, d, FIN|ACK, nil)
	c.fin[d] = true
	r.emit(c, d.other(), ACK, nil)
	if c.closedBy == "" {
		c.closedBy = by
	}
	if c.fin[ToServer] && c.fin[ToClient] {
		c.dead = true
		close(c.done)
	}
}

// rst records a reset sent from d.
func (r *recorder) rst(c *Conn, d Dir) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.dead {
		return
	}
	r.emit(c, d, RST|ACK, nil)
	c.dead = true
	if c.closedBy == "" {
		c.closedBy = "reset by " + map[Dir]string{ToServer: "client", ToClient: "server"}[d]
	}
	close(c.done)
}

// Close closes the connection from the broker side, as a broker restart or
// an idle-connection reaper would: the tap records the broker's FIN, then
// the client's FIN (a client closes its socket when it reads EOF). kfake
// notices on its next read or write. Safe to call more than once and
// concurrently with traffic.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		c.closing.Store(true)
		c.r.mu.Lock()
		c.r.finLocked(c, ToClient, "server")
		c.r.finLocked(c, ToServer, "server")
		c.r.mu.Unlock()
		err = c.nc.Close()
	})
	return err
}

// Done is closed when the connection is over in the capture (both FINs, or
// a RST).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Requests returns how many complete requests with key the client has sent
// on this connection so far.
func (c *Conn) Requests(key int16) int {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	n := 0
	for _, f := range c.framers[ToServer].frames {
		if f.Key == key {
			n++
		}
	}
	return n
}

// RequestFrames returns the complete requests the client has sent on this
// connection so far, in order.
func (c *Conn) RequestFrames() []Frame {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return slices.Clone(c.framers[ToServer].frames)
}

// tapConn is the net.Conn kfake gets: it relays and records.
type tapConn struct {
	net.Conn
	c *Conn

	// Used only by kfake's single reader goroutine.
	rbuf       []byte
	rpos, rend int
	rerr       error
}

// Read reads at most one chunk from the socket and records it as one burst
// before handing it out. kfake reads a 4-byte length and then the body;
// buffering here keeps the packets shaped by what the client sent, not by
// how kfake happens to read.
func (t *tapConn) Read(p []byte) (int, error) {
	if t.rpos == t.rend {
		if t.rerr != nil {
			return 0, t.rerr
		}
		if t.rbuf == nil {
			t.rbuf = make([]byte, t.c.r.chunk)
		}
		n, err := t.Conn.Read(t.rbuf)
		if n > 0 {
			t.c.r.data(t.c, ToServer, t.rbuf[:n])
			t.c.r.pace(n)
			t.rpos, t.rend = 0, n
		}
		if err != nil {
			t.readErr(err)
			t.rerr = err
			if n == 0 {
				return 0, err
			}
		}
	}
	n := copy(p, t.rbuf[t.rpos:t.rend])
	t.rpos += n
	return n, nil
}

func (t *tapConn) readErr(err error) {
	switch {
	case t.c.closing.Load() || errors.Is(err, net.ErrClosed):
	case errors.Is(err, io.EOF):
		t.c.r.fin(t.c, ToServer, "client")
	default:
		t.c.r.rst(t.c, ToServer)
	}
}

// Write writes in chunks, recording each chunk once the kernel took it, so
// a large response spreads over time the way it does on a real socket.
func (t *tapConn) Write(p []byte) (int, error) {
	if !t.c.closing.Load() && peerClosed(t.Conn) {
		// The client closed before these bytes: its FIN comes first
		// (data answers them with its RST). A TLS broker reads the
		// client's close_notify, not the FIN after it, and writes its
		// own close_notify next.
		t.c.r.fin(t.c, ToServer, "client")
	}
	var total int
	for len(p) > 0 {
		n, err := t.Conn.Write(p[:min(len(p), t.c.r.chunk)])
		if n > 0 {
			t.c.r.data(t.c, ToClient, p[:n])
			t.c.r.pace(n)
		}
		total += n
		p = p[n:]
		if err != nil {
			if !t.c.closing.Load() && !errors.Is(err, net.ErrClosed) {
				t.c.r.rst(t.c, ToServer) // EPIPE / ECONNRESET: the client reset
			}
			return total, err
		}
	}
	return total, nil
}

func (t *tapConn) Close() error { return t.c.Close() }
