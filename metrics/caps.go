package metrics

import (
	"strconv"
	"sync"

	"github.com/kwire/kwire/correlate"
)

// Label caps. Every label value is a series, and some values are anyone's
// to choose: a client names any group in a FindCoordinator or a commit,
// any topic and partition in a commit the broker refuses. Two refused
// commits naming 100,000 partitions each made 400,000 series (a 31 MB
// scrape). So each such label admits a bounded number of values; the rest
// are exported as "other" (summed), and kwire_metrics_folded_total and
// kwire_metrics_label_values_folded say how much was folded.
//
// Groups seen real (members, a generation, an accepted commit: as
// correlate judges them, see correlate.Limits.GroupsEvicted) have their
// own budget, so that names merely mentioned, however many and however
// early, cannot take a real group's label: mentioned names get a tenth of
// it.

// other is the label value that stands for the values past a cap.
const other = "other"

// Defaults of Options' caps.
const (
	defaultMaxGroups     = 10000
	defaultMaxTopics     = 10000
	defaultMaxPartitions = 50000
	defaultMaxMembers    = 20000
	defaultMaxTxnIDs     = 10000
	defaultMaxBrokers    = 1000
)

// labelSet admits up to max distinct values of a label. Values admitted
// stay admitted: their counters keep counting under their own name.
type labelSet struct {
	max  int
	vals map[string]struct{}
}

func newLabelSet(max int) labelSet { return labelSet{max: max, vals: map[string]struct{}{}} }

func (s *labelSet) has(v string) bool {
	_, ok := s.vals[v]
	return ok
}

// admit reports whether v has its own label value, admitting it if there
// is room.
func (s *labelSet) admit(v string) bool {
	if s.has(v) {
		return true
	}
	if len(s.vals) >= s.max {
		return false
	}
	s.vals[v] = struct{}{}
	return true
}

// tiered decides one label's values: values seen real up to n, values
// only named up to a tenth of n, apart, so that names, however many and
// however early, never take a real value's place. The group label
// (groups seen real: members, a generation, an accepted commit), the
// topic label (topics of real groups, or with records fetched) and the
// transactional_id label (ids with a producer or a transaction) are
// decided so. Safe for concurrent use (events and snapshots may come from
// two goroutines).
type tiered struct {
	mu          sync.Mutex
	real, named labelSet
}

func newTiered(n int) *tiered {
	return &tiered{real: newLabelSet(n), named: newLabelSet(max(n/10, 1))}
}

// label returns v's label value and whether it was folded into other. A
// value that had a named label moves to the real budget when seen real.
func (t *tiered) label(v string, real bool) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.real.has(v):
	case real && t.real.admit(v):
		delete(t.named.vals, v)
	case !t.named.admit(v):
		return other, true
	}
	return v, false
}

// realGroup reports whether a snapshot's group has had a member, a
// generation or an accepted commit: what correlate anchors a group on
// (not an OffsetFetch answer: anyone may ask for any group's offsets).
func realGroup(g *correlate.Group) bool {
	if len(g.Members) > 0 || g.Generation >= 0 || len(g.Generations) > 0 {
		return true
	}
	for i := range g.Partitions {
		p := &g.Partitions[i]
		if p.Committed != nil && p.CommittedSource != "offset_fetch" {
			return true
		}
		for _, cm := range p.Commits {
			if cm.ErrorCode == 0 {
				return true
			}
		}
	}
	return false
}

// foldCounts count, for one snapshot, the label values exported as other.
type foldCounts struct {
	groups, topics, partitions, members, txns int
}

// realFirst returns the indexes of groups, the real ones first, each part
// in snapshot order: real groups take the labels and rows first.
func realFirst(groups []correlate.Group) []int {
	out := make([]int, 0, len(groups))
	for _, real := range []bool{true, false} {
		for i := range groups {
			if realGroup(&groups[i]) == real {
				out = append(out, i)
			}
		}
	}
	return out
}

// rowMaker turns one snapshot's groups into rows within the caps.
type rowMaker struct {
	c       *stateCollector
	members []memberRow
	parts   []partRow
	shares  []shareRow
	// partsLeft are the partition rows left to groups only named [0] and
	// to real groups [1]; membersLeft the member rows.
	partsLeft    [2]int
	membersLeft  int
	topicsFolded map[string]bool
	fold         foldCounts
}

