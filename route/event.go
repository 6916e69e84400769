package route

import (
	"slices"

	"github.com/kwire/kwire/correlate"
)

// EventKey is the key whose shard writes event ev: a group's event
// belongs to the group's (GroupKey), a transaction's to TxnKey, a hazard
// to HazardKey's; ok is false for an event of no key.
func EventKey(ev correlate.Event) (key string, ok bool) {
	k := eventKey(ev)
	return k.String(), k.kind != 0
}

// HazardKey is the key whose shard writes hazard h: its group's, else the
// transactions' (TxnKey) for a transaction's hazard or a partition's
// hanging transaction, else its host's for client_id_churn, else its
// client's (producer_acks_weak).
func HazardKey(h *correlate.HazardEvent) string { return hazardKey(h).String() }

// FilterSnapshot keeps of s what the shards that owns says are owned by
// key own: groups, clients, unattributed consumption and hazards (their
// counts recounted). A client belongs to the first group (by name) it is
// bound to, whose shard sees all its traffic and that group's, else to
// its own ClientKey; its unattributed consumption goes with it.
func FilterSnapshot(s *correlate.Snapshot, owns func(key string) bool) {
	s.Groups = slices.DeleteFunc(s.Groups, func(x correlate.Group) bool { return !owns(GroupKey(x.Group)) })
	home := map[string]string{}
	for _, c := range s.Clients {
		home[ClientOf(c.ClientHost, c.ClientID)] = clientHome(c)
	}
	s.Clients = slices.DeleteFunc(s.Clients, func(c correlate.Client) bool { return !owns(clientHome(c)) })
	s.Unattributed = slices.DeleteFunc(s.Unattributed, func(u correlate.Consumption) bool {
		k := ClientOf(u.ClientHost, u.ClientID)
		h, ok := home[k]
		if !ok {
			h = ClientKey(k)
		}
		return !owns(h)
	})
	if len(s.Unattributed) == 0 {
		s.Unattributed = nil // as the correlator's Snapshot has none: null
	}
	s.Hazards = slices.DeleteFunc(s.Hazards, func(h correlate.HazardEvent) bool { return !owns(HazardKey(&h)) })
	s.HazardCounts = map[string]int{}
	for _, h := range s.Hazards {
		s.HazardCounts[h.Severity]++
	}
}

// clientHome is the key of the shard a client of a snapshot belongs to.
func clientHome(c correlate.Client) string {
	var first string
	for _, b := range c.Bindings {
		if first == "" || b.Group < first {
			first = b.Group
		}
	}
	if first != "" {
		return GroupKey(first)
	}
	return ClientKey(ClientOf(c.ClientHost, c.ClientID))
}
