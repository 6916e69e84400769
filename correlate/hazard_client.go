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
	seen   map[string]bool // client ids seen from the host
	recent []idMark        // client ids first seen within ChurnWindow
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
// broker's heap).
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
	id := clientFamily(e.ClientID)
	if hh.seen[id] || len(hh.seen) >= c.opts.MaxClients {
		return
	}
	hh.seen[id] = true
	at, window := e.ReqTime.UTC(), c.opts.Hazards.ChurnWindow
	key := episodeKey(HazardClientIDChurn, host)
	if n := len(hh.recent); n > 0 && at.Sub(hh.recent[n-1].at) > window {
		c.endEpisode(key)
	}
	hh.recent = trimMarks(hh.recent, func(x idMark) bool { return at.Sub(x.at) > window })
	hh.recent = append(hh.recent, idMark{id: id, at: at, ev: c.evidenceOf(e)})
	if len(hh.recent) < c.opts.Hazards.ChurnClientIDs || c.episodeOpen(key) {
		return
	}
	first, last := hh.recent[0], hh.recent[len(hh.recent)-1]
	ev := &HazardEvent{Kind: HazardClientIDChurn, Severity: SeverityWarn, ClientHost: host, at: at,
		Count: int64(len(hh.recent)), WindowMillis: millis(last.at.Sub(first.at))}
	ids := make([]string, len(hh.recent))
	for i, x := range hh.recent {
		ids[i] = x.id
	}
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
		host, len(hh.recent), last.at.Sub(first.at).Round(time.Millisecond), strings.Join(ev.ClientIDs, ", "))
	for i, x := range hh.recent {
		if i < maxEvidence-1 || i == len(hh.recent)-1 {
			ev.Evidence = append(ev.Evidence, x.ev)
		}
	}
	c.report(key, ev)
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
