package correlate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// memberHazard is what hazard detection keeps for one member of a group
// (or, for consumption without a member id, one client: clientMemberKey).
type memberHazard struct {
	// lastLive is its last request that keeps a classic session alive
	// (JoinGroup, SyncGroup, Heartbeat, OffsetCommit), liveEv its evidence.
	lastLive time.Time
	liveEv   Evidence
	hasLive  bool
	// expiredLive is lastLive when the member was last expired
	// (expired set): the silence after it is that member_expired.
	expiredLive time.Time
	expired     bool
	lateRun     int // heartbeat gaps in a row above HeartbeatSpacing
	// beatBase is its last heartbeat, or JoinGroup or SyncGroup answer:
	// where the next heartbeat's spacing is measured from.
	beatBase time.Time
	// assignAt is when its own SyncGroup response gave it its assignment.
	assignAt time.Time
	recv     recvRun // its commits on receive
	recvKey  string  // commit_on_receive's episode key for it, made once
	parts    map[tp]*memberPart
}

// memberPart is what one member was delivered of one partition, and how it
// committed it.
type memberPart struct {
	spans      window[span] // recent delivered batches, by base offset
	delivered  int64        // offset after the last record delivered; -1 none
	position   int64        // highest fetch offset asked; -1 none
	hwm        int64        // high watermark of the last response; -1 unknown
	fetches    int64        // Fetch requests or responses naming the partition
	deliveries int64        // responses delivering records
	notCopied  int64        // responses whose records were not copied: deliveries unknown
	lastFetch  Evidence
	hasFetch   bool

	lastCommit int64 // its last accepted commit
	haveLast   bool
	run, proof int            // stride-1 commits in a row; how many inside a batch
	beyond     int64          // offset of an open commit_beyond_fetch episode; -1 none
	pend       *pendingBeyond // a commit above what it was delivered, waiting
	// commitDeliveries is deliveries at its last commit.
	commitDeliveries int64
	holes            holes
}

// holes are the commit offsets a member's commits strode over (commit
// n+1 says record n is done) and it has not made since: a per-record
// committer working out of order (field report 4's thread pool) fills
// them a moment later, when the slower record is done; those it ends
// with are records never committed.
type holes struct {
	open []hole // ascending, at most maxMissing
	top  int64  // its highest accepted commit; -1 none
	// filled counts its commits that filled a hole, inside those strictly
	// inside a delivered batch: evidence that it commits record by record,
	// finer than a poll.
	filled, inside int
}

// hole is one commit offset a member strode over, with the commit that
// strode (by, at, ev) and the partition's accepted commit before it.
type hole struct {
	off, by, prev int64
	at            time.Time
	ev            Evidence
}

// span is one complete record batch delivered.
type span struct {
	base, next int64
	// data: every offset of the batch is a record the application gets
	// (not a control batch, not aborted, not compacted).
	data bool
	// control: a control batch (transaction markers, KIP-98); aborted:
	// data of an aborted transaction a read_committed consumer drops.
	// Neither is ever a record the application gets.
	control, aborted bool
	at               time.Time
}

// maxSpans caps the batches remembered per member partition.
const maxSpans = 64

// clientMemberKey is the memberHazard key of a client's consumption
// without a member id (a standalone consumer, an admin client).
func clientMemberKey(k clientKey) string { return "\x00" + k.host + "\x00" + k.clientID }

func (c *Correlator) memberHz(group, key string) *memberHazard {
	h := c.hz()
	m := h.members[group]
	if m == nil {
		m = make(map[string]*memberHazard)
		h.members[group] = m
	}
	mh := m[key]
	if mh == nil {
		if len(m) >= 2*c.opts.MaxMembersPerGroup {
			c.pruneMemberHz(group, m)
		}
		mh = &memberHazard{parts: make(map[tp]*memberPart)}
		m[key] = mh
	}
	return mh
}

// pruneMemberHz forgets the members the group no longer remembers, then,
// if still full, the consumption of clients without a member id.
func (c *Correlator) pruneMemberHz(group string, m map[string]*memberHazard) {
	g := c.groups[group]
	for _, k := range sortedKeys(m) {
		if k[0] != 0 && (g == nil || g.members[k] == nil) {
			delete(m, k)
		}
	}
	for _, k := range sortedKeys(m) {
		if len(m) < 2*c.opts.MaxMembersPerGroup {
			break
		}
		if k[0] == 0 {
			delete(m, k)
		}
	}
}

