package correlate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// hostHazard is what hazard detection keeps for one client host.
type hostHazard struct {
	seen map[string]bool // client ids seen from the host
	// episode are the new client ids of the churn episode under way:
	// each first seen at most ChurnWindow after the one before; recent
	// those of them first seen within ChurnWindow of the newest.
	episode []idMark
	recent  []idMark
	// churning: ChurnClientIDs of them came within ChurnWindow (at
	// churnAt, the one that made it so); reported once the episode's
	// hazard was published.
	churning bool
	churnAt  time.Time
	reported bool
}

// idMark is a client id first seen.
type idMark struct {
	id string
	at time.Time
	ev Evidence
}

// produceHazards: Produce with acks=0 (no answer: a failed write goes
// unnoticed) or acks=1 (only the leader has it: lost with the leader
// before replication). A setting, not an observed loss: info, once per
// client, topic and acks.
func (c *Correlator) produceHazards(e *decode.Exchange, req *kmsg.ProduceRequest) {
	if req.Acks != 0 && req.Acks != 1 {
		return
	}
	k := c.keyOf(e)
	for _, t := range req.Topics {
		topic := c.topicKey(t.Topic, t.TopicID)
		ev := &HazardEvent{Kind: HazardProducerAcksWeak, Severity: SeverityInfo, Topic: topic, ClientID: k.clientID,
			ClientHost: k.host, Acks: func(v int16) *int16 { return &v }(req.Acks), at: e.ReqTime.UTC(),
			Evidence: []Evidence{c.evidenceOf(e)}}
		if req.Acks == 0 {
			ev.Summary = fmt.Sprintf("client %s on %s produces to %s with acks=0: the broker does not answer, "+
				"so a write that fails is lost unnoticed", k.clientID, k.host, topic)
		} else {
			ev.Summary = fmt.Sprintf("client %s on %s produces to %s with acks=1: only the partition leader has a record "+
				"when it is acknowledged; a leader failing before replication loses it", k.clientID, k.host, topic)
		}
		c.report(episodeKey(HazardProducerAcksWeak, k.host, k.clientID, topic, strconv.Itoa(int(req.Acks))), ev)
	}
}

// clientIDSeen watches for hosts creating many client ids (field report 2:
// brokers keep metrics per client id; auto-generated ids exhausted a
// broker's heap). Once ChurnClientIDs new ids came from a host within
// ChurnWindow, the host is churning; its hazard counts every new id of
// the episode (churnTick reports it).
func (c *Correlator) clientIDSeen(e *decode.Exchange) {
	if e.ClientID == "" || e.Conn == nil {
		return
	}
	h := c.hz()
	host := c.hostOf(e)
	hh := h.hosts[host]
	if hh == nil {
		if len(h.hosts) >= c.opts.MaxClients {
			return
		}
		hh = &hostHazard{seen: make(map[string]bool)}
		h.hosts[host] = hh
	}
	// seen holds the ids as sent too, so that the family (a regular
	// expression) is worked out once per id, not per request.
	if hh.seen[e.ClientID] || len(hh.seen) >= c.opts.MaxClients {
		return
	}
	hh.seen[e.ClientID] = true
	id := clientFamily(e.ClientID)
	if id != e.ClientID {
		if hh.seen[id] {
			return
		}
		hh.seen[id] = true
	}
	at, window := e.ReqTime.UTC(), c.opts.Hazards.ChurnWindow
	if n := len(hh.episode); n > 0 && at.Sub(hh.episode[n-1].at) > window {
		c.churnReport(host, hh)
		c.endEpisode(episodeKey(HazardClientIDChurn, host))
		hh.episode, hh.recent, hh.churning, hh.reported = nil, nil, false, false
	}
	m := idMark{id: id, at: at, ev: c.evidenceOf(e)}
	hh.episode = append(hh.episode, m)
	hh.recent = trimMarks(hh.recent, func(x idMark) bool { return at.Sub(x.at) > window })
	hh.recent = append(hh.recent, m)
	if !hh.churning && len(hh.recent) >= c.opts.Hazards.ChurnClientIDs {
		hh.churning, hh.churnAt = true, at
	}
}

