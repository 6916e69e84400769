package capture

import (
	"cmp"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"time"
)

// The tracker's connections: opened on a socket's first event (or muted as
// the other end of one already followed), closed when the kernel says the
// socket closed and its bytes are in, when idle, or at the end.

// open starts following a socket, or mutes it as the other end of a
// connection already followed. It returns nil when the event is not to be
// delivered.
func (t *tracker) open(ev *probeEvent, now time.Time) *esock {
	t.est.Sockets++
	client, server := ev.local, ev.remote
	if ev.server {
		client, server = server, client
	}
	key := [2]netip.AddrPort{client, server}
	if other := t.pairs[key]; other != nil && ev.tls && !other.tls && other.server != ev.server {
		// The other end, followed so far, moves this connection's
		// ciphertext (a process kwire does not probe, as a JVM broker):
		// follow the plaintext end instead, and mute the ciphertext one.
		t.closeNow(other, CloseEvict)
		t.twins[other.id] = now
		t.est.MutedSockets++
		if t.mute != nil {
			t.mute(other.id, true)
		}
	} else if other != nil {
		if other.server != ev.server {
			// Both ends are local: keep following the first one. The
			// other stays muted until its own close, so that bytes it
			// moves after the followed one closed are not taken for a
			// new connection.
			t.twins[ev.sock] = now
			t.est.MutedSockets++
			if t.mute != nil {
				t.mute(ev.sock, true)
			}
			if !ev.server && other.conn.Process == nil {
				p := ev.proc
				other.conn.Process = &p
			}
			return nil
		}
		// The same connection under a new socket identity (the kernel
		// forgot the old one), or a new connection reusing the ports
		// before the old one's close was settled: end the old one.
		t.closeNow(other, CloseEvict)
	}
	if len(t.socks) >= t.opts.MaxConns {
		t.st.PacketsOverCap++
		if _, seen := t.overCap[ev.sock]; !seen && len(t.overCap) < t.opts.MaxConns {
			t.overCap[ev.sock] = struct{}{}
			t.st.ConnsOverCap++
		}
		return nil
	}
	t.nextID++
	t.st.ConnsSeen++
	t.st.ConnsOpen++
	c := &Conn{ID: t.nextID, Client: client, Server: server, Role: RolePort, Start: ev.time, Handshake: ev.handshake}
	if !ev.server {
		p := ev.proc
		c.Process = &p
	}
	s := &esock{id: ev.sock, conn: c, server: ev.server, tls: ev.tls, last: now}
	if _, ok := t.idled[ev.sock]; ok {
		delete(t.idled, ev.sock)
		s.resumed = true
	}
	t.socks[ev.sock] = s
	t.pairs[key] = s
	return s
}

// closeEvent handles a socket reaching TCP_CLOSE: its connection ends once
// the bytes the kernel counted have been delivered, or after reorderWait.
func (t *tracker) closeEvent(ev *probeEvent, now time.Time) {
	if _, ok := t.twins[ev.sock]; ok {
		delete(t.twins, ev.sock)
		if t.mute != nil {
			t.mute(ev.sock, false)
		}
		return
	}
	delete(t.idled, ev.sock)
	s := t.socks[ev.sock]
	if s == nil {
		return
	}
	s.closing, s.closeBy, s.reset = true, now.Add(t.reorderWait), ev.reset
	t.busy[s] = struct{}{}
	s.dirs[0].end, s.dirs[1].end = ev.sent, ev.received
	s.last = now
	t.tryClose(s, now, false)
}

