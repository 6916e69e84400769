//go:build linux

package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/correlate"
)

// transportOutage is how long TestAggregateLiveTransportDown keeps the
// transport down (issue 16: 10 s).
const transportOutage = 10 * time.Second

// TestAggregateLiveTransportDown: the agents' and the aggregator's
// transport goes down for 10 s (its port closed, its connections cut)
// while a kgo group rebalances and consumes. The agents buffer what they
// capture meanwhile (within --publish-buffer-mb) and deliver it when the
// transport is back; `kwire aggregate`, running all along, tells what
// kwire analyze tells of the agents' -w files, with no batch dropped or
// missing and no exchange late. A batch dropped would be counted
// missing; an early release during the outage would be late.
func TestAggregateLiveTransportDown(t *testing.T) {
	start := time.Now()
	const topic = "agg-down-topic"
	r := newAggLive(t, nil, topic)
	g := newGroup(t, r.kf, groupOn(t, r.kf, "agg-down-group", 1), topic, 6)
	g.memberOpts = fcGated(r.kf)
	r.published()
	agg := r.startAggregator()
	g.produce(50)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")

	r.trLn.down()
	back := time.NewTimer(transportOutage)
	g.join("member-2")
	g.produce(50)
	g.settled("member-2 to join with the transport down")
	for _, a := range r.agents {
		a.stderr.wait(t, "the agent to say it holds batches", func() bool { return waiting(a.stderr.buf.Bytes()) > 0 })
	}
	<-back.C
	r.trLn.up(t)

	g.leave("member-1")
	g.produce(50)
	g.settled("member-1 to leave")
	g.leave("member-2")
	r.captured(1, g.name, "left", 2)
	g.prod.Close()
	r.stopAgents()
	agg.wait(t)
	t.Logf("clients, agents and aggregator done after %v", time.Since(start).Round(time.Millisecond))

	want := r.analyze()
	got, line := normalize(t, agg.stdout.buf.Bytes())
	compareLines(t, summaryUntimed(t, want), summaryUntimed(t, got))
	checkAggLine(t, line, map[string]string{"b0": "stopped", "b1": "stopped", "b2": "stopped"}, "")
	if line.Late != 0 || line.Withheld != 0 {
		t.Errorf("aggregate line: %+v; want no late exchange or withheld expiry", line)
	}
	checkGroupEvents(t, got, g.name, 2, 2, 0)
	t.Logf("%d lines compared; %d duplicate batches", len(want), line.Duplicates)
}

var waitingRE = regexp.MustCompile(`kwire: publish: .* (\d+) bytes waiting`)

// waiting is the largest number of bytes an agent's publish lines said
// were waiting for the transport.
func waiting(stderr []byte) int {
	most := 0
	for _, m := range waitingRE.FindAllSubmatch(stderr, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		most = max(most, n)
	}
	return most
}

// agentDown is how long TestAggregateLiveAgentRestart's agent is dead:
// longer than the members' session and rebalance timeouts together, past
// which the correlator concludes that a silent member expired.
const (
	agentDown        = 3 * time.Second
	restartSession   = 1500 * time.Millisecond
	restartRebalance = 500 * time.Millisecond
)

// TestAggregateLiveAgentRestart: the agent on the coordinator's host of a
// kgo group is killed (SIGKILL: no final counters, its last batches lost)
// and restarted 3 s later, longer than the members' session and rebalance
// timeouts (1.5 s and 0.5 s),
// while the members go on heartbeating, consuming and committing; then a
// member leaves and the other after it. `kwire aggregate`, running all
// along, shows the killed run restarted, and declares no member expired
// (the other agents' traffic moved its clock past the sessions, but the
// silence was the aggregator's only: the expiries it concluded are
// withheld, then dropped when the members were heard again).
func TestAggregateLiveAgentRestart(t *testing.T) {
	start := time.Now()
	const topic = "agg-restart-topic"
	r := newAggLive(t, []kfake.Opt{kfake.GroupMinSessionTimeout(time.Second)}, topic)
	g := newGroup(t, r.kf, groupOn(t, r.kf, "agg-restart-group", 1), topic, 6)
	g.memberOpts = func() []kgo.Opt {
		return append(fcGated(r.kf)(), kgo.SessionTimeout(restartSession), kgo.RebalanceTimeout(restartRebalance),
			kgo.HeartbeatInterval(300*time.Millisecond))
	}
	r.published()
	agg := r.startAggregator()
	g.produce(50)
	g.join("member-1")
	g.settled("member-1 to consume and commit everything")
	g.join("member-2")
	g.produce(50)
	g.settled("member-2 to join")

	r.delivered(1) // what the kill loses is counted, but this test is about the hole
	r.agents[1].kill(t)
	restart := time.NewTimer(agentDown)
	g.produce(50)
	g.settled("the members to consume with the coordinator's agent dead")
	<-restart.C
	r.startAgent(1)
	g.produce(50)
	g.settled("the members to consume with the agent back")
	g.leave("member-2")
	g.settled("member-2 to leave")
	g.leave("member-1")
	r.captured(1, g.name, "left", 2)
	g.prod.Close()
	r.stopAgents()
	agg.wait(t)
	t.Logf("clients, agents and aggregator done after %v", time.Since(start).Round(time.Millisecond))

	got, line := normalize(t, agg.stdout.buf.Bytes())
	checkAggLine(t, line, map[string]string{"b0": "stopped", "b1": "restarted stopped", "b2": "stopped"}, "b1")
	checkGroupEvents(t, got, g.name, 2, 2, 0)
	checkSummaryHazards(t, got, g.name, correlate.HazardMemberExpired, correlate.HazardHeartbeatLate)
	if line.Restarts != 1 || line.Withheld == 0 || len(line.Unobserved) != 0 {
		t.Errorf("aggregate line: %d restarts, %d expiries withheld, unobserved %+v; want 1 restart, expiries withheld (the members' sessions ran out in the aggregator's clock), none unobserved at the end",
			line.Restarts, line.Withheld, line.Unobserved)
	}
	t.Logf("%+v", line)
}

// checkSummaryHazards checks that the summary counts and lists no hazard
// of kinds for group.
func checkSummaryHazards(t *testing.T, lines []string, group string, kinds ...string) {
	t.Helper()
	var sum struct {
		Hazards []struct{ Kind, Group string }
		Groups  []struct {
			Group   string
			Hazards []struct{ Kind string }
		}
	}
	for _, l := range lines {
		if strings.Contains(l, `"type":"summary"`) {
			json.Unmarshal([]byte(l), &sum)
		}
	}
	var found []string
	for _, h := range sum.Hazards {
		if h.Group == group && slices.Contains(kinds, h.Kind) {
			found = append(found, h.Kind)
		}
	}
	for _, g := range sum.Groups {
		for _, h := range g.Hazards {
			if g.Group == group && slices.Contains(kinds, h.Kind) {
				found = append(found, h.Kind+" (count)")
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("summary of %s: hazards %v; want none of %v", group, found, kinds)
	}
}