// churnTick reports the churning hosts' hazards: an episode is told once
// ChurnWindow passed without a new client id (its end), at the end of the
// input, or, while new ids keep coming, ChurnWindow after it began to
// churn, with the ids so far.
func (c *Correlator) churnTick(final bool) {
	window := c.opts.Hazards.ChurnWindow
	for _, host := range sortedKeys(c.hz().hosts) {
		hh := c.hz().hosts[host]
		if !hh.churning || hh.reported {
			continue
		}
		if final || c.now.Sub(hh.episode[len(hh.episode)-1].at) > window || c.now.Sub(hh.churnAt) >= window {
			c.churnReport(host, hh)
		}
	}
}

// churnReport publishes host's churn hazard: every new client id of its
// episode so far.
func (c *Correlator) churnReport(host string, hh *hostHazard) {
	if !hh.churning || hh.reported {
		return
	}
	hh.reported = true
	ids := make([]string, len(hh.episode))
	for i, x := range hh.episode {
		ids[i] = x.id
	}
	first, last := hh.episode[0], hh.episode[len(hh.episode)-1]
	ev := &HazardEvent{Kind: HazardClientIDChurn, Severity: SeverityWarn, ClientHost: host, at: last.at,
		Count: int64(len(ids)), WindowMillis: millis(last.at.Sub(first.at))}
	ev.ClientID = idPattern(ids)
	stem := strings.TrimSuffix(ev.ClientID, "*")
	for _, id := range ids {
		if strings.HasPrefix(id, stem) {
			ev.ClientIDs = append(ev.ClientIDs, id)
		}
	}
	if n := len(ev.ClientIDs); n > 3 {
		ev.ClientIDs = []string{ev.ClientIDs[0], ev.ClientIDs[1], ev.ClientIDs[n-1]}
	}
	ev.Summary = fmt.Sprintf("host %s used %d new client ids in %v (%s): brokers keep metrics per client id, "+
		"and clients created with generated ids can exhaust a broker's memory; reuse stable client ids",
		host, len(ids), last.at.Sub(first.at).Round(time.Millisecond), strings.Join(ev.ClientIDs, ", "))
	for i, x := range hh.episode {
		if i < maxEvidence-1 || i == len(hh.episode)-1 {
			ev.Evidence = append(ev.Evidence, x.ev)
		}
	}
	c.report(episodeKey(HazardClientIDChurn, host), ev)
}

// streamsClientRE matches the client ids a Kafka Streams instance derives
// from its client.id (ClientUtils): a consumer and a producer per stream
// thread, a restore consumer per thread or state updater, the global
// thread's consumer, its admin client.
var streamsClientRE = regexp.MustCompile(`^(.+)-(StreamThread-\d+-(consumer|producer|restore-consumer)|` +
	`StateUpdater-\d+-restore-consumer|GlobalStreamThread(-global-consumer)?|admin)$`)

// clientFamily is the client id that id counts as for client_id_churn:
// the Streams instance's client.id for the ids Streams derives from it (a
// Streams instance with many threads starts many clients at once, all
// named after its one stable client.id), else id.
func clientFamily(id string) string {
	if m := streamsClientRE.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return id
}

// idPattern names the ids' largest family: the ids that differ only in
// trailing digits (consumer-1, consumer-2...) as "consumer-*"; "*" when
// no family holds half of them.
func idPattern(ids []string) string {
	n := map[string]int{}
	for _, id := range ids {
		n[strings.TrimRight(id, "0123456789")]++
	}
	best := ""
	for _, stem := range sortedKeys(n) {
		if n[stem] > n[best] {
			best = stem
		}
	}
	if 2*n[best] < len(ids) || best == "" {
		return "*"
	}
	return best + "*"
}