// memberPartOf returns what member key of group was delivered of p, nil
// when nothing is known.
func (c *Correlator) memberPartOf(group, key string, p tp) *memberPart {
	if m := c.hz().members[group]; m != nil {
		if mh := m[key]; mh != nil {
			return mh.parts[p]
		}
	}
	return nil
}

func (mh *memberHazard) part(p tp, limit int) *memberPart {
	mp := mh.parts[p]
	if mp == nil {
		if len(mh.parts) >= limit {
			return nil
		}
		mp = &memberPart{delivered: -1, position: -1, hwm: -1, beyond: -1, holes: holes{top: -1}}
		mh.parts[p] = mp
	}
	return mp
}

// inside reports whether off is strictly inside a delivered data batch:
// a commit there is finer than a poll, which returns whole batches.
func (mp *memberPart) inside(off int64) bool {
	for _, s := range mp.spans.all() {
		if s.data && s.base < off && off < s.next {
			return true
		}
	}
	return false
}

// allData reports whether every offset from..to-1 is a record delivered
// to the application.
func (mp *memberPart) allData(from, to int64) bool {
	for o := from; o < to; {
		s := mp.spanOf(o)
		if s == nil || !s.data {
			return false
		}
		o = s.next
	}
	return true
}

// records counts the records the application gets among offsets
// from..to-1, from the batches delivered: ok false when an offset's batch
// is not known, or is one (compacted, legacy compressed) whose records'
// offsets are not all known. offsets lists them (at most maxMissing),
// markers the control records' offsets (at most maxMissing).
func (mp *memberPart) records(from, to int64) (n int64, offsets, markers []int64, ok bool) {
	for o := from; o < to; {
		s := mp.spanOf(o)
		if s == nil || (!s.data && !s.control && !s.aborted) {
			return 0, nil, nil, false
		}
		end := min(s.next, to)
		for ; o < end; o++ {
			switch {
			case s.data:
				n++
				if len(offsets) < maxMissing {
					offsets = append(offsets, o)
				}
			case s.control && len(markers) < maxMissing:
				markers = append(markers, o)
			}
		}
	}
	return n, offsets, markers, true
}

func (mp *memberPart) spanOf(off int64) *span {
	spans := mp.spans.all()
	for i := range spans {
		if s := &spans[i]; s.base <= off && off < s.next {
			return s
		}
	}
	return nil
}

// add remembers delivered batches (a batch delivered again keeps its first
// delivery), keeping the maxSpans highest. They mostly arrive in order, so
// the place of one is found by binary search.
func (mp *memberPart) add(ss []span) {
	for _, s := range ss {
		i, found := slices.BinarySearchFunc(mp.spans.all(), s.base, func(x span, base int64) int { return cmp.Compare(x.base, base) })
		if found {
			continue
		}
		mp.spans.insert(i, s)
		mp.delivered = max(mp.delivered, s.next)
	}
	mp.spans.trim(maxSpans)
}

// scanSpans reads the complete batch headers of a Fetch response
// partition (KIP-98 v2 layout; legacy message sets as one record each).
// A transactional batch is data unless ab (reset with the response's
// AbortedTransactions) says its transaction aborted. The spans are
// appended to out.
func scanSpans(out []span, b []byte, ab *abortTracker, at time.Time) []span {
	for {
		h, rest, ok := nextBatch(b)
		if !ok {
			return out
		}
		b = rest
		if !h.ok {
			out = append(out, span{base: h.base, next: h.next, at: at, data: !h.legacyCompress})
			continue
		}
		aborted := ab.aborted(h.next-1, h.pid, h.control, h.txn)
		out = append(out, span{base: h.base, next: h.next, at: at, data: !h.control && !aborted && h.records == h.next-h.base,
			control: h.control, aborted: aborted})
	}
}

