package capture

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The tracker's half of the eBPF source, fed synthetic probe events.

var (
	tClient = netip.MustParseAddrPort("127.0.0.1:40000")
	tBroker = netip.MustParseAddrPort("127.0.0.1:9092")
	tT0     = time.Unix(1700000000, 0)
)

// pev builds probe events; client-side socket 1 unless changed.
type pev struct {
	sock   uint64 // socket address (gen 1)
	server bool   // the broker's socket
	recv   bool
	offset uint64
	n      uint64
	data   string
	close  bool
	sent   uint64 // close: bytes counted
	recvd  uint64
	pid    uint32
	ms     int  // wall time, ms after tT0
	expire bool // not an event: run the timeouts at ms
	tls    bool // plaintext from a TLS library probe
	gen    uint64
}

func (p pev) event() (*probeEvent, time.Time) {
	ev := &probeEvent{
		close: p.close, time: tT0.Add(time.Duration(p.ms) * time.Millisecond), sock: sockID{max(p.sock, 1), max(p.gen, 1)}, tls: p.tls,
		local: tClient, remote: tBroker, server: p.server, handshake: true,
		recv: p.recv, offset: p.offset, n: p.n, data: []byte(p.data),
		proc: Process{PID: max(p.pid, 100), Comm: "client"}, sent: p.sent, received: p.recvd,
	}
	if p.server {
		ev.local, ev.remote = tBroker, tClient
		ev.proc = Process{PID: 200, Comm: "broker"}
	}
	if p.n == 0 && !p.close {
		ev.n = uint64(len(p.data))
	}
	return ev, ev.time
}

// chunkLog records chunks as short strings.
type chunkLog struct{ lines []string }

func (l *chunkLog) Chunk(c *Chunk) {
	s := fmt.Sprintf("%d %s ", c.Conn.ID, c.Dir)
	switch c.Kind {
	case Data:
		s += "data " + string(c.Data)
	case Gap:
		s += fmt.Sprintf("gap %d", c.Len)
	case Close:
		s += "close " + c.Reason.String()
	}
	if c.Conn.Process != nil {
		s += fmt.Sprintf(" pid=%d", c.Conn.Process.PID)
	}
	l.lines = append(l.lines, s)
}

// idleMillis is a wall time (ms after tT0) past the default idle timeout.
const idleMillis = int((defaultIdleTimeout + time.Second) / time.Millisecond)

