package route

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// Shards correlates one input over n correlators, each on a goroutine of
// its own, with this package's rules: every exchange and anomaly goes to
// the shards of its client (Router, without its buffer: a shard gets an
// item in its time or never), and every other shard gets its times only
// and its connection's loss bookkeeping only (correlate's Tick), so that
// what waits for time (session timeouts, settled hazards) is judged at
// the same item everywhere, and what rests on absence sees every loss.
// Anomalies, which the correlator takes as loss only, go to every shard.
// A shard keeps the events whose key (EventKey) is its own.
//
// The output is the serial correlator's: each item's events, gathered
// from the shards, are written in one order whatever n is (the keys'
// order, SortEvents; events of one key as their correlator gave them),
// and Snapshot and Stats are put together from the shards' owned parts.
// With n = 1 the one correlator runs on the caller's goroutine.
//
// Batch, Close, Snapshot and Stats are called from one goroutine, which
// is also the one the writes happen on.
type Shards struct {
	n      int32
	opts   correlate.Options
	rt     *Router[struct{}, int32]
	shards []*shard
	// jobs are the batches given to the shards and not yet written,
	// oldest first; free are done ones, for reuse.
	jobs, free []*job
	cur        *job // being routed

	exchanges int64
	// The hazards written, for Snapshot: the first MaxHazards, and counts.
	hazards    []correlate.HazardEvent
	dropped    int64
	severity   map[string]int
	incomplete int64
	evs        []correlate.Event // an item's, being written
	pos        []int             // finish's, per shard
}

// MaxInFlight is how many batches Shards hands to its correlators before
// it waits to write the oldest.
const MaxInFlight = 4

// Item is one input of a batch: an exchange, an anomaly, a connection's
// end (Closed, at At for Reason) or a capture source's loss (Lost events
// by At).
type Item struct {
	Exchange *decode.Exchange
	Anomaly  *decode.Anomaly
	Closed   *capture.Conn
	Reason   capture.CloseReason
	Lost     int64
	At       time.Time
}

type job struct {
	items  []Item
	to     []uint64 // per item: a bit per shard that takes it whole
	counts []int8   // per exchange: the shard that counts it
	res    [][]keyed
	write  func(i int, evs []correlate.Event)
	done   func()
	wg     sync.WaitGroup
	close  bool // the end of the input, at items[0].At
	// placed are the groups placed while routing it (Router.Place).
	placed []Placement
}

// keyed is an event a shard kept, of item i.
type keyed struct {
	i  int32
	ev correlate.Event
}

type shard struct {
	q    int32
	n    int32
	corr *correlate.Correlator
	in   chan *job
	i    int32 // the item being correlated
	out  []keyed
	// groups are the groups' shards, as placed (by name).
	groups map[string]int32
}

// owner is the shard of k.
func (sh *shard) owner(k key) int32 {
	if k.kind == 'g' {
		if q, ok := sh.groups[k.a]; ok {
			return q
		}
	}
	return k.shard(sh.n)
}

// MaxShards bounds n.
const MaxShards = 64

// NewShards returns Shards over n correlators (1 to MaxShards) made with
// opts. Close must be called.
func NewShards(n int, opts *correlate.Options) *Shards {
	n = min(max(n, 1), MaxShards)
	s := &Shards{n: int32(n), opts: opts.WithDefaults(), severity: map[string]int{
		correlate.SeverityCritical: 0, correlate.SeverityWarn: 0, correlate.SeverityInfo: 0}}
	s.rt = New[struct{}](s.n, func(q int32, i int32) { s.cur.to[i] |= 1 << q })
	s.rt.SetBuffer(0)
	s.rt.Place()
	for q := range s.n {
		sh := &shard{q: q, n: s.n, groups: map[string]int32{}}
		o := s.opts
		if s.n > 1 {
			o.CountsGroup = func(group string) bool { return sh.owner(key{kind: 'g', a: group}) == q }
		}
		sh.corr = correlate.New(&o, correlate.SinkFunc(sh.event))
		if s.n > 1 {
			sh.in = make(chan *job, MaxInFlight)
			go sh.run()
		}
		s.shards = append(s.shards, sh)
	}
	return s
}

// CrossBinds counts the clients bound to groups of two shards (see
// Router.CrossBinds): past one, the output may differ from one
// correlator's.
func (s *Shards) CrossBinds() int64 { return s.rt.CrossBinds() }

// N returns the number of shards.
func (s *Shards) N() int { return int(s.n) }

func (sh *shard) event(ev correlate.Event) {
	k := eventKey(ev)
	if sh.n > 1 && sh.owner(k) != sh.q {
		return
	}
	sh.out = append(sh.out, keyed{sh.i, ev})
}

func (sh *shard) run() {
	for j := range sh.in {
		sh.correlate(j)
		j.wg.Done()
	}
}

