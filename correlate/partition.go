package correlate

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// tp is a topic partition. topic is the topic's name, or "id:<hex>" while
// only its id is known (Fetch v13+, OffsetCommit v10+, KIP-848); such keys
// are renamed as soon as a Metadata response names the id.
type tp struct {
	topic     string
	partition int32
}

// cmpTP orders partitions by topic, then number.
func cmpTP(a, b tp) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// fetchState is what Fetches asked for and got for one partition.
type fetchState struct {
	position   int64 // fetch offset last asked for; -1 unknown
	positionAt time.Time
	hwm        int64 // high watermark, last stable offset and log start
	lso        int64 // offset from the last response with the partition;
	logStart   int64 // -1 unknown
	delivered  int64 // offset after the last complete batch delivered; -1 none
	records    int64
	control    int64 // of which transaction markers (control records)
	aborted    int64 // of which aborted records a read_committed consumer drops
	bytes      int64
	batches    int64
	fetches    int64 // responses with the partition
	notCopied  int64 // of which records not copied (eBPF --snap): not counted
	lastFetch  time.Time
	errCode    int16 // last partition error, and when
	errAt      time.Time
	fetchedBy  string    // member id of the last fetch, when known
	client     clientKey // client of the last fetch
	// readCommitted: the last fetch was read_committed (KIP-98): it
	// reads up to the last stable offset only.
	readCommitted bool
}

func newFetchState() *fetchState {
	return &fetchState{position: -1, hwm: -1, lso: -1, logStart: -1, delivered: -1}
}

// commitRec is one committed partition.
type commitRec struct {
	at         time.Time
	member     string
	generation int32
	offset     int64
	metadata   *string
	code       int16 // -1: no response seen
	clientID   string
	clientHost string
	conn       Conn
	corr       int32 // the OffsetCommit's correlation id, for evidence
}

// partState is one group's state for one partition.
type partState struct {
	fetch          fetchState
	commits        window[commitRec] // the last MaxCommitHistory commits
	commitsDropped int64

	// The committed offset now: the last accepted commit, or a later
	// OffsetFetch answer.
	hasCommitted    bool
	committed       int64
	committedAt     time.Time
	committedBy     string
	committedGen    int32
	committedSource string // "commit" or "offset_fetch"

	listed *listedOffset // last ListOffsets answer

	// pin is when the record at the committed offset was made, once a
	// batch holding it was on the wire (ends_time.go); pinned says pin
	// is the committed offset's.
	pin    recordTime
	pinned bool
	// fetched are the last batches the group's Fetches delivered
	// (maxFetchedBatches): the committed offset is most often in one.
	fetched []batchTime
	// samples are its end and committed offset at the last health ticks
	// (health.go).
	samples []healthSample
}

// listedOffset is a ListOffsets answer for one partition.
type listedOffset struct {
	timestamp int64 // -1 latest, -2 earliest, or a time
	offset    int64
	code      int16
	at        time.Time
}

// part returns g's state for partition p, creating it; nil when the
// partition cap bites: MaxPartitionsPerGroup for each group, and for all
// loose groups together (groups.go), whose partitions any client can name
// in a commit the broker refuses.
func (c *Correlator) part(g *groupState, p tp) *partState {
	if ps := g.parts[p]; ps != nil {
		return ps
	}
	if len(g.parts) >= c.opts.MaxPartitionsPerGroup || !g.anchored && c.loosePartitions >= c.opts.MaxPartitionsPerGroup {
		c.stats.Limits.PartitionsDropped++
		return nil
	}
	ps := &partState{fetch: *newFetchState(), committedGen: -1}
	g.parts[p] = ps
	if !g.anchored {
		c.loosePartitions++
	}
	return ps
}

// addCommit appends r to the history, keeping the last max.
func (ps *partState) addCommit(r commitRec, max int, lim *Limits) {
	ps.commits.push(r)
	if n := ps.commits.trim(max); n > 0 {
		ps.commitsDropped += int64(n)
		lim.CommitsDropped += int64(n)
	}
	if r.code == 0 {
		ps.setCommitted(r.offset, r.at, r.member, r.generation, "commit")
	}
}

func (ps *partState) setCommitted(off int64, at time.Time, member string, gen int32, source string) {
	if ps.hasCommitted && at.Before(ps.committedAt) {
		return
	}
	ps.hasCommitted, ps.committed, ps.committedAt = true, off, at
	ps.committedBy, ps.committedGen, ps.committedSource = member, gen, source
}

// topicKey returns the key of a topic named name or identified by id.
func (c *Correlator) topicKey(name string, id [16]byte) string {
	if id == ([16]byte{}) {
		return name
	}
	if n, ok := c.topicName(id); ok {
		return n
	}
	c.markUnresolved(id)
	return idKey(id)
}

func idKey(id [16]byte) string { return "id:" + hex.EncodeToString(id[:]) }

// sortedAssignment copies an assignment with sorted, distinct partitions,
// without topics that have none.
func sortedAssignment(a map[string][]int32) map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		s := slices.Clone(ps)
		slices.Sort(s)
		out[t] = slices.Compact(s)
	}
	return out
}

// displayAssignment is the output form of an assignment.
func (c *Correlator) displayAssignment(a map[string][]int32) map[string][]int32 {
	return sortedAssignment(a)
}

// sortedTPs returns the keys of m in order.
func sortedTPs[V any](m map[tp]V) []tp {
	out := make([]tp, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmpTP)
	return out
}

// fetchOf returns m's fetch state for p, creating it.
func fetchOf(m map[tp]*fetchState, p tp) *fetchState {
	f := m[p]
	if f == nil {
		f = newFetchState()
		m[p] = f
	}
	return f
}

// partOf returns g's state for p without creating it; nil when g is nil or
// does not have it.
func (g *groupState) partOf(p tp) *partState {
	if g == nil {
		return nil
	}
	return g.parts[p]
}

// owned reports whether a live member of g is assigned p.
func (g *groupState) owned(p tp) bool {
	for _, m := range g.members {
		if m.status == statusLive && m.assigned && slices.Contains(m.assignment[p.topic], p.partition) {
			return true
		}
	}
	return false
}
