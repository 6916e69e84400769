package correlate

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// maxAckedRuns bounds the acknowledged runs kept per partition: when
// full, the older half is forgotten at once (not one run per Produce, a
// copy of the whole list each time).
const maxAckedRuns = 64

// ackedRun is records a partition's leader acknowledged at consecutive
// offsets, to one client, in one or more Produce responses.
type ackedRun struct {
	first, last int64
	broker      netip.AddrPort // the leader's address
	acks        int16
	client      clientKey
	topicID     [16]byte
	pid         int64 // the idempotent producer's id; -1 none
	seq         int32 // the sequence of the record at first (pid >= 0)
	evs         [2]Evidence
	nev         int // evs holds its first acknowledgement, and its last if 2
}

// lostAcked is the part of one run a new leader's offsets took over.
type lostAcked struct {
	run         ackedRun
	first, last int64
}

// producedAcked follows what leaders acknowledged of partition p (s its
// end): records first..last of the Produce e, whose partition records
// are recs, of the topic with id (zero: not on the wire). Offsets only
// grow in a log, unless its leader failed before its followers had the
// records it acknowledged (acks=1, or an unclean election): the next
// leader then gives those offsets to new records, and the acknowledged
// ones are gone. A Produce answered by one broker with offsets that
// another broker acknowledged before is that: acked_records_lost for the
// records the other acknowledged from there on. Answers of one broker
// may come in another order than its appends (two producers' requests
// on two connections), so offsets going back on one broker tell
// nothing; nor do those of a topic deleted and made again (another id),
// nor an idempotent producer's retry of a batch the broker has (the
// same producer id and sequence at the same offset), answered with its
// first offsets again.
func (c *Correlator) producedAcked(e *decode.Exchange, req *kmsg.ProduceRequest, s *endState, p tp, first, last int64, id [16]byte, recs []byte) {
	pid, _, ok := decode.BatchProducer(recs)
	seq, _ := decode.BatchSequence(recs)
	if !ok || seq < 0 {
		pid = -1
	}
	var broker netip.AddrPort
	if e.Conn != nil {
		broker = e.Conn.Server
	}
	var lost []lostAcked
	// Offsets above every run's (a log growing, the usual case) take
	// over none of them: the runs stay as they are.
	overlap := len(s.acked) > 0 && first <= s.ackedHi
	keep := s.acked
	if overlap {
		keep = s.acked[:0]
	}
	for _, r := range s.acked {
		if !overlap {
			break
		}
		switch {
		case r.last < first:
			keep = append(keep, r)
		case pid >= 0 && r.pid == pid && first >= r.first && first <= r.last && int64(r.seq)+first-r.first == int64(seq):
			return // a retry answered again: nothing new
		case r.broker == broker || (r.topicID != id && r.topicID != [16]byte{} && id != [16]byte{}):
			if r.first < first { // out of order, or another topic: keep what is below
				r.last = first - 1
				keep = append(keep, r)
			}
		default:
			lost = append(lost, lostAcked{run: r, first: max(first, r.first), last: r.last})
			if r.first < first {
				r.last = first - 1
				keep = append(keep, r)
			}
		}
	}
	s.acked = keep
	ev, k := c.evidenceOf(e), c.keyOf(e)
	n := len(s.acked)
	if r := s.lastAcked(); r != nil && r.last+1 == first && r.broker == broker && r.client == k && r.acks == req.Acks && r.topicID == id &&
		r.pid == pid && (pid < 0 || int64(r.seq)+first-r.first == int64(seq)) {
		r.last = last
		r.evs[1], r.nev = ev, 2 // its first and last acknowledgement
	} else {
		if n >= maxAckedRuns {
			s.acked = append(s.acked[:0], s.acked[n/2:]...)
		}
		s.acked = append(s.acked, ackedRun{first: first, last: last, broker: broker, acks: req.Acks, client: k,
			topicID: id, pid: pid, seq: seq, evs: [2]Evidence{ev}, nev: 1})
	}
	if overlap {
		s.ackedHi = last
		for _, r := range s.acked {
			s.ackedHi = max(s.ackedHi, r.last)
		}
	} else {
		s.ackedHi = max(s.ackedHi, last)
	}
	if len(lost) > 0 {
		c.ackedLost(e, p, broker, first, lost)
	}
}

// lastAcked is the run acknowledged last, nil none.
func (s *endState) lastAcked() *ackedRun {
	if len(s.acked) == 0 {
		return nil
	}
	return &s.acked[len(s.acked)-1]
}

// ackedLost reports the acknowledged records a new acknowledgement
// (first, by broker) took the offsets of: one hazard per client, leader
// and acks.
func (c *Correlator) ackedLost(e *decode.Exchange, p tp, broker netip.AddrPort, first int64, lost []lostAcked) {
	type who struct {
		client clientKey
		broker netip.AddrPort
		acks   int16
	}
	type tally struct {
		from, to, n int64
		evs         []Evidence
	}
	by := map[who]*tally{}
	var order []who
	for _, l := range lost {
		w := who{l.run.client, l.run.broker, l.run.acks}
		t := by[w]
		if t == nil {
			t = &tally{from: l.first, to: l.last}
			by[w] = t
			order = append(order, w)
		}
		t.from, t.to, t.n = min(t.from, l.first), max(t.to, l.last), t.n+l.last-l.first+1
		t.evs = append(t.evs, l.run.evs[:l.run.nev]...)
	}
	at := e.RespTime.UTC()
	for _, w := range order {
		t := by[w]
		ev := &HazardEvent{Kind: HazardAckedRecordsLost, Severity: SeverityCritical, Topic: p.topic, Partition: i32p(p.partition),
			ClientID: w.client.clientID, ClientHost: w.client.host, Acks: func(v int16) *int16 { return &v }(w.acks),
			FromOffset: i64(t.from), ToOffset: i64(t.to), Skipped: i64(t.n), at: at}
		ev.Summary = fmt.Sprintf("%s/%d: %s acknowledged %d records at offsets %d..%d to client %s on %s (acks=%s); "+
			"then %s, leading the partition, gave offset %d on to new records: the acknowledged ones are lost (the leader "+
			"failed before its followers had them)", p.topic, p.partition, c.brokerName(w.broker.String()), t.n, t.from, t.to,
			w.client.clientID, w.client.host, acksName(w.acks), c.brokerName(broker.String()), first)
		ev.Evidence = append(t.evs, c.evidenceOf(e))
		c.report(episodeKey(HazardAckedRecordsLost, p.topic, strconv.Itoa(int(p.partition)), w.client.host, w.client.clientID,
			w.broker.String(), broker.String(), itoa64(first)), ev)
	}
}

// brokerName names a broker by its node id when Metadata told it, else
// by its address.
func (c *Correlator) brokerName(addr string) string {
	if id := c.nodeAt(addr); id >= 0 {
		return fmt.Sprintf("broker %d (%s)", id, addr)
	}
	return "broker " + addr
}

func acksName(acks int16) string {
	if acks == -1 {
		return "all"
	}
	return strconv.Itoa(int(acks))
}