func TestTracker(t *testing.T) {
	tests := []struct {
		name   string
		events []pev
		expire []int // wall times (ms) to run timeouts at, after the events
		end    bool  // closeAll at the end
		want   []string
	}{{
		name: "in order, both directions",
		events: []pev{
			{data: "req1"},
			{recv: true, data: "resp1"},
			{offset: 4, data: "req2"},
		},
		want: []string{"1 to_server data req1 pid=100", "1 to_client data resp1 pid=100", "1 to_server data req2 pid=100"},
	}, {
		name: "uncopied rest of a call is a gap of known size",
		events: []pev{
			{data: "head", n: 1000},
			{offset: 1000, data: "next"},
		},
		want: []string{"1 to_server data head pid=100", "1 to_server gap 996 pid=100", "1 to_server data next pid=100"},
	}, {
		name: "out of order pieces are put back in order",
		events: []pev{
			{offset: 4, data: "BBBB"},
			{offset: 8, data: "CC"},
			{data: "AAAA"},
		},
		want: []string{"1 to_server data AAAA pid=100", "1 to_server data BBBB pid=100", "1 to_server data CC pid=100"},
	}, {
		name:   "a missing piece becomes a gap after the reorder wait",
		events: []pev{{data: "AAAA"}, {offset: 10, data: "late", ms: 1}},
		expire: []int{50, 101},
		want:   []string{"1 to_server data AAAA pid=100", "1 to_server gap 6 pid=100", "1 to_server data late pid=100"},
	}, {
		name:   "a connection first seen mid-stream waits for its start",
		events: []pev{{offset: 5, data: "xyz"}},
		expire: []int{100},
		want:   []string{"1 to_server gap 5 pid=100", "1 to_server data xyz pid=100"},
	}, {
		name:   "bytes already delivered are dropped",
		events: []pev{{data: "AAAA"}, {data: "AAAA"}, {offset: 2, data: "AABB"}},
		want:   []string{"1 to_server data AAAA pid=100", "1 to_server data BB pid=100"},
	}, {
		name: "close waits for the bytes the kernel counted",
		events: []pev{
			{data: "req"},
			{close: true, sent: 3, recvd: 4},
			{recv: true, data: "resp"},
		},
		want: []string{"1 to_server data req pid=100", "1 to_server close fin pid=100", "1 to_client data resp pid=100", "1 to_client close fin pid=100"},
	}, {
		name:   "close gives up on missing bytes after the reorder wait",
		events: []pev{{data: "req"}, {close: true, sent: 10, recvd: 0}},
		expire: []int{100},
		want:   []string{"1 to_server data req pid=100", "1 to_client close fin pid=100", "1 to_server gap 7 pid=100", "1 to_server close fin pid=100"},
	}, {
		name: "loopback: the broker's socket is muted, the client's followed",
		events: []pev{
			{data: "req"},
			{sock: 2, server: true, recv: true, data: "req"},
			{sock: 2, server: true, data: "resp"},
			{recv: true, data: "resp"},
		},
		want: []string{"1 to_server data req pid=100", "1 to_client data resp pid=100"},
	}, {
		name: "loopback: broker's socket seen first, the client's process still known",
		events: []pev{
			{sock: 2, server: true, recv: true, data: "req"},
			{data: "resp", recv: true},
			{sock: 2, server: true, data: "resp"},
		},
		want: []string{"1 to_server data req", "1 to_client data resp pid=100"},
	}, {
		name: "reads after the kernel closed the socket are late, not a new connection",
		events: []pev{
			{data: "req"},
			{close: true, sent: 3},
			{recv: true, data: "late"},
		},
		want: []string{"1 to_server data req pid=100", "1 to_server close fin pid=100", "1 to_client close fin pid=100"},
	}, {
		name: "a connection closed for being idle resumes where its bytes are",
		events: []pev{
			{data: "req"},
			{expire: true, ms: idleMillis},
			{offset: 3, data: "req2", ms: idleMillis + 1},
		},
		want: []string{"1 to_server data req pid=100", "1 to_server close idle pid=100", "1 to_client close idle pid=100", "2 to_server data req2 pid=100"},
	}, {
		name:   "end of run closes what is open",
		events: []pev{{data: "req"}},
		end:    true,
		want:   []string{"1 to_server data req pid=100", "1 to_server close eof pid=100", "1 to_client close eof pid=100"},
	}, {
		name: "TLS: the plaintext end is followed, not the ciphertext end seen first",
		events: []pev{
			{sock: 2, server: true, recv: true, data: "CIPHER"},
			{tls: true, data: "req"},
			{sock: 2, server: true, data: "CIPHER2"},
			{tls: true, recv: true, data: "resp"},
		},
		want: []string{"1 to_server data CIPHER", "1 to_client close evict", "1 to_server close evict",
			"2 to_server data req pid=100", "2 to_client data resp pid=100"},
	}, {
		name: "TLS: a socket probed mid-connection starts over as plaintext under a new identity",
		events: []pev{
			{data: "CIPHER"},
			{gen: 2, tls: true, data: "req"},
		},
		want: []string{"1 to_server data CIPHER pid=100", "1 to_server close evict pid=100", "1 to_client close evict pid=100",
			"2 to_server data req pid=100"},
	}, {
		name:   "idle connections close",
		events: []pev{{data: "req"}},
		expire: []int{idleMillis},
		want:   []string{"1 to_server data req pid=100", "1 to_server close idle pid=100", "1 to_client close idle pid=100"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st Stats
			var est EBPFStats
			tr := newTracker(nil, 100*time.Millisecond, &st, &est)
			log := &chunkLog{}
			tr.sink = log
			for _, p := range tc.events {
				ev, now := p.event()
				if p.expire {
					tr.expire(now)
					continue
				}
				tr.event(ev, now)
			}
			for _, ms := range tc.expire {
				tr.expire(tT0.Add(time.Duration(ms) * time.Millisecond))
			}
			if tc.end {
				tr.closeAll()
			}
			if !reflect.DeepEqual(log.lines, tc.want) {
				t.Errorf("chunks (-want +got):\n-%s\n+%s", strings.Join(tc.want, "\n-"), strings.Join(log.lines, "\n+"))
			}
		})
	}
}

// TestTrackerIgnore: a connection the Sink ignores is muted in the kernel
// and gets only its Close.
func TestTrackerIgnore(t *testing.T) {
	var st Stats
	var est EBPFStats
	tr := newTracker(nil, 100*time.Millisecond, &st, &est)
	var muted []string
	tr.mute = func(id sockID, on bool) { muted = append(muted, fmt.Sprint(id.sk, on)) }
	log := &chunkLog{}
	tr.sink = SinkFunc(func(c *Chunk) { c.Conn.Ignore = true; log.Chunk(c) })
	for _, p := range []pev{{data: "TLS!"}, {offset: 4, data: "more"}, {close: true, sent: 8}} {
		ev, now := p.event()
		tr.event(ev, now)
	}
	want := []string{"1 to_server data TLS! pid=100", "1 to_server close fin pid=100", "1 to_client close fin pid=100"}
	if !reflect.DeepEqual(log.lines, want) {
		t.Errorf("chunks (-want +got):\n-%s\n+%s", strings.Join(want, "\n-"), strings.Join(log.lines, "\n+"))
	}
	if want := []string{"1 true", "1 false"}; !reflect.DeepEqual(muted, want) {
		t.Errorf("mute calls = %v, want %v", muted, want)
	}
	if st.ConnsOpen != 0 || st.ConnsSeen != 1 {
		t.Errorf("conns open %d seen %d, want 0 1", st.ConnsOpen, st.ConnsSeen)
	}
}