// tryClose closes the directions of a closing socket whose bytes have all
// been delivered; force closes the rest, behind gaps.
func (t *tracker) tryClose(s *esock, now time.Time, force bool) {
	reason := CloseFIN
	if s.reset {
		reason = CloseRST
	}
	for i := range s.dirs {
		d, recv := &s.dirs[i], i == 1
		if d.closed {
			continue
		}
		if force {
			for len(d.pending) > 0 {
				t.skipTo(s, recv, now, d.pending[0].offset)
			}
			if d.end > d.next {
				t.send(s, recv, Gap, now, nil, int(d.end-d.next), 0)
				d.next = d.end
			}
		}
		if d.next >= d.end && len(d.pending) == 0 {
			d.closed = true
			t.send(s, recv, Close, now, nil, 0, reason)
		}
	}
	if s.dirs[0].closed && s.dirs[1].closed {
		t.forget(s)
		t.gone[s.id] = now
	}
}

// closeNow ends both directions of s at once (idle, evicted, end of run).
func (t *tracker) closeNow(s *esock, reason CloseReason) {
	for i := range s.dirs {
		d, recv := &s.dirs[i], i == 1
		for len(d.pending) > 0 {
			t.skipTo(s, recv, s.last, d.pending[0].offset)
		}
		if !d.closed {
			d.closed = true
			t.send(s, recv, Close, s.last, nil, 0, reason)
		}
	}
	t.forget(s)
}

func (t *tracker) forget(s *esock) {
	delete(t.socks, s.id)
	delete(t.busy, s)
	key := [2]netip.AddrPort{s.conn.Client, s.conn.Server}
	if t.pairs[key] == s {
		delete(t.pairs, key)
	}
	if s.muted && t.mute != nil {
		t.mute(s.id, false)
	}
	t.st.ConnsOpen--
}

// sweepEvery is how often expire looks at every connection for idleness.
const sweepEvery = time.Second

// goneFor is how long events of a socket closed by the kernel are taken
// for late reads of it rather than a new connection.
const goneFor = time.Minute

// expire runs the timeouts at wall time now: missing parts waited for
// long enough become gaps, closing sockets past their wait close; every
// sweepEvery, idle connections close. Connections are visited in ID order.
func (t *tracker) expire(now time.Time) {
	for _, s := range sortByID(maps.Keys(t.busy)) {
		t.expireBusy(s, now)
	}
	if now.Sub(t.lastSweep) < sweepEvery {
		return
	}
	t.lastSweep = now
	for _, s := range sortByID(maps.Values(t.socks)) {
		if now.Sub(s.last) > t.opts.IdleTimeout {
			t.idleClosed++
			t.closeNow(s, CloseIdle)
			if len(t.idled) < t.opts.MaxConns {
				t.idled[s.id] = struct{}{}
			}
		}
	}
	for id, last := range t.twins {
		if now.Sub(last) > t.opts.IdleTimeout {
			delete(t.twins, id)
			if t.mute != nil {
				t.mute(id, false)
			}
		}
	}
	for id, at := range t.gone {
		if now.Sub(at) > goneFor {
			delete(t.gone, id)
		}
	}
}

// expireBusy gives up waiting for missing parts and closes, as due.
func (t *tracker) expireBusy(s *esock, now time.Time) {
	if _, ok := t.socks[s.id]; !ok {
		return
	}
	waiting := false
	for i := range s.dirs {
		d := &s.dirs[i]
		if len(d.pending) > 0 && now.Sub(d.since) >= t.reorderWait {
			t.skipTo(s, i == 1, d.pending[0].t, d.pending[0].offset)
			d.since = now
		}
		waiting = waiting || len(d.pending) > 0
	}
	if s.closing {
		t.tryClose(s, now, !now.Before(s.closeBy))
	} else if !waiting {
		delete(t.busy, s)
	}
}

// closeAll ends every connection (the end of a run).
func (t *tracker) closeAll() {
	for _, s := range sortByID(maps.Values(t.socks)) {
		t.closeNow(s, CloseEOF)
	}
}

// sortByID returns the sockets in connection ID order.
func sortByID(socks iter.Seq[*esock]) []*esock {
	out := slices.Collect(socks)
	slices.SortFunc(out, func(a, b *esock) int { return cmp.Compare(a.conn.ID, b.conn.ID) })
	return out
}
