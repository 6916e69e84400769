package correlate

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// sessionKey names a fetch session (KIP-227): ids are per broker.
type sessionKey struct {
	broker string
	id     int32
}

// fetchSession is the fetch offset of every partition in a session: an
// incremental fetch names only the partitions whose offset changed.
type fetchSession struct {
	offsets map[tp]int64
	used    time.Time
	// closed is when a request closed the session (epoch -1 or a new
	// full fetch naming it); zero while it is open. A request sent
	// before then still belongs to it: a client closing its consumer
	// cancels its in-flight incremental Fetch and sends the close on
	// another connection, and the cancelled request, never answered,
	// reaches the correlator only when its own connection ends, after the
	// close (seen with kgo against real Kafka).
	closed time.Time
}

// at returns s if it was open at time t, else nil.
func (s *fetchSession) at(t time.Time) *fetchSession {
	if s == nil || (!s.closed.IsZero() && !t.Before(s.closed)) {
		return nil
	}
	return s
}

// fetchSession applies a Fetch to its session and returns the fetch offset
// of every partition the response may carry (for a full fetch, those of the
// request). KIP-227: session id 0 and epoch -1 is a fetch without session;
// epoch 0 a full fetch opening the session the response names (closing the
// request's session id); epoch > 0 an incremental fetch, with forgotten
// partitions removed.
func (c *Correlator) fetchSession(e *decode.Exchange, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, asked map[tp]int64) map[tp]int64 {
	if req.Version < 7 || e.Conn == nil {
		return asked
	}
	broker := c.names.of(e.Conn).conn.Broker
	key := sessionKey{broker, req.SessionID}
	if req.SessionEpoch <= 0 {
		if s := c.sessions[key]; s != nil && req.SessionID != 0 && s.closed.IsZero() {
			s.closed = e.ReqTime.UTC() // kept for requests sent before (fetchSession.closed)
		}
		if req.SessionEpoch == 0 && resp != nil && resp.ErrorCode == 0 && resp.SessionID != 0 {
			c.openSession(sessionKey{broker, resp.SessionID}, asked, e.ReqTime.UTC())
		}
		return asked
	}
	s := c.sessions[key].at(e.ReqTime.UTC())
	if s == nil {
		c.stats.UnknownFetchSessions++
		s = c.openSession(key, nil, e.ReqTime.UTC())
	}
	s.used = e.ReqTime.UTC()
	for _, ft := range req.ForgottenTopics {
		topic := c.topicKey(ft.Topic, ft.TopicID)
		for _, p := range ft.Partitions {
			delete(s.offsets, tp{topic, p})
		}
	}
	for p, off := range asked {
		s.offsets[p] = off
	}
	if resp != nil && (resp.ErrorCode == kerr.FetchSessionIDNotFound.Code || resp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code) {
		delete(c.sessions, key)
	}
	return s.offsets
}

// openSession starts session key with offsets (copied).
func (c *Correlator) openSession(key sessionKey, offsets map[tp]int64, t time.Time) *fetchSession {
	s := &fetchSession{offsets: make(map[tp]int64, len(offsets)), used: t}
	for p, off := range offsets {
		s.offsets[p] = off
	}
	c.sessions[key] = s
	if len(c.sessions) > c.opts.MaxFetchSessions {
		c.evictSessions()
	}
	return s
}

// evictSessions forgets the least recently used sessions, down to 90% of
// the cap.
func (c *Correlator) evictSessions() {
	keys := make([]sessionKey, 0, len(c.sessions))
	for k := range c.sessions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := c.sessions[keys[i]], c.sessions[keys[j]]
		if !a.used.Equal(b.used) {
			return a.used.Before(b.used)
		}
		if keys[i].broker != keys[j].broker {
			return keys[i].broker < keys[j].broker
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		if len(c.sessions) <= c.opts.MaxFetchSessions*9/10 {
			break
		}
		if c.sessions[k].closed.IsZero() {
			c.stats.Limits.SessionsEvicted++ // a closed one is no loss
		}
		delete(c.sessions, k)
	}
}
