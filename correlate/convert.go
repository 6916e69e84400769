package correlate

import (
	"fmt"

	"github.com/kwire/kwire/decode"
)

// Conversion is a group the broker converted between the classic and the
// consumer group type (KIP-848's online migration,
// group.consumer.migration.policy): a member joining a classic group with
// ConsumerGroupHeartbeat upgrades it, its classic members staying on
// JoinGroup/SyncGroup/Heartbeat beside it (each answered with its member
// epoch as generation, with no leader: the broker assigns); the last
// member on the consumer protocol leaving downgrades it back, and the
// classic members rebalance. The group keeps its generation across: the
// consumer group's epoch starts at the classic generation, the classic
// group's generation at the consumer group's epoch. It is told on the
// first generation of the new type (GenerationEvent.Converted).
type Conversion struct {
	// From and To are group types: classic to consumer, or back.
	From string `json:"from"`
	To   string `json:"to"`
	// Generation is the generation the broker carried over into the new
	// type: the last one seen before.
	Generation int32 `json:"generation"`
	// Member is whose request converted it: the member that joined with
	// ConsumerGroupHeartbeat, or the last member on the consumer protocol
	// that left; empty when the capture does not show it.
	Member string `json:"member,omitempty"`
	// Reason is kwire's account of it.
	Reason string `json:"reason"`
}

// How a group's type shows (convert).
const (
	// byConsumerJoin: an accepted ConsumerGroupHeartbeat join (epoch 0).
	byConsumerJoin = iota
	// byConsumerBeat: another accepted ConsumerGroupHeartbeat.
	byConsumerBeat
	// byLeaderless: a JoinGroup answered without a leader: a classic
	// member in a consumer group.
	byLeaderless
	// byLeader: a JoinGroup answered with a leader: a classic rebalance.
	byLeader
)

// convert records that g is a group of type to now, as member's exchange
// shows (how): told as a conversion on its next generation when g was,
// by its last generation, of the other type (classic: a rebalance with a
// leader seen; consumer: an epoch), else only noted.
func (c *Correlator) convert(g *groupState, to, member string, how int) {
	from := g.typ
	g.typ = to
	if from == GroupClassic && to == GroupConsumer {
		g.protocol = "" // the broker's assignor now, named only by a ConsumerGroupHeartbeat
	}
	cur := g.cur()
	if from == to || cur == nil || cur.typ != from || (from == GroupClassic && cur.leader == "") ||
		(from != GroupClassic && from != GroupConsumer) {
		return
	}
	cv := &Conversion{From: from, To: to, Generation: cur.id}
	switch how {
	case byConsumerJoin:
		cv.Member = member
		cv.Reason = fmt.Sprintf("%s joined with ConsumerGroupHeartbeat (KIP-848): the broker converted the classic group "+
			"to a consumer group, generation %d its epoch; its classic members stay on JoinGroup/SyncGroup/Heartbeat, "+
			"each answered with its member epoch as generation and assigned by the broker", member, cur.id)
	case byConsumerBeat, byLeaderless:
		cv.Reason = fmt.Sprintf("the broker converted the classic group to a consumer group (KIP-848) after generation %d, "+
			"as %s's answer shows; the ConsumerGroupHeartbeat join that did it is not in the capture", cur.id, member)
	default:
		cv.Member = g.lastConsumerDeparture()
		who := "its last member on the consumer protocol"
		if cv.Member != "" {
			who += " (" + cv.Member + ")"
		}
		cv.Reason = fmt.Sprintf("%s left: the broker converted the consumer group to a classic group at generation %d "+
			"(KIP-848 downgrade) and rebalanced its classic members", who, cur.id)
	}
	g.converting = cv
}

// lastConsumerDeparture is the last of g's departures not yet a cause of
// a generation that is a member on the consumer protocol, "" if none.
func (g *groupState) lastConsumerDeparture() string {
	for i := len(g.departures) - 1; i >= 0; i-- {
		if m := g.members[g.departures[i].member]; m != nil && m.consumer {
			return m.id
		}
	}
	return ""
}

// classicEpoch handles a classic member's accepted JoinGroup in a
// consumer group (no leader: the broker assigns): the member reached
// epoch gen; its assignment there comes with its SyncGroup
// (classicEpochSync). The response's protocol is the member's own, not
// the group's assignor, which is the broker's. A classic generation the
// broker carried over as the group's epoch stays as its rebalance formed
// it: a member answered with it still has partitions to give up (a
// cooperative one keeps its partitions when it rejoins) before it
// reaches the next epoch.
func (c *Correlator) classicEpoch(g *groupState, gen *genState, m *memberState, e *decode.Exchange) {
	if g.typeOf(gen) != GroupConsumer {
		return
	}
	gen.joinsSeen = true
	gen.witness(c.evidenceOf(e))
	gen.protocolType, gen.protocol = consumerProtocol, g.protocol
	if authority(gen.membersFrom) < authority(fromHeartbeat) {
		gen.membersFrom = fromHeartbeat
	}
	if t := e.ReqTime.UTC(); gen.started.IsZero() || t.Before(gen.started) {
		gen.started, gen.starter = t, m.id
	}
	gen.member(m)
}

// classicEpochSync handles a classic member's accepted SyncGroup in a
// consumer group: its assignment at its epoch gen, as a KIP-848
// heartbeat's (consumerReached; the broker adds partitions at the same
// epoch as other members release them, the member rejoining for them).
// At a classic generation the broker carried over (classicEpoch) it is
// the member's own only: what it keeps while it gives the rest up.
func (c *Correlator) classicEpochSync(g *groupState, gen *genState, m *memberState, assignment []byte, e *decode.Exchange) {
	var own genMember
	setAssignment(&own, assignment, consumerProtocol)
	if own.assigned {
		m.assignment, m.assigned = own.assignment, true
		c.memberHz(g.name, m.id).assignAt = e.RespTime.UTC()
	}
	if g.typeOf(gen) != GroupConsumer {
		return
	}
	changed := c.consumerReached(g, gen, m, e.ReqTime.UTC(), false, own.assigned)
	if changed {
		gen.witness(c.evidenceOf(e))
	}
	c.consumerFinish(g, gen == g.cur() && changed, e.RespTime.UTC())
}