// group makes g's rows and returns its group row.
func (r *rowMaker) group(g *correlate.Group) groupRow {
	real := realGroup(g)
	name, folded := r.c.groupIDs.label(g.Group, real)
	if folded {
		r.fold.groups++
	}
	live := 0
	for _, m := range g.Members {
		if m.Status != "live" {
			continue
		}
		live++
		if !r.c.caps.MemberInfo {
			continue
		}
		if name == other || r.membersLeft <= 0 {
			r.members = append(r.members, memberRow{group: name, id: other, clientID: other, host: other, n: 1})
			r.fold.members++
			continue
		}
		r.membersLeft--
		pid := ""
		if m.PID != 0 {
			pid = strconv.FormatUint(uint64(m.PID), 10)
		}
		r.members = append(r.members, memberRow{name, m.MemberID, m.ClientID, m.ClientHost, pid, m.Comm, 1})
	}
	if g.Share != nil {
		for _, p := range g.Share.Partitions {
			r.shares = append(r.shares, shareRow{group: name, topic: r.topic(p.Topic, real || p.Acquired > 0), part: r.part(p.Partition, real),
				counts: p.ShareCounts, held: p.Held})
		}
	}
	for _, p := range g.Partitions {
		r.parts = append(r.parts, partRow{group: name, topic: r.topic(p.Topic, real || p.Records > 0), part: r.part(p.Partition, real),
			records: p.Records, bytes: p.Bytes,
			committed: val(p.Committed), position: val(p.Position), hwm: val(p.HighWatermark), lag: val(p.Lag), committedSum: val(p.Committed),
			lagSeconds: valFloat(p.LagSeconds)})
	}
	gen := g.Generation
	if name == other {
		gen = -1
	}
	return groupRow{group: name, members: live, generation: gen, lagSeconds: valFloat(g.LagSeconds)}
}

// topic returns topic's label value. real: the topic is a real group's,
// or records of it were fetched (it exists); else it was only named.
func (r *rowMaker) topic(topic string, real bool) string {
	l, folded := r.c.topics.label(topic, real)
	if folded {
		r.topicsFolded[topic] = true
	}
	return l
}

// part returns the partition label value of one more row of a group,
// real or not.
func (r *rowMaker) part(p int32, real bool) string {
	i := 0
	if real {
		i = 1
	}
	if r.partsLeft[i] <= 0 {
		r.fold.partitions++
		return other
	}
	r.partsLeft[i]--
	return strconv.Itoa(int(p))
}

// mergeRows merges the rows with the same key into the first of them,
// in order of first appearance: folded label values make rows that would
// otherwise be the same series twice, which a scrape refuses.
func mergeRows[K comparable, R any](rows []R, key func(*R) K, add func(into, r *R)) []R {
	at := make(map[K]int, len(rows))
	out := rows[:0]
	for i := range rows {
		k := key(&rows[i])
		if j, ok := at[k]; ok {
			add(&out[j], &rows[i])
			continue
		}
		at[k] = len(out)
		out = append(out, rows[i])
	}
	return out
}

// addPart adds partition row p into a row of other partitions (or of a
// topic): the counters, lag and committed offsets summed, the offsets no
// one partition's.
func addPart(into, p *partRow) {
	into.records += p.records
	into.bytes += p.bytes
	if p.lag >= 0 {
		into.lag = max(into.lag, 0) + p.lag
	}
	if p.committedSum >= 0 {
		into.committedSum = max(into.committedSum, 0) + p.committedSum
	}
	into.committed, into.position, into.hwm = -1, -1, -1
	into.lagSeconds = max(into.lagSeconds, p.lagSeconds)
}

func addShare(into, s *shareRow) {
	into.counts.Acquired += s.counts.Acquired
	into.counts.Redelivered += s.counts.Redelivered
	into.counts.Accepted += s.counts.Accepted
	into.counts.Released += s.counts.Released
	into.counts.Rejected += s.counts.Rejected
	into.counts.Renewed += s.counts.Renewed
	into.counts.LockExpired += s.counts.LockExpired
	into.counts.MaxDeliveryCount = max(into.counts.MaxDeliveryCount, s.counts.MaxDeliveryCount)
	into.held += s.held
}
