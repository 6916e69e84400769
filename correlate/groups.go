package correlate

import "github.com/kwire/kwire/internal/evict"

// A group name costs a client nothing: FindCoordinator v4 takes a batch of
// names, DescribeGroups and OffsetFetch v8 too, and the broker answers a
// commit to any group. If every name took a place in the table for good,
// one request naming MaxGroups made-up groups would leave no room for the
// real groups that come after it: kwire live would be blind to them.
// So a group is loose until its traffic shows it real (anchor), and
// loose groups make room for any new one, least recently used first;
// anchored groups are never forgotten.

// anchor marks g real: a member, a generation or an accepted commit was
// seen. It is never forgotten from then on.
func (c *Correlator) anchor(g *groupState) {
	if g.anchored {
		return
	}
	g.anchored, g.boundBy = true, nil
	delete(c.loose, g.name)
	c.loosePartitions -= len(g.parts)
}

// forgetLoose forgets the least recently used loose groups, until fewer
// than 90% of MaxGroups remain (so that a full table is trimmed rarely)
// or no loose group is left. It reports whether any was forgotten: then
// there is room for one more group.
func (c *Correlator) forgetLoose() bool {
	n := len(c.groups) - c.opts.MaxGroups*9/10 + 1
	gone := evict.OldestN(c.loose, n, func(g *groupState) uint64 { return g.used })
	for _, name := range gone {
		c.forgetGroup(c.groups[name])
	}
	c.stats.Limits.GroupsEvicted += int64(len(gone))
	return len(gone) > 0
}

// forgetGroup drops loose group g and what refers to it by name: its
// clients' bindings and its hazard bookkeeping.
func (c *Correlator) forgetGroup(g *groupState) {
	delete(c.groups, g.name)
	delete(c.loose, g.name)
	c.loosePartitions -= len(g.parts)
	for k := range g.boundBy {
		if cs := c.clients[k]; cs != nil {
			delete(cs.bindings, g.name)
		}
	}
	if h := c.hazards; h != nil {
		delete(h.parts, g.name)
		delete(h.members, g.name)
		delete(h.groups, g.name)
		delete(h.counts, g.name)
	}
}

// countLoosePartitions counts the loose groups' partitions again, after
// topic ids were renamed (which merges partitions).
func (c *Correlator) countLoosePartitions() {
	c.loosePartitions = 0
	for _, g := range c.loose {
		c.loosePartitions += len(g.parts)
	}
}

// looseUntracked reports whether group is loose and its partition p has
// no state (the loose groups' share of partitions was full): its hazard
// bookkeeping is not kept either.
func (c *Correlator) looseUntracked(group string, p tp) bool {
	g := c.groups[group]
	return g != nil && !g.anchored && g.parts[p] == nil
}

// boundTo notes that client k is bound to g, while g is loose.
func (g *groupState) boundTo(k clientKey) {
	if g.anchored {
		return
	}
	if g.boundBy == nil {
		g.boundBy = make(map[clientKey]struct{})
	}
	g.boundBy[k] = struct{}{}
}

// unboundFrom forgets that client cs was bound to its loose groups: it
// is being forgotten itself.
func (c *Correlator) unboundFrom(cs *clientState) {
	for name := range cs.bindings {
		if g := c.groups[name]; g != nil && g.boundBy != nil {
			delete(g.boundBy, cs.key)
		}
	}
}
