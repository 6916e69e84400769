package correlate

import (
	"fmt"
	"slices"
	"time"

	"github.com/kwire/kwire/decode"
)

// Loss: a hazard that concludes from something not seen (no Fetch
// delivering the committed records, no heartbeat, no rejoin, no commit) is
// only as good as the capture. The Correlator remembers, per connection,
// when the capture lost bytes or answers on it (decoder anomalies, answers
// lost in gaps, source drops), and such a hazard is checked against the
// loss on its client's connections over its time window before it is
// emitted: where evidence may have been lost it becomes info, with
// evidence_complete false and the loss figures.

// LossFigures are what the capture lost on the connections a hazard's
// conclusion depends on, over its time window.
type LossFigures struct {
	// Connections counts the connections with loss.
	Connections int `json:"connections"`
	// Gaps counts missing stretches of a stream; GapBytes their bytes
	// (-1 when a gap's size is unknown).
	Gaps     int64 `json:"gaps,omitempty"`
	GapBytes int64 `json:"gap_bytes,omitempty"`
	// SkippedBytes are bytes skipped while resynchronising, or in frames
	// too large or above the buffer limit (Skips counts the skips).
	Skips        int64 `json:"skips,omitempty"`
	SkippedBytes int64 `json:"skipped_bytes,omitempty"`
	// ResponsesLost counts answers lost in gaps, responses without their
	// request, and requests whose answers could not be matched.
	ResponsesLost int64 `json:"responses_lost,omitempty"`
	// DecodeErrors counts frames kmsg could not parse.
	DecodeErrors int64 `json:"decode_errors,omitempty"`
	// SourceDrops counts packets or events the capture source dropped
	// (kernel ring, eBPF ring), on no known connection.
	SourceDrops int64 `json:"source_drops,omitempty"`
	// FromTS and ToTS bound the window checked.
	FromTS Time `json:"from_ts"`
	ToTS   Time `json:"to_ts"`
}

func (f *LossFigures) any() bool {
	return f.Connections > 0 || f.SourceDrops > 0
}

// text says what was lost, for a hazard's summary.
func (f *LossFigures) text() string {
	s := fmt.Sprintf("the capture lost data on %d of the client's connections between %s and %s",
		f.Connections, f.FromTS.Format("15:04:05.000"), f.ToTS.Format("15:04:05.000"))
	if f.Connections == 0 {
		s = fmt.Sprintf("the capture source dropped %d packets between %s and %s",
			f.SourceDrops, f.FromTS.Format("15:04:05.000"), f.ToTS.Format("15:04:05.000"))
	}
	return s
}

// lossMark is one loss on a connection: it happened between from (the
// connection's last exchange before it) and to (when it was noticed).
type lossMark struct {
	from, to time.Time
	kind     uint8
	bytes    int64
}

const (
	lossGap uint8 = iota
	lossSkip
	lossResponse
	lossDecode
	lossSource
)

// connLoss is what loss tracking keeps of one connection.
type connLoss struct {
	host    string
	clients []string  // client ids seen on it (the first few)
	last    time.Time // its last exchange
	marks   []lossMark
}

// lossState is the loss marks of recent connections, and of the source.
type lossState struct {
	conns  map[uint64]*connLoss
	source []lossMark
	// sourceAt is when the source's drop count was last given.
	sourceAt time.Time
	// lastID and last are the connection of the latest exchange: most
	// exchanges follow one on the same connection.
	lastID uint64
	last   *connLoss
	// forgotAt is when old marks were last forgotten (forgetLoss).
	forgotAt time.Time
}

const (
	// maxLossMarks caps the marks kept per connection: older ones merge.
	maxLossMarks = 32
	// maxConnClients caps the client ids remembered per connection.
	maxConnClients = 4
)

func (c *Correlator) lossConn(id uint64, host string) *connLoss {
	if c.loss.last != nil && c.loss.lastID == id {
		return c.loss.last
	}
	if c.loss.conns == nil {
		c.loss.conns = make(map[uint64]*connLoss)
	}
	cl := c.loss.conns[id]
	if cl == nil {
		if len(c.loss.conns) >= c.opts.MaxClients {
			c.forgetLoss(true)
		}
		cl = &connLoss{host: host}
		c.loss.conns[id] = cl
	}
	c.loss.lastID, c.loss.last = id, cl
	return cl
}

// lossExchange notes e's connection as active, with its client id; an
// answer lost in a gap is a loss.
func (c *Correlator) lossExchange(e *decode.Exchange) {
	if e.Conn == nil {
		return
	}
	cl := c.lossConn(e.Conn.ID, "")
	if cl.host == "" {
		cl.host = c.hostOf(e)
	}
	if !slices.Contains(cl.clients, e.ClientID) && len(cl.clients) < maxConnClients {
		cl.clients = append(cl.clients, e.ClientID)
	}
	if e.Response == decode.ResponseLost {
		cl.add(lossMark{from: e.ReqTime.UTC(), to: c.now, kind: lossResponse})
	}
	if t := e.ReqTime.UTC(); t.After(cl.last) {
		cl.last = t
	}
	if t := e.RespTime.UTC(); t.After(cl.last) {
		cl.last = t
	}
}