// fetchHazards records what a group's Fetch delivered to its member, and
// looks for out-of-range resets and non-owner fetches.
func (c *Correlator) fetchHazards(e *decode.Exchange, req *kmsg.FetchRequest) {
	if req.ReplicaID >= 0 || req.ReplicaState.ID >= 0 {
		return
	}
	k := c.keyOf(e)
	a := c.attribute(k)
	g := c.groups[a.group]
	if g == nil || a.group == "" || (a.status != AttrGroup && a.status != AttrFormer) {
		return
	}
	key := a.member
	if key == "" {
		key = clientMemberKey(k)
	}
	mh := c.memberHz(g.name, key)
	ev := c.evidenceOf(e)
	ask := c.askedBy(req)
	asked := ask.asked
	for _, x := range ask.inReq {
		if mp := mh.part(x.p, c.opts.MaxPartitionsPerGroup); mp != nil {
			mp.fetches++
			mp.position = max(mp.position, x.off)
		}
		if ph := c.hz().parts[g.name][x.p]; ph != nil {
			c.regressionResumed(g.name, x.p, ph, k, x.off, "Fetch")
		}
	}
	resp, _ := e.Resp.(*kmsg.FetchResponse)
	nc := c.recordsNotCopied(e, resp)
	got := c.gotParts(resp)
	defer clear(got) // it points into resp
	j := 0
	for _, p := range ask.sorted { // both in partition order
		for j < len(got) && cmpTP(got[j].p, p) < 0 {
			j++
		}
		var rp *kmsg.FetchResponseTopicPartition
		if j < len(got) && got[j].p == p {
			rp = got[j].rp
		}
		if rp == nil || rp.ErrorCode == 0 {
			c.resetResumed(g, p, k, a.member, asked[p], rp, ev)
		}
	}
	var owners map[tp]string
	for _, x := range got {
		p, rp := x.p, x.rp
		off, known := asked[p]
		if !known {
			off, known = c.sessionOffset(e, req, p)
		}
		if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
			if known {
				c.outOfRange(g, p, k, a.member, off, rp, ev)
			}
			continue
		}
		if rp.ErrorCode != 0 {
			continue
		}
		mp := mh.part(p, c.opts.MaxPartitionsPerGroup)
		if mp == nil {
			continue
		}
		mp.fetches++
		mp.hwm, mp.lastFetch, mp.hasFetch = rp.HighWatermark, ev, true
		if nc[p] {
			mp.notCopied++
			continue
		}
		c.abort.reset(rp.AbortedTransactions)
		ss := scanSpans(c.spans[:0], rp.RecordBatches, &c.abort, e.RespTime.UTC())
		c.spans = ss
		if len(ss) == 0 {
			continue
		}
		mp.deliveries++
		mp.add(ss)
		c.fetchedBefore(mp, e.ReqTime.UTC(), ss[len(ss)-1].next)
		if mp.beyond >= 0 && mp.delivered >= mp.beyond {
			c.endEpisode(partKey(HazardCommitBeyondFetch, g.name, p, key))
			mp.beyond = -1
		}
		c.checkOwnerFetch(g, a, p, func() map[tp]string {
			if owners == nil {
				owners = g.owners()
			}
			return owners
		}, off, known, ss, e, ev)
	}
}

// gotPart is a partition of a Fetch response.
type gotPart struct {
	p  tp
	rp *kmsg.FetchResponseTopicPartition
}

// gotParts returns the partitions of resp in partition order, once each:
// the last of a partition named twice, as a map by partition would keep.
// The slice is reused by the next call.
func (c *Correlator) gotParts(resp *kmsg.FetchResponse) []gotPart {
	got := c.got[:0]
	if resp != nil {
		for _, t := range resp.Topics {
			topic := c.topicKey(t.Topic, t.TopicID)
			for i := range t.Partitions {
				got = append(got, gotPart{tp{topic, t.Partitions[i].Partition}, &t.Partitions[i]})
			}
		}
	}
	slices.SortStableFunc(got, func(a, b gotPart) int { return cmpTP(a.p, b.p) })
	n := 0
	for i := range got {
		if i+1 < len(got) && got[i+1].p == got[i].p {
			continue // a later one of the same partition wins
		}
		got[n] = got[i]
		n++
	}
	clear(got[n:])
	c.got = got[:n]
	return c.got
}

