package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rivo/tview"

	"github.com/kwire/kwire/correlate"
)

// partitionView is one partition of a group (enter on its row in the
// group's detail): its offsets, lag and health, who owned it generation
// by generation, and its commits.
type partitionView struct {
	pane      *textPane
	ids       idForm
	group     string
	topic     string
	partition int32
	g         *correlate.Group
	p         *correlate.Partition
}

func newPartitionView() *partitionView {
	v := &partitionView{}
	v.pane = newTextPane(v.render)
	return v
}

// set shows topic/partition of group from fr.
func (v *partitionView) set(group, topic string, partition int32, fr *Frame) {
	v.group, v.topic, v.partition = group, topic, partition
	v.pane.ScrollToBeginning()
	v.update(fr)
}

func (v *partitionView) update(fr *Frame) {
	v.g, v.p = nil, nil
	if fr != nil && fr.Snapshot != nil {
		v.g = findGroup(fr.Snapshot, v.group)
	}
	if v.g != nil {
		for i := range v.g.Partitions {
			if p := &v.g.Partitions[i]; p.Topic == v.topic && p.Partition == v.partition {
				v.p = p
			}
		}
	}
	v.pane.invalidate()
}

func (v *partitionView) render(width int) string {
	var b strings.Builder
	p := v.p
	name := fmt.Sprintf("%s/%d", v.topic, v.partition)
	if p == nil {
		fmt.Fprintf(&b, "partition %s of group %s: not in the capture (yet)\n", tview.Escape(name), tview.Escape(v.group))
		return b.String()
	}
	health := "-"
	if p.Health != nil {
		health = strings.ToUpper(p.Health.State)
	}
	fmt.Fprintf(&b, "[::b]%s[::-]  of %s  owner %s  health %s\n", tview.Escape(name), tview.Escape(v.group),
		tview.Escape(orDash(v.ids.id(p.Owner))), health)
	b.WriteString("\n")
	writeTable(&b, width, []col{{title: "FIELD"}, {title: "VALUE", shrink: 10}}, v.facts(p))
	v.owners(&b, width)
	v.commits(&b, p, width)
	return b.String()
}

// facts are the partition's offsets, lag, health and fetching, one a
// line.
func (v *partitionView) facts(p *correlate.Partition) [][]cell {
	at := func(t *correlate.Time) string {
		if t == nil {
			return ""
		}
		return " at " + clock(t.Time)
	}
	committed := opt(p.Committed)
	if p.Committed != nil {
		committed += at(p.CommittedAt)
		if p.CommittedBy != "" {
			committed += fmt.Sprintf(" by %s (generation %d)", v.ids.id(p.CommittedBy), p.CommittedGeneration)
		}
		if p.CommittedSource != "" {
			committed += ", source " + p.CommittedSource
		}
	}
	end := opt(p.EndOffset)
	if p.EndOffset != nil {
		end += at(p.EndOffsetAt)
		if p.EndOffsetFrom != "" {
			end += ", from " + p.EndOffsetFrom
		}
	}
	lag := cell{text: opt(p.Lag)}
	if p.Lag != nil && *p.Lag > 0 {
		lag.color = "yellow"
	}
	lagSecs := "-"
	if p.LagSeconds != nil {
		lagSecs = correlate.LagSecondsText(p.LagSeconds, p.LagSecondsEstimated) + "s"
		if p.LagSecondsEstimated {
			lagSecs += " (estimated)"
		}
		if p.TimestampType != "" {
			lagSecs += ", " + p.TimestampType
		}
	}
	health := cell{text: "- (needs a committed offset, an end and a whole window of capture)"}
	if h := p.Health; h != nil {
		health.text = h.State
		if h.Evidence != "" {
			health.text += ": " + h.Evidence
		}
		health.text += " (over " + dur(time.Duration(h.WindowMillis)*time.Millisecond)
		if h.LagThen != nil {
			health.text += ", lag then " + strconv.FormatInt(*h.LagThen, 10)
		}
		health.text += ")"
		if h.State != correlate.HealthOK {
			health.color = severityColor(correlate.SeverityWarn)
		}
	}
	fetchErr := "-"
	if p.LastErrorCode != 0 {
		fetchErr = p.LastError + at(p.LastErrorAt)
	}
	rows := [][]cell{
		{c("owner"), c(orDash(v.ids.id(p.Owner)))},
		{c("committed"), c(committed)},
		{c("end offset"), c(end)},
		{c("lag"), lag},
		{c("lag seconds"), c(lagSecs)},
		{c("health"), health},
		{c("position"), c(opt(p.Position))},
		{c("high watermark"), c(opt(p.HighWatermark))},
		{c("last stable"), c(opt(p.LastStable))},
		{c("log start"), c(opt(p.LogStart))},
		{c("delivered to"), c(opt(p.DeliveredTo))},
		{c("fetched"), cf("%s records, %s in %s batches by %s Fetches, the last%s by %s", count(p.Records), bytesText(p.Bytes),
			count(p.Batches), count(p.Fetches), at(p.LastFetch), orDash(v.ids.id(p.FetchedBy)))},
		{c("fetch error"), c(fetchErr)},
	}
	if lo := p.ListOffsets; lo != nil {
		rows = append(rows, []cell{c("list offsets"), cf("timestamp %d answered %d at %s", lo.Timestamp, lo.Offset, clock(lo.TS.Time))})
	}
	return rows
}