// Anomaly takes in one decoder anomaly: bytes or answers lost on a
// connection are remembered for the hazards that rest on absence. a is
// only read during the call. Anomalies must come in the decoder's order,
// with the exchanges.
func (c *Correlator) Anomaly(a *decode.Anomaly) {
	if c.closed || a == nil || a.Conn == nil {
		return
	}
	kind, ok := lossKind(a.Kind)
	if !ok {
		return
	}
	t := a.Time.UTC()
	if t.After(c.now) {
		c.now = t
	}
	cl := c.lossConn(a.Conn.ID, "")
	if cl.host == "" {
		cl.host = c.names.of(a.Conn).host
	}
	from := cl.last
	if from.IsZero() || from.After(t) {
		from = a.Conn.Start.UTC()
	}
	cl.add(lossMark{from: from, to: t, kind: kind, bytes: a.Bytes})
}

// lossKind is the loss an anomaly of kind k stands for; ok is false for
// none (not Kafka, TLS, an API kmsg does not know: not group traffic
// lost).
func lossKind(k decode.AnomalyKind) (kind uint8, ok bool) {
	switch k {
	case decode.AnomalyGap:
		return lossGap, true
	case decode.AnomalyResync, decode.AnomalyOversize, decode.AnomalyBufferLimit:
		return lossSkip, true
	case decode.AnomalyUnmatchedResponse, decode.AnomalyPendingOverflow:
		return lossResponse, true
	case decode.AnomalyDecodeError:
		return lossDecode, true
	}
	return 0, false
}

// SourceLoss tells the Correlator that the capture source dropped n
// packets or events (kernel ring, eBPF ring) since its previous call (or
// the start), by capture time at: they may have belonged to any
// connection.
func (c *Correlator) SourceLoss(at time.Time, n int64) {
	if c.closed || n <= 0 {
		return
	}
	at = at.UTC()
	from := c.loss.sourceAt // zero: since the start
	if from.After(at) {
		from = at
	}
	c.loss.sourceAt = at
	c.loss.source = append(c.loss.source, lossMark{from: from, to: at, kind: lossSource, bytes: n})
	if len(c.loss.source) > maxLossMarks {
		c.loss.source = c.loss.source[1:]
	}
}

func (cl *connLoss) add(m lossMark) {
	if len(cl.marks) == maxLossMarks {
		// Merge the two oldest: the window they cover stays covered.
		a, b := cl.marks[0], cl.marks[1]
		b.from = minTime(a.from, b.from)
		b.to = maxTime(a.to, b.to)
		cl.marks = cl.marks[1:]
		cl.marks[0] = b
	}
	cl.marks = append(cl.marks, m)
}

// lossFor sums the loss on the connections of clients (a connection whose
// client id was never seen counts for every client of its host) over
// [from, to]; the figures' Connections is 0 when nothing was lost.
func (c *Correlator) lossFor(clients []clientKey, from, to time.Time) LossFigures {
	f := LossFigures{FromTS: TimeOf(from), ToTS: TimeOf(to)}
	for _, id := range sortedKeys(c.loss.conns) {
		cl := c.loss.conns[id]
		if len(cl.marks) == 0 || !cl.belongs(clients) {
			continue
		}
		hit := false
		for _, m := range cl.marks {
			if m.to.Before(from) || m.from.After(to) {
				continue
			}
			hit = true
			f.add(m)
		}
		if hit {
			f.Connections++
		}
	}
	for _, m := range c.loss.source {
		if !m.to.Before(from) && !m.from.After(to) {
			f.SourceDrops += m.bytes
		}
	}
	return f
}

func (f *LossFigures) add(m lossMark) {
	switch m.kind {
	case lossGap:
		f.Gaps++
		if m.bytes < 0 || f.GapBytes < 0 {
			f.GapBytes = -1
		} else {
			f.GapBytes += m.bytes
		}
	case lossSkip:
		f.Skips++
		f.SkippedBytes += max(m.bytes, 0)
	case lossResponse:
		f.ResponsesLost++
	case lossDecode:
		f.DecodeErrors++
	}
}

// belongs reports whether the connection may carry one of clients'
// traffic: a client id of theirs was seen on it, or none was and it comes
// from one of their hosts. A client whose host is unknown (a member known
// only from others' answers), or no client at all, may be on any.
func (cl *connLoss) belongs(clients []clientKey) bool {
	if len(clients) == 0 {
		return true
	}
	for _, k := range clients {
		if k.host == "" {
			return true
		}
		if k.host != cl.host {
			continue
		}
		if len(cl.clients) == 0 || slices.Contains(cl.clients, k.clientID) {
			return true
		}
	}
	return false
}

// lossMemory is how long loss marks are kept: longer than any window a
// hazard looks back over (session and rebalance timeouts, StormWindow).
const lossMemory = 30 * time.Minute

// forgetLoss drops marks older than lossMemory and connections with
// nothing left to say; all forgets the oldest tenth of the connections too
// (the map is at its cap).
func (c *Correlator) forgetLoss(all bool) {
	old := c.now.Add(-lossMemory)
	for id, cl := range c.loss.conns {
		i := 0
		for i < len(cl.marks) && cl.marks[i].to.Before(old) {
			i++
		}
		cl.marks = cl.marks[i:]
		if len(cl.marks) == 0 && cl.last.Before(old) {
			delete(c.loss.conns, id)
		}
	}
	c.loss.last = nil
	if !all || len(c.loss.conns) < c.opts.MaxClients {
		return
	}
	ids := sortedKeys(c.loss.conns) // IDs grow with first packet: oldest first
	for _, id := range ids[:len(ids)/10+1] {
		delete(c.loss.conns, id)
	}
	c.loss.last = nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