// correlate takes the items of j in: whole those routed to it, their
// times only the others.
func (sh *shard) correlate(j *job) {
	sh.out = j.res[sh.q][:0]
	for _, p := range j.placed {
		sh.groups[strings.TrimPrefix(p.Key, "g\x00")] = p.Shard
	}
	c := sh.corr
	if j.close {
		sh.i = 0
		c.Close(j.items[0].At)
		j.res[sh.q] = sh.out
		return
	}
	for i := range j.items {
		it := &j.items[i]
		sh.i = int32(i)
		whole := j.to[i]>>sh.q&1 == 1
		switch {
		case it.Exchange != nil && !whole:
			c.Tick(it.Exchange)
		case it.Exchange != nil && int32(j.counts[i]) == sh.q:
			c.Exchange(it.Exchange)
		case it.Exchange != nil:
			c.ExchangeUncounted(it.Exchange)
		case it.Anomaly != nil:
			c.Anomaly(it.Anomaly) // loss only: every shard keeps all of it
		case it.Closed != nil:
			c.ConnClosed(it.Closed, it.At, it.Reason)
		case it.Lost > 0:
			c.SourceLoss(it.At, it.Lost)
		}
	}
	j.res[sh.q] = sh.out
}

func (s *Shards) job() *job {
	var j *job
	if n := len(s.free); n > 0 {
		j, s.free = s.free[n-1], s.free[:n-1]
	} else {
		j = &job{res: make([][]keyed, s.n)}
	}
	j.close = false
	return j
}

// Batch correlates items. For each, in order, write gets its index and
// the events it gave (only valid during the call); then done is called.
// Both are called on the caller's goroutine, during this call or a later
// one of Batch or Close: items must stay as they are until done.
func (s *Shards) Batch(items []Item, write func(i int, evs []correlate.Event), done func()) {
	j := s.job()
	j.items, j.write, j.done = items, write, done
	j.to = slices.Grow(j.to[:0], len(items))[:len(items)]
	j.counts = slices.Grow(j.counts[:0], len(items))[:len(items)]
	clear(j.to)
	s.cur = j
	if s.n == 1 {
		for i := range j.to {
			j.to[i] = 1 // all of it to the one correlator, which counts it
		}
		clear(j.counts)
		s.start(j)
		s.Flush()
		return
	}
	for i := range items { // anomalies are not routed: every shard takes them whole
		if x := items[i].Exchange; x != nil {
			s.exchanges++
			j.counts[i] = int8(s.rt.Exchange(struct{}{}, x.ReqTime, x, int32(i)))
		}
	}
	j.placed = append(j.placed[:0], s.rt.Placed()...)
	s.start(j)
	for len(s.jobs) > MaxInFlight {
		s.finish()
	}
}

func (s *Shards) start(j *job) {
	if s.n == 1 {
		s.shards[0].correlate(j)
	} else {
		j.wg.Add(int(s.n))
		for _, sh := range s.shards {
			sh.in <- j
		}
	}
	s.jobs = append(s.jobs, j)
}

// finish writes the oldest batch once every shard has correlated it.
func (s *Shards) finish() {
	j := s.jobs[0]
	s.jobs = s.jobs[1:]
	j.wg.Wait()
	pos := s.pos[:0]
	for range s.n {
		pos = append(pos, 0)
	}
	s.pos = pos
	for i := range j.items {
		s.evs = s.evs[:0]
		for q := range s.n {
			r := j.res[q]
			for pos[q] < len(r) && r[pos[q]].i == int32(i) {
				s.evs = append(s.evs, r[pos[q]].ev)
				pos[q]++
			}
		}
		s.writeItem(j, i)
	}
	for q := range j.res {
		clear(j.res[q])
		j.res[q] = j.res[q][:0]
	}
	done := j.done
	j.items, j.write, j.done = nil, nil, nil
	s.free = append(s.free, j)
	if done != nil {
		done()
	}
}

// writeItem writes the events gathered (s.evs) for item i of j, in the
// keys' order: a key's events all come from its one shard, in order.
func (s *Shards) writeItem(j *job, i int) {
	SortEvents(s.evs)
	for _, ev := range s.evs {
		if h, ok := ev.(*correlate.HazardEvent); ok {
			s.hazard(h)
		}
	}
	if j.write != nil {
		j.write(i, s.evs)
	}
	clear(s.evs)
}

// hazard counts a hazard written, as the correlator's Snapshot counts it.
func (s *Shards) hazard(h *correlate.HazardEvent) {
	s.severity[h.Severity]++
	if h.Downgraded() {
		s.incomplete++
	}
	if len(s.hazards) < s.opts.Hazards.MaxHazards {
		s.hazards = append(s.hazards, *h)
	} else {
		s.dropped++
	}
}

// Flush writes every batch given so far.
func (s *Shards) Flush() {
	for len(s.jobs) > 0 {
		s.finish()
	}
}

// Close writes every batch, then ends the input at capture time t (see
// correlate's Close) and writes the events that gives with write. The
// shards' goroutines end.
func (s *Shards) Close(t time.Time, write func(evs []correlate.Event)) {
	s.Flush()
	j := s.job()
	j.close = true
	j.items = []Item{{At: t}}
	j.to, j.counts = j.to[:0], j.counts[:0]
	if write != nil {
		j.write = func(_ int, evs []correlate.Event) { write(evs) }
	}
	s.start(j)
	s.Flush()
	for _, sh := range s.shards {
		if sh.in != nil {
			close(sh.in)
			sh.in = nil
		}
	}
}