// sessionOffset returns the fetch offset of p in the request's fetch
// session (KIP-227), when known.
func (c *Correlator) sessionOffset(e *decode.Exchange, req *kmsg.FetchRequest, p tp) (int64, bool) {
	if e.Conn == nil || req.SessionEpoch <= 0 {
		return 0, false
	}
	s := c.sessions[sessionKey{c.names.of(e.Conn).conn.Broker, req.SessionID}].at(e.ReqTime.UTC())
	if s == nil {
		return 0, false
	}
	off, ok := s.offsets[p]
	return off, ok
}

// checkOwnerFetch: a member fetching, for its group, a partition another
// live member owns: a member that expired (a zombie: requested after its
// expiry) or left (after FetchGrace), or a live member whose own
// assignment lost it more than FetchGrace ago. Records delivered twice:
// duplicate processing.
func (c *Correlator) checkOwnerFetch(g *groupState, a attribution, p tp, owners func() map[tp]string, off int64, known bool, ss []span, e *decode.Exchange, ev Evidence) {
	m := g.members[a.member]
	if m == nil || !m.assigned || (m.status == statusLive && owns(m.assignment, p)) {
		return
	}
	owner := owners()[p]
	if owner == "" || owner == m.id {
		return
	}
	grace := c.opts.Hazards.FetchGrace
	why := ""
	switch {
	case m.status == statusExpired && !e.ReqTime.After(m.goneAt):
		return // requested before the broker dropped it: in flight
	case m.status == statusLeft && !e.ReqTime.After(m.goneAt.Add(grace)):
		return // in flight when it left
	case m.status != statusLive:
		why = fmt.Sprintf("%s %s at %s", m.id, m.status, stamp(m.goneAt))
	default:
		mh := c.memberHz(g.name, m.id)
		if mh.assignAt.IsZero() || !e.ReqTime.After(mh.assignAt.Add(grace)) {
			return
		}
		why = fmt.Sprintf("its assignment of generation %d does not include it", m.generation)
	}
	var records int64
	for _, s := range ss {
		records += s.next - s.base
	}
	hev := partHazardEvent(HazardNonOwnerFetch, SeverityWarn, g.name, p, e.ReqTime.UTC())
	hev.MemberID, hev.Generation, hev.ClientID, hev.ClientHost = m.id, i32p(m.generation), e.ClientID, c.hostOf(e)
	hev.Owner, hev.Records = owner, i64(records)
	if cur := g.cur(); cur != nil {
		hev.OwnerGeneration = i32p(cur.id)
	}
	from := ""
	if known {
		hev.Offset = i64(off)
		from = fmt.Sprintf(" from offset %d", off)
	}
	hev.Summary = fmt.Sprintf("%s %s/%d: client %s fetched%s and was delivered %d records although %s owns the partition "+
		"(%s): the records are processed twice", g.name, p.topic, p.partition, e.ClientID, from, records, owner, why)
	// It rests on what was not seen: the member's heartbeats (an expiry
	// kwire judged from silence), or a newer assignment that gives it the
	// partition back.
	mh := c.memberHz(g.name, m.id)
	hev.Evidence = []Evidence{ev}
	if mh.hasLive {
		hev.Evidence = []Evidence{mh.liveEv, ev}
	}
	since := m.lastSeen
	if m.status == statusLive {
		since = mh.assignAt
	}
	hev.absent = &absence{clients: []clientKey{c.keyOf(e), {m.clientHost, m.clientID}}, from: since, to: e.ReqTime.UTC()}
	c.report(partKey(HazardNonOwnerFetch, g.name, p, m.id), hev)
}

// syncHazards: an accepted SyncGroup keeps the member's session alive and
// gives it its assignment.
func (c *Correlator) syncHazards(e *decode.Exchange, req *kmsg.SyncGroupRequest) {
	resp, _ := e.Resp.(*kmsg.SyncGroupResponse)
	g := c.groups[req.Group]
	if g == nil || resp == nil || resp.ErrorCode != 0 || req.MemberID == "" {
		return
	}
	c.liveRequest(g, req.MemberID, e.ReqTime.UTC(), e.RespTime.UTC(), c.evidenceOf(e), true)
	c.memberHz(g.name, req.MemberID).assignAt = e.RespTime.UTC()
}

// itoa64 formats an offset.
func itoa64(v int64) string { return strconv.FormatInt(v, 10) }
