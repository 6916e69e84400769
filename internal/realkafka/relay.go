package realkafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"github.com/kwire/kwire/internal/gen"
)

// relay is one listener's relay: it accepts on addr through the recorder's
// tap and copies each connection to and from the JVM's listener at backend.
// It can be stopped (its listener closed) and started again on the same
// address, as its node is killed and restarted.
type relay struct {
	rec      *gen.Recorder
	node     int32
	name     string // the Kafka listener's name: PLAINTEXT, BROKER, CONTROLLER...
	addr     string // where clients connect (advertised)
	backend  string // where the JVM listens
	mu       sync.Mutex
	ln       net.Listener
	wg       sync.WaitGroup
	backends map[net.Conn]bool // open connections to the JVM
}

// listen binds the relay's address (a free port when addr ends in :0) and
// serves until stop.
func (r *relay) listen() error {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("relay %s of node %d: listen %s: %w", r.name, r.node, r.addr, err)
	}
	r.mu.Lock()
	r.addr = ln.Addr().String()
	r.ln = r.rec.Listen(ln, r.node)
	tl := r.ln
	r.mu.Unlock()
	r.wg.Add(1)
	go r.serve(tl)
	return nil
}

func (r *relay) serve(ln net.Listener) {
	defer r.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.pipe(nc)
		}()
	}
}

// pipe relays one connection. Client bytes are recorded by the tapped
// connection's Reads, broker bytes by its Writes; a FIN is passed on as a
// half-close, a broker's reset as a reset (gen.Conn.Reset), so the capture
// ends each connection the way the client saw it end.
func (r *relay) pipe(nc net.Conn) {
	tap := gen.ConnOf(nc)
	bc, err := net.Dial("tcp", r.backend)
	if err != nil {
		// The JVM is not listening (yet, or any more): the client sees a
		// reset, as from a host whose port is closed.
		_ = tap.Reset()
		return
	}
	backend := bc.(*net.TCPConn)
	if !r.track(backend, true) {
		_ = tap.Reset()
		backend.Close()
		return
	}
	defer r.track(backend, false)
	go func() { // client -> broker
		buf := make([]byte, 64<<10)
		for {
			n, err := nc.Read(buf)
			if n > 0 {
				if _, werr := backend.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					_ = backend.CloseWrite()
				} else {
					_ = backend.Close()
				}
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := backend.Read(buf)
		if n > 0 {
			if _, werr := nc.Write(buf[:n]); werr != nil {
				// The tap recorded the client's reset.
				backend.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) {
				_ = tap.Reset()
			} else {
				_ = nc.Close()
			}
			backend.Close()
			return
		}
	}
}

// track adds or removes an open backend connection; it refuses to add one
// once the relay is stopped.
func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !add {
		delete(r.backends, c)
		return true
	}
	if r.ln == nil {
		return false
	}
	if r.backends == nil {
		r.backends = map[net.Conn]bool{}
	}
	r.backends[c] = true
	return true
}

// stop closes the relay's listener (new connections are refused) and
// waits for its connections to end; with closeConns it closes the
// backend side of each (a clean stop), else it waits for the JVM's death
// to end them.
func (r *relay) stop(closeConns bool) {
	r.mu.Lock()
	ln := r.ln
	r.ln = nil
	if closeConns {
		for c := range r.backends {
			c.Close()
		}
	}
	r.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	r.wg.Wait()
}