// Stats returns the counters so far, as one correlator would count them.
// Call it between batches (after Flush or Close).
func (s *Shards) Stats() correlate.Stats {
	if s.n == 1 {
		return s.shards[0].corr.Stats()
	}
	var out correlate.Stats
	ids := map[[16]byte]bool{}
	for _, sh := range s.shards {
		st := sh.corr.Stats()
		out.Fetches += st.Fetches
		out.FetchesAttributed += st.FetchesAttributed
		out.FetchesAmbiguous += st.FetchesAmbiguous
		out.FetchesUnknown += st.FetchesUnknown
		out.ReplicaFetches += st.ReplicaFetches
		out.UnknownFetchSessions += st.UnknownFetchSessions
		out.Commits += st.Commits
		out.CommitsAccepted += st.CommitsAccepted
		out.CommitsRejected += st.CommitsRejected
		out.CommitsUnanswered += st.CommitsUnanswered
		out.ExpiriesRetracted += st.ExpiriesRetracted
		addLimits(&out.Limits, st.Limits)
		for _, id := range sh.corr.UnresolvedTopics() {
			ids[id] = true
		}
	}
	out.Exchanges = s.exchanges
	out.HazardsIncomplete = s.incomplete
	out.UnresolvedTopicIDs = len(ids)
	return out
}

// addLimits adds a shard's limit counters to into. Every shard learns
// every topic id (Metadata goes to all) and every partition end (Tick), so
// those are the largest; the
// others are counted where the state they drop is kept. (Past a limit,
// the shards' tables are not the one correlator's: what each forgets
// differs, see docs/sharding.md.)
func addLimits(into *correlate.Limits, l correlate.Limits) {
	into.GroupsDropped += l.GroupsDropped
	into.GroupsEvicted += l.GroupsEvicted
	into.MembersDropped += l.MembersDropped
	into.PartitionsDropped += l.PartitionsDropped
	into.ClientsEvicted += l.ClientsEvicted
	into.GenerationsDropped += l.GenerationsDropped
	into.CommitsDropped += l.CommitsDropped
	into.SessionsEvicted += l.SessionsEvicted
	into.TopicIDsEvicted = max(into.TopicIDsEvicted, l.TopicIDsEvicted)
	into.ShareHeldDropped += l.ShareHeldDropped
	into.EndsDropped = max(into.EndsDropped, l.EndsDropped)
	into.TxnsEvicted += l.TxnsEvicted
}

// Snapshot returns the state, as one correlator's Snapshot gives it: each
// group, client, transaction and stable partition from the shard that
// owns it, the hazards as they were written. Call it between batches.
func (s *Shards) Snapshot() *correlate.Snapshot {
	if s.n == 1 {
		return s.shards[0].corr.Snapshot()
	}
	var out *correlate.Snapshot
	txn := s.rt.Shard(TxnKey())
	for q, sh := range s.shards {
		sn := sh.corr.Snapshot()
		if out == nil {
			out = &correlate.Snapshot{Time: sn.Time, Brokers: sn.Brokers, Groups: []correlate.Group{},
				Clients: []correlate.Client{}}
		}
		own := func(key string) bool { return s.rt.Shard(key) == int32(q) }
		for _, g := range sn.Groups {
			if own(GroupKey(g.Group)) {
				out.Groups = append(out.Groups, g)
			}
		}
		for _, c := range sn.Clients {
			if own(s.rt.Home(ClientOf(c.ClientHost, c.ClientID))) {
				out.Clients = append(out.Clients, c)
			}
		}
		for _, u := range sn.Unattributed {
			if own(s.rt.Home(ClientOf(u.ClientHost, u.ClientID))) {
				out.Unattributed = append(out.Unattributed, u)
			}
		}
		if int32(q) == txn {
			out.Transactions, out.StablePartitions = sn.Transactions, sn.StablePartitions
		}
	}
	slices.SortStableFunc(out.Groups, func(a, b correlate.Group) int { return strings.Compare(a.Group, b.Group) })
	byClient := func(ah, aid, bh, bid string) int { return cmp.Or(strings.Compare(ah, bh), strings.Compare(aid, bid)) }
	slices.SortStableFunc(out.Clients, func(a, b correlate.Client) int {
		return byClient(a.ClientHost, a.ClientID, b.ClientHost, b.ClientID)
	})
	slices.SortStableFunc(out.Unattributed, func(a, b correlate.Consumption) int {
		return byClient(a.ClientHost, a.ClientID, b.ClientHost, b.ClientID)
	})
	out.Stats = s.Stats()
	out.Hazards = make([]correlate.HazardEvent, len(s.hazards))
	for i, h := range s.hazards {
		h.Evidence = append([]correlate.Evidence(nil), h.Evidence...) // as correlate's Snapshot copies it
		out.Hazards[i] = h
	}
	correlate.SortHazards(out.Hazards)
	out.HazardCounts = maps.Clone(s.severity)
	out.HazardsDropped = s.dropped
	return out
}
