package main

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kwire/kwire/capture"
)

// ownConns are the connections kwire live's agent opens to the cluster it
// publishes to (--publish). When that cluster is the one captured (an
// agent on a broker host publishing to its own brokers), its Produce
// requests would be captured, decoded and published again, each batch
// making the next one bigger, and its client would show up as one more
// producer. kwire live leaves them out: a connection's first chunk is
// looked up by its two ends, an own connection is marked Ignore (the
// source then drops the rest of it) and counted.
//
// add is called from kgo's dialing goroutines, skip from the capture's:
// a connection is recorded when its dial returns, before kgo writes a
// byte on it, so before the capture can see any data of it.
type ownConns struct {
	mu   sync.Mutex
	ends map[connEnds]time.Time // open connections; closed ones with when they closed

	// The capture goroutine's.
	checked map[uint64]bool // connections seen: own or not, until their close
	last    *capture.Conn   // the latest connection found not own
	n       atomic.Uint64   // own connections left out
}

// connEnds are a connection's local and remote addresses.
type connEnds struct{ local, remote netip.AddrPort }

// ownForget is how long a closed own connection is remembered: the
// capture may see its last packets after kgo closed it.
const ownForget = time.Minute

func newOwnConns() *ownConns {
	return &ownConns{ends: make(map[connEnds]time.Time), checked: make(map[uint64]bool)}
}

// add records conn, just opened, and returns it wrapped so that its
// closing is seen.
func (o *ownConns) add(conn net.Conn) net.Conn {
	e := connEnds{addrPort(conn.LocalAddr()), addrPort(conn.RemoteAddr())}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, closed := range o.ends {
		if !closed.IsZero() && now.Sub(closed) > ownForget {
			delete(o.ends, k)
		}
	}
	o.ends[e] = time.Time{}
	return &ownConn{Conn: conn, o: o, e: e}
}

// addrPort is a's address and port, IPv4 unmapped (as the capture gives
// them); the zero AddrPort for an address that is not TCP's.
func addrPort(a net.Addr) netip.AddrPort {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ap := ta.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// has says whether a captured connection is one of kwire's own, either
// way round (the capture may take either end for the broker's).
func (o *ownConns) has(c *capture.Conn) bool {
	cl := netip.AddrPortFrom(c.Client.Addr().Unmap(), c.Client.Port())
	sv := netip.AddrPortFrom(c.Server.Addr().Unmap(), c.Server.Port())
	o.mu.Lock()
	defer o.mu.Unlock()
	_, a := o.ends[connEnds{cl, sv}]
	_, b := o.ends[connEnds{sv, cl}]
	return a || b
}

// skip says whether chunk c belongs to one of kwire's own connections,
// which then goes no further; the first chunk of one marks it Ignore.
// Called on the capture goroutine, for every chunk: a run of chunks of
// one connection costs a comparison.
func (o *ownConns) skip(c *capture.Chunk) bool {
	conn := c.Conn
	switch {
	case conn == nil:
		return false
	case c.Kind == capture.Close:
		own := o.checked[conn.ID]
		delete(o.checked, conn.ID)
		if o.last == conn {
			o.last = nil
		}
		return own
	case conn == o.last:
		return false
	}
	own, seen := o.checked[conn.ID]
	if !seen {
		own = o.has(conn)
		o.checked[conn.ID] = own
		if own {
			conn.Ignore = true
			o.n.Add(1)
		}
	}
	if !own {
		o.last = conn
	}
	return own
}

// ownConn is an own connection: closing it starts ownForget.
type ownConn struct {
	net.Conn
	o    *ownConns
	e    connEnds
	once sync.Once
}

// Close implements net.Conn.
func (c *ownConn) Close() error {
	c.once.Do(func() {
		c.o.mu.Lock()
		c.o.ends[c.e] = time.Now()
		c.o.mu.Unlock()
	})
	return c.Conn.Close()
}
