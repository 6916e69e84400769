package aggregate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/route"
)

// groupLine is the aggregate line of a --group instance: the single
// aggregator's, over the agents this instance owns, and what it owns.
type groupLine struct {
	*Line
	Group GroupInfo `json:"group"`
}

// GroupInfo is the "group" part of a --group instance's aggregate line:
// the consumer group Name of the instances, the routed Topic and its
// Partitions, and those the instance Owned at the end.
type GroupInfo struct {
	Name       string  `json:"name"`
	Topic      string  `json:"routed_topic"`
	Partitions int32   `json:"partitions"`
	Owned      []int32 `json:"owned"`
	// Groups counts the consumer groups whose lines it wrote.
	Groups int `json:"groups"`
	// Read, Produced and Corrupt are its router's: agents' records read
	// (and routed), routed records produced, records that did not decode;
	// Replayed the records read again without routing (the router took a
	// partition over and rebuilt its bindings).
	Read     int64 `json:"route_read"`
	Replayed int64 `json:"route_replayed"`
	Produced int64 `json:"route_produced"`
	// Redelivered counts routed records read again (a router sent them
	// again after taking a partition over).
	Redelivered int64 `json:"redelivered"`
	// Handovers and UncleanHandovers count the partitions taken over from
	// a clean or an unclean handover record (docs/aggregate.md);
	// Suppressed the lines left out as written by a previous owner;
	// Uncertain the lines written that a drift of positions between
	// instances could have duplicated; MaybeDuplicate the lines written
	// after an unclean handover that its owner may have written too;
	// CommitErrors the handover commits that failed.
	Handovers        int64 `json:"handovers"`
	UncleanHandovers int64 `json:"handovers_unclean"`
	Suppressed       int64 `json:"handover_suppressed"`
	Uncertain        int64 `json:"handover_uncertain"`
	MaybeDuplicate   int64 `json:"handover_maybe_duplicate"`
	CommitErrors     int64 `json:"handover_commit_errors"`
}

// finish closes the correlator and writes the summary, the stats of the
// agents it owns, and its aggregate line.
func (g *groupAgg) finish(stdout io.Writer, rs *routeStage) error {
	ag := g.ag
	m, p := ag.m, ag
	end := m.end
	g.final = end // the position of what closing gives
	p.corr.Close(end)
	snap := p.corr.Snapshot()
	unobs := m.cover.patch(snap)
	g.filterSnapshot(snap)
	p.out.Summary(snap)
	var cs capture.Stats
	var ds decode.Stats
	for _, a := range m.agents {
		if c := a.counter; c != nil && g.owns(route.AgentKey(a.agent.String())) {
			addCounts(reflect.ValueOf(&cs).Elem(), reflect.ValueOf(&c.Capture).Elem())
			addCounts(reflect.ValueOf(&ds).Elem(), reflect.ValueOf(&c.Decode).Elem())
		}
	}
	p.out.Stats(end, cs, ds)
	if err := p.out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	line := ag.line(end, time.Now())
	line.Agents, line.Missing, line.Dropped, line.Restarts, line.Duplicates = nil, 0, 0, 0, 0
	for _, a := range m.agents {
		if !g.owns(route.AgentKey(a.agent.String())) {
			continue
		}
		x := LineAgent{Agent: a.name, State: m.state(a, time.Now()), Batches: a.got, Missing: a.missing(), First: correlate.TimeOf(a.first), Latest: correlate.TimeOf(a.latest)}
		if a.counter != nil {
			x.Publish = a.counter.Publish
		}
		if a.restarted {
			line.Restarts++
		}
		line.Agents = append(line.Agents, x)
		line.Missing += x.Missing
		line.Dropped += x.Publish.BatchesDropped
		line.Duplicates += a.duplicates
	}
	slices.SortFunc(line.Agents, func(a, b LineAgent) int { return cmp.Compare(a.Agent, b.Agent) })
	line.Unobserved = slices.DeleteFunc(unobs, func(u Unobserved) bool { return !g.owns(route.GroupKey(u.Group)) })
	line.Corrupt = g.corrupt + rs.corrupt.Load()
	line.Unverified = rs.verify.count()
	gl := groupLine{Line: line, Group: GroupInfo{Name: g.name, Topic: rs.routed, Partitions: g.parts,
		Owned: ownedList(g.owned), Groups: len(snap.Groups), Read: rs.read.Load(), Replayed: rs.replayed.Load(),
		Produced: rs.produced.Load(), Redelivered: g.redelivered,
		Handovers: g.handovers, UncleanHandovers: g.uncleanHandovers, Suppressed: g.suppressed, Uncertain: g.uncertain,
		MaybeDuplicate: g.maybeDup, CommitErrors: g.commitErrors.Load()}}
	if p.text {
		_, err := fmt.Fprintf(stdout, "aggregate: group %s, partitions %v of %s (%d groups): %d agents (%d restarts), %d batches missing, %d duplicate, %d corrupt, %d unverified, %d late exchanges, %d batches dropped by agents, %d expiries withheld (%d unobserved members)\n",
			g.name, gl.Group.Owned, rs.routed, gl.Group.Groups, len(line.Agents), line.Restarts, line.Missing, line.Duplicates, line.Corrupt, line.Unverified, line.Late, line.Dropped, line.Withheld, len(line.Unobserved))
		return err
	}
	b, _ := json.Marshal(gl)
	_, err := stdout.Write(append(b, '\n'))
	return err
}

// filterSnapshot keeps the groups, clients and hazards this instance
// owns (route.FilterSnapshot).
func (g *groupAgg) filterSnapshot(s *correlate.Snapshot) { route.FilterSnapshot(s, g.owns) }
