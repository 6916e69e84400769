package gen

import (
	"net"
	"slices"
)

// Recorder is the tap of a [Cluster] on its own, for brokers that are not
// kfake: wrap any listener with [Recorder.Listen] and every connection it
// accepts is recorded exactly as a Cluster's are (TCP packets in time order,
// Kafka frames, closes), then written with [Recorder.WritePcapng]. A relay
// in front of a real broker accepts on such a listener and copies bytes to
// the broker and back through the tapped connection.
//
// A Recorder is safe for concurrent use. Packets stay in memory until the
// Recorder is dropped.
type Recorder struct{ r *recorder }

// RecorderOptions configures a Recorder; the zero value means DefaultMSS
// and DefaultChunk.
type RecorderOptions struct {
	MSS   int // maximum TCP payload per packet; default DefaultMSS
	Chunk int // maximum bytes per tapped Read/Write; default DefaultChunk
}

// NewRecorder returns an empty Recorder.
func NewRecorder(o RecorderOptions) *Recorder {
	if o.MSS == 0 {
		o.MSS = DefaultMSS
	}
	if o.Chunk == 0 {
		o.Chunk = DefaultChunk
	}
	return &Recorder{r: &recorder{mss: o.MSS, chunk: o.Chunk}}
}

// Listen wraps ln: every connection it accepts is a tapped net.Conn whose
// Reads are recorded as client -> server bytes and Writes as server ->
// client bytes, with node as its Conn.Node. EOF on a Read records the
// client's FIN, a failed Read or Write the client's RST; Close records the
// server's FIN and then the client's.
func (rec *Recorder) Listen(ln net.Listener, node int32) net.Listener {
	return &listener{Listener: ln, r: rec.r, node: node}
}

// Conns returns the recorded connections so far, in accept order.
func (rec *Recorder) Conns() []*Conn {
	rec.r.mu.Lock()
	defer rec.r.mu.Unlock()
	return slices.Clone(rec.r.conns)
}

// Packets returns how many packets are recorded so far.
func (rec *Recorder) Packets() int {
	rec.r.mu.Lock()
	defer rec.r.mu.Unlock()
	return len(rec.r.packets)
}

// OnFrame calls fn for every complete frame a tapped connection relays, as
// [Cluster.OnFrame] does.
func (rec *Recorder) OnFrame(fn func(conn *Conn, dir Dir, f Frame)) {
	rec.r.mu.Lock()
	rec.r.onFrame = append(rec.r.onFrame, fn)
	rec.r.mu.Unlock()
}

// WritePcapng writes every packet recorded so far of the connections
// include says yes to (all when include is nil) to a new pcapng file at
// path, with link-layer headers link, and returns how many it wrote.
func (rec *Recorder) WritePcapng(path string, link Link, include func(*Conn) bool) (int, error) {
	rec.r.mu.Lock()
	packets := slices.Clone(rec.r.packets)
	rec.r.mu.Unlock()
	return writePcapng(path, packets, link, rec.r.mss, func(_ int, p *Packet) bool {
		return include == nil || include(p.Conn)
	})
}

// Reset records a reset sent by the server side and closes the connection
// with SO_LINGER 0, so the client gets the RST too: what a relay does when
// the broker behind it reset its connection (a broker killed with unread
// bytes in its socket). Safe to call more than once and after Close.
func (c *Conn) Reset() error {
	var err error
	c.once.Do(func() {
		c.closing.Store(true)
		c.r.rst(c, ToClient)
		if tc, ok := c.nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		err = c.nc.Close()
	})
	return err
}

// ConnOf returns the recording of nc, a connection accepted by a listener
// from [Recorder.Listen] (or a Cluster's tap), or nil for any other
// connection.
func ConnOf(nc net.Conn) *Conn {
	if t, ok := nc.(*tapConn); ok {
		return t.c
	}
	return nil
}
