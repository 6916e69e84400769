package wire

import (
	"encoding/json"
	"net/netip"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/version"
)

// Body markers.
const (
	bodyNone     = 0
	bodyWithheld = 1
	bodyKmsg     = 2
	bodyCompact  = 3
)

// Encoder builds one batch at a time. It is not safe for concurrent use.
type Encoder struct {
	agent Agent
	build version.Build
	w     writer
	items int
	// conns is the batch's connection table: each connection's index and
	// the endpoints it was declared with (a Swap redeclares it).
	conns map[*capture.Conn]connDecl
	next  int
	tmp   []byte
}

type connDecl struct {
	index          int
	client, server netip.AddrPort
}

// NewEncoder returns an Encoder for agent's batches, which say they are
// of this kwire build (version.Get).
func NewEncoder(agent Agent) *Encoder {
	return &Encoder{agent: agent, build: version.Get().Build(), conns: make(map[*capture.Conn]connDecl)}
}

// SetBuild makes the batches from the next Reset on say they are of build
// b: a router re-encoding an agent's items gives the agent's.
func (e *Encoder) SetBuild(b version.Build) { e.build = b }

// Reset starts batch number seq, dropping what the previous one held.
func (e *Encoder) Reset(seq uint64) {
	e.w.reset()
	e.w.byte(Version)
	e.w.string(e.agent.Host)
	e.w.uvarint(e.agent.Run)
	e.w.uvarint(seq)
	e.w.string(e.build.Version)
	commit := e.build.Commit
	if e.build.Modified {
		commit += dirty
	}
	e.w.string(commit)
	e.items, e.next = 0, 0
	clear(e.conns)
}

// SetSkew adds d to every time the Encoder writes from now on: a test
// shifts one agent's clock by it, as a host whose clock is off by d would,
// to check that the aggregator tolerates skew (--max-skew). Agents
// publish their host's clock as it is: d is 0 outside tests.
func (e *Encoder) SetSkew(d time.Duration) { e.w.skew = d }

// Len is the size of the batch so far, in bytes.
func (e *Encoder) Len() int { return len(e.w.b) }

// Items is the number of items in the batch so far.
func (e *Encoder) Items() int { return e.items }

// Bytes returns the batch, valid until the next Reset.
func (e *Encoder) Bytes() []byte { return e.w.b }

// Take returns the batch and gives it up: it stays valid, and the next
// Reset starts a buffer of its own (an Encoder reused for the next batch
// while the transport still holds this one).
func (e *Encoder) Take() []byte {
	return e.TakeFor(make([]byte, 0, cap(e.w.b)))
}

// TakeFor is Take, the next batches written into next[:0] (a buffer
// of an earlier batch the transport gave back: the caller must not use
// it any more).
func (e *Encoder) TakeFor(next []byte) []byte {
	b := e.w.b
	e.w.b = next[:0]
	return b
}

// conn returns c's reference in the batch, declaring it first if needed.
func (e *Encoder) conn(c *capture.Conn) uint64 {
	if c == nil {
		return 0
	}
	if d, ok := e.conns[c]; ok && d.client == c.Client && d.server == c.Server {
		return uint64(d.index) + 1
	}
	w := &e.w
	w.byte(byte(kindConn))
	w.uvarint(c.ID)
	e.addrPort(c.Client)
	e.addrPort(c.Server)
	w.byte(byte(c.Role))
	w.time(c.Start)
	var flags byte
	if c.Handshake {
		flags |= 1
	}
	if c.Process != nil {
		flags |= 2
	}
	w.byte(flags)
	if p := c.Process; p != nil {
		w.uvarint(uint64(p.PID))
		w.string(p.Comm)
		w.uvarint(p.CgroupID)
	}
	e.conns[c] = connDecl{index: e.next, client: c.Client, server: c.Server}
	e.next++
	return uint64(e.next)
}

// Exchange adds x, given by a decoder at agent clock at. x is only read:
// what must not be published (records, SASL bytes, APIs the correlator
// does not read) is left out of the encoding, not out of x.
func (e *Encoder) Exchange(at time.Time, x *decode.Exchange) {
	ref := e.conn(x.Conn)
	w := &e.w
	w.byte(byte(KindExchange))
	w.itemAt(at)
	w.uvarint(ref)
	w.varint(int64(x.Key))
	w.varint(int64(x.Version))
	w.varint(int64(x.CorrelationID))
	w.str(x.ClientID)
	w.near(x.ReqTime)
	w.near(x.RespTime)
	w.varint(int64(x.ReqSize))
	w.varint(int64(x.RespSize))
	w.byte(byte(x.Response))
	w.errText(x.ReqErr)
	w.errText(x.RespErr)
	var req, resp message
	if x.Req != nil {
		req = publishable(x.Req)
	}
	if x.Resp != nil {
		resp = publishable(x.Resp)
	}
	e.body(x.Req != nil, req)
	e.body(x.Resp != nil, resp)
	w.uvarint(uint64(len(x.RecordsNotCopied)))
	for _, p := range x.RecordsNotCopied {
		w.uvarint(uint64(p.Topic))
		w.uvarint(uint64(p.Partition))
	}
	e.items++
}

// addrPort writes ap as netip.AddrPort's binary form (a string).
func (e *Encoder) addrPort(ap netip.AddrPort) {
	e.tmp, _ = ap.AppendBinary(e.tmp[:0]) // cannot fail
	e.w.bytes(e.tmp)
}

// body writes a message: none, withheld, compact (Produce, Fetch) or
// re-encoded at its version.
func (e *Encoder) body(present bool, m message) {
	switch {
	case !present:
		e.w.byte(bodyNone)
	case m == nil:
		e.w.byte(bodyWithheld)
	case compactable(m):
		e.w.byte(bodyCompact)
		e.w.compact(m)
	default:
		e.w.byte(bodyKmsg)
		e.tmp = m.AppendTo(e.tmp[:0])
		e.w.bytes(e.tmp)
	}
}

// Anomaly adds a, given by a decoder at agent clock at.
func (e *Encoder) Anomaly(at time.Time, a *decode.Anomaly) {
	ref := e.conn(a.Conn)
	w := &e.w
	w.byte(byte(KindAnomaly))
	w.itemAt(at)
	w.uvarint(ref)
	w.str(string(a.Kind))
	w.byte(byte(a.Dir))
	w.near(a.Time)
	w.varint(a.Bytes)
	w.varint(int64(a.Key))
	w.varint(int64(a.Version))
	w.varint(int64(a.CorrelationID))
	w.string(a.Detail)
	e.items++
}

// Counters adds c at agent clock at.
func (e *Encoder) Counters(at time.Time, c *Counters) {
	cc := *c
	cc.ByKey = c.Decode.ByKey[:]
	for len(cc.ByKey) > 0 && cc.ByKey[len(cc.ByKey)-1] == 0 {
		cc.ByKey = cc.ByKey[:len(cc.ByKey)-1]
	}
	js, _ := json.Marshal(&cc) // plain structs: cannot fail
	e.w.byte(byte(KindCounters))
	e.w.itemAt(at)
	e.w.bytes(js)
	e.items++
}