// owners writes who was assigned the partition, generation by generation,
// newest first: one row per change of owner.
func (v *partitionView) owners(b *strings.Builder, width int) {
	type change struct {
		e     *correlate.GenerationEvent // the first generation of the owner
		until int32                      // its last generation
		owner *correlate.GenerationMember
	}
	var changes []change
	known := false
	last := ""
	for i := range v.g.Generations {
		e := &v.g.Generations[i]
		var owner *correlate.GenerationMember
		for j := range e.Members {
			if m := &e.Members[j]; m.Assignment != nil {
				known = true
				for _, p := range m.Assignment[v.topic] {
					if p == v.partition {
						owner = m
					}
				}
			}
		}
		id := ""
		if owner != nil {
			id = owner.MemberID
		}
		if len(changes) == 0 || id != last {
			changes = append(changes, change{e: e, owner: owner})
		}
		changes[len(changes)-1].until = e.Generation
		last = id
	}
	fmt.Fprintf(b, "\n[::u]OWNERS[::-] who was assigned it, newest first\n")
	if !known {
		b.WriteString("no assignment seen (an opaque protocol, or no SyncGroup in the capture)\n")
		return
	}
	rows := make([][]cell, 0, min(len(changes), maxGenerationsShown))
	for i := len(changes) - 1; i >= 0 && len(rows) < maxGenerationsShown; i-- {
		ch := changes[i]
		owner, client := "(none)", "-"
		if ch.owner != nil {
			owner, client = v.ids.id(ch.owner.MemberID), orDash(ch.owner.ClientID)
		}
		gens := fmt.Sprint(ch.e.Generation)
		if ch.until != ch.e.Generation {
			gens += fmt.Sprintf("-%d", ch.until)
		}
		rows = append(rows, []cell{c(gens), c(clock(generationTime(ch.e))), c(owner), c(client), c(ch.e.Cause.Kind)})
	}
	writeTable(b, width, []col{{title: "GENS", right: true}, {title: "FROM"}, {title: "OWNER", shrink: 12, mid: true},
		{title: "CLIENT", shrink: 8}, {title: "CAUSE", shrink: 8}}, rows)
}

// commits writes the partition's remembered commits, newest first.
func (v *partitionView) commits(b *strings.Builder, p *correlate.Partition, width int) {
	fmt.Fprintf(b, "\n[::u]COMMITS[::-] %d remembered, newest first", len(p.Commits))
	if p.CommitsDropped > 0 {
		fmt.Fprintf(b, " (%d older forgotten)", p.CommitsDropped)
	}
	b.WriteString("\n")
	rows := make([][]cell, 0, len(p.Commits))
	for i := len(p.Commits) - 1; i >= 0; i-- {
		cm := &p.Commits[i]
		rows = append(rows, []cell{c(clock(cm.TS.Time)), cf("%d", cm.Offset), c(orDash(v.ids.id(cm.MemberID))), cf("%d", cm.Generation), commitResult(cm.ErrorCode)})
	}
	writeTable(b, width, []col{{title: "TIME"}, {title: "OFFSET", right: true}, {title: "MEMBER", shrink: 10, mid: true},
		{title: "GEN", right: true}, {title: "RESULT", shrink: 8}}, rows)
}
