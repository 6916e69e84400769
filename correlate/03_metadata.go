package correlate

import (
	"bytes"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// metadata handles Metadata (key 3): brokers (node id -> address, to name
// coordinators) and partition counts. Topic ids are learned by Exchange,
// from every response (learnTopics).
func (c *Correlator) metadata(e *decode.Exchange) {
	resp, _ := e.Resp.(*kmsg.MetadataResponse)
	if resp == nil {
		return
	}
	for _, b := range resp.Brokers {
		c.brokers[b.NodeID] = hostPort(b.Host, b.Port)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode != 0 || t.Topic == nil || len(t.Partitions) == 0 {
			continue
		}
		if _, ok := c.partitionCounts[*t.Topic]; ok || len(c.partitionCounts) < c.opts.MaxPartitionsPerGroup {
			c.partitionCounts[*t.Topic] = int32(len(t.Partitions))
		}
	}
}

// resolveTopics renames the state of unresolved topic ids that now have a
// name: only those a response just named, in order of id, so that its
// cost does not grow with the ids still unresolved.
func (c *Correlator) resolveTopics(ids [][16]byte) {
	sort.Slice(ids, func(i, j int) bool { return bytes.Compare(ids[i][:], ids[j][:]) < 0 })
	for _, id := range ids {
		if _, ok := c.unresolved[id]; !ok {
			continue
		}
		if name, ok := c.topicName(id); ok {
			c.renameTopic(idKey(id), name)
			delete(c.unresolved, id)
		}
	}
}

// renameTopic moves everything kept under topic key from to key to,
// merging with what to already has.
func (c *Correlator) renameTopic(from, to string) {
	for _, g := range c.groups {
		renameTP(g.parts, from, to, mergePart)
		if g.share != nil {
			renameTP(g.share.parts, from, to, mergeSharePart)
		}
		for _, m := range g.members {
			renameTP(m.fetched, from, to, mergeFetch)
			renameAssigned(m.assignment, from, to)
		}
		for _, gen := range g.gens {
			for _, gm := range gen.members {
				renameAssigned(gm.assignment, from, to)
			}
		}
	}
	for _, cs := range c.clients {
		renameTP(cs.unattributed, from, to, mergeFetch)
	}
	for _, s := range c.sessions {
		renameTP(s.offsets, from, to, func(dst, src int64) int64 { return src })
	}
	c.countLoosePartitions()
}

// renameTP renames the keys of m with topic from to topic to.
func renameTP[V any](m map[tp]V, from, to string, merge func(dst, src V) V) {
	for _, k := range sortedTPs(m) {
		if k.topic != from {
			continue
		}
		v := m[k]
		delete(m, k)
		nk := tp{to, k.partition}
		if d, ok := m[nk]; ok {
			v = merge(d, v)
		}
		m[nk] = v
	}
}

func renameAssigned(a map[string][]int32, from, to string) {
	ps, ok := a[from]
	if !ok {
		return
	}
	delete(a, from)
	ps = append(a[to], ps...)
	slices.Sort(ps)
	a[to] = slices.Compact(ps)
}

// mergeFetch adds src's counters to dst and keeps the latest positions.
func mergeFetch(dst, src *fetchState) *fetchState {
	dst.records += src.records
	dst.bytes += src.bytes
	dst.batches += src.batches
	dst.fetches += src.fetches
	dst.delivered = max(dst.delivered, src.delivered)
	if src.positionAt.After(dst.positionAt) {
		dst.position, dst.positionAt = src.position, src.positionAt
	}
	if src.lastFetch.After(dst.lastFetch) {
		dst.hwm, dst.lso, dst.logStart = src.hwm, src.lso, src.logStart
		dst.lastFetch, dst.fetchedBy, dst.client = src.lastFetch, src.fetchedBy, src.client
	}
	if src.errAt.After(dst.errAt) {
		dst.errCode, dst.errAt = src.errCode, src.errAt
	}
	return dst
}

// mergePart merges two histories of one partition.
func mergePart(dst, src *partState) *partState {
	mergeFetch(&dst.fetch, &src.fetch)
	dst.commits.compact()
	h := append(dst.commits.s, src.commits.all()...)
	sort.SliceStable(h, func(i, j int) bool { return h[i].at.Before(h[j].at) })
	dst.commits.s = h
	dst.commitsDropped += src.commitsDropped
	if src.hasCommitted {
		dst.setCommitted(src.committed, src.committedAt, src.committedBy, src.committedGen, src.committedSource)
	}
	if src.listed != nil && (dst.listed == nil || src.listed.at.After(dst.listed.at)) {
		dst.listed = src.listed
	}
	return dst
}
