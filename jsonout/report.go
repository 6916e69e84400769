package jsonout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kwire/kwire/correlate"
)

// textReport is kwire analyze's human report: the verdict and what to do,
// the timeline tl held (nil: the events were written as they came), per
// group its generations, members and partitions now, then the hazards.
// Member ids are shortened as o says.
func textReport(s *correlate.Snapshot, tl *timeline, o *Options) string {
	var b strings.Builder
	ids := o.ids
	fmt.Fprintf(&b, "== kwire report at %s (the end of the capture; times are UTC", Time(s.Time.Time))
	if !o.FullIDs {
		b.WriteString("; member ids cut to a prefix, --full-ids for them whole")
	}
	b.WriteString(")\n")
	verdictReport(&b, s, ids)
	if tl != nil {
		tl.write(&b)
	}
	if len(s.Groups) == 0 {
		b.WriteString("\nno consumer group traffic in the capture\n")
	}
	for i := range s.Groups {
		groupReport(&b, &s.Groups[i], ids)
	}
	txnReport(&b, s)
	hazardReport(&b, s, ids)
	for _, u := range s.Unattributed {
		fmt.Fprintf(&b, "\nfetches not attributed to one group: %s@%s (%s", u.ClientID, u.ClientHost, u.Status)
		if len(u.Candidates) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(u.Candidates, ", "))
		}
		fmt.Fprintf(&b, "), %d partitions\n", len(u.Partitions))
	}
	if l := limitsText(&s.Stats.Limits); l != "" {
		b.WriteString("\nlimits: " + l + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// limitsText says which of the state tables' caps bit, and how often
// (summary stats.limits); "" when none did. The histories trimmed
// (commits_dropped, generations_dropped) are left to the JSON summary:
// they bite on any long capture and lose no group.
func limitsText(l *correlate.Limits) string {
	var out []string
	for _, c := range []struct {
		n    int64
		text string
	}{
		{l.GroupsEvicted, "%d groups only named (no member, generation or commit seen) forgotten to make room (--max-groups)"},
		{l.GroupsDropped, "%d requests for groups past --max-groups ignored"},
		{l.MembersDropped, "%d members past --max-members forgotten"},
		{l.PartitionsDropped, "%d partitions past --max-partitions not followed"},
		{l.ClientsEvicted, "%d clients past --max-clients forgotten"},
		{l.TopicIDsEvicted, "%d topic ids past --max-topic-ids forgotten"},
		{l.TxnsEvicted, "%d transactional ids past --max-clients forgotten"},
		{l.SessionsEvicted, "%d fetch sessions forgotten"},
		{l.ShareHeldDropped, "%d share acquisitions forgotten unjudged"},
	} {
		if c.n > 0 {
			out = append(out, fmt.Sprintf(c.text, c.n))
		}
	}
	return strings.Join(out, "; ")
}

func groupReport(b *strings.Builder, g *correlate.Group, ids func(string) string) {
	fmt.Fprintf(b, "\n== group %s (%s", g.Group, orUnknown(g.GroupType))
	switch {
	case g.ProtocolType != "" && g.Protocol != "":
		fmt.Fprintf(b, ", %s/%s", g.ProtocolType, g.Protocol)
	case g.ProtocolType != "" && g.ProtocolType != g.GroupType: // a share group's is "share"
		fmt.Fprintf(b, ", %s", g.ProtocolType)
	}
	fmt.Fprintf(b, ") state %s, generation %d, coordinator %s\n", g.State, g.Generation, CoordinatorText(&g.Coordinator))
	if s := g.Streams; s != nil {
		streamsReport(b, s)
	}
	if len(g.Generations) > 0 {
		b.WriteString("generations:\n")
		tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  gen\tcompleted\ttook\tmembers\tcause")
		for _, e := range g.Generations {
			when, took := "?", "?"
			if e.Completed != nil {
				when = Time(e.Completed.Time)
			}
			if e.DurationMillis != nil {
				took = fmt.Sprintf("%dms", *e.DurationMillis)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%s\n", e.Generation, when, took, len(e.Members), ids(CauseText(e.Cause)))
		}
		tw.Flush()
	}
	if len(g.Members) > 0 {
		b.WriteString("members:\n")
		tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  member\tclient\tstatus\tgen\tassignment")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "  %s\t%s@%s\t%s\t%d\t%s\n", ids(m.MemberID), m.ClientID, m.ClientHost, m.Status, m.Generation, correlate.MemberAssignmentText(m.Assignment, m.Tasks))
		}
		tw.Flush()
	}
	if len(g.Partitions) > 0 {
		b.WriteString("partitions:\n")
		tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "topic\tpart\tcommitted\tposition\tend\tlag\tlag s\thealth\trecords\tbytes\towner\t")
		for _, p := range g.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", p.Topic, p.Partition, opt(p.Committed), opt(p.Position),
				opt(p.EndOffset), opt(p.Lag), correlate.LagSecondsText(p.LagSeconds, p.LagSecondsEstimated), health(p.Health), p.Records, p.Bytes, ids(orDash(p.Owner)))
		}
		tw.Flush()
	}
	if g.Share != nil && len(g.Share.Partitions) > 0 {
		shareReport(b, g.Share)
	}
}

// streamsReport tells a streams group's topology (each subtopology's
// source topics) and the statuses its heartbeats were answered with.
func streamsReport(b *strings.Builder, s *correlate.StreamsSummary) {
	var subs []string
	for _, id := range slices.Sorted(maps.Keys(s.Subtopologies)) {
		subs = append(subs, fmt.Sprintf("%s reads %s", id, strings.Join(s.Subtopologies[id], ", ")))
	}
	fmt.Fprintf(b, "topology epoch %d: subtopology %s\n", s.TopologyEpoch, orDash(strings.Join(subs, "; subtopology ")))
	if len(s.Statuses) > 0 {
		var st []string
		for _, k := range slices.Sorted(maps.Keys(s.Statuses)) {
			st = append(st, fmt.Sprintf("%s %d", k, s.Statuses[k]))
		}
		fmt.Fprintf(b, "heartbeat statuses: %s\n", strings.Join(st, ", "))
	}
}

// shareReport lists a share group's records per partition: acquired,
// redelivered, acknowledged, lock expiries, the highest delivery count.
func shareReport(b *strings.Builder, s *correlate.ShareSummary) {
	b.WriteString("share records:\n")
	tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topic\tpart\tacquired\tredelivered\taccepted\treleased\trejected\tlock expired\tmax delivery\theld\t")
	for _, p := range s.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", p.Topic, p.Partition, p.Acquired, p.Redelivered,
			p.Accepted, p.Released, p.Rejected, p.LockExpired, p.MaxDeliveryCount, p.Held)
	}
	tw.Flush()
}

// CoordinatorText says which broker is a group's coordinator: its node, else
// the broker that answered as it, else "unknown".
func CoordinatorText(c *correlate.Coordinator) string {
	switch {
	case c.NodeID >= 0:
		return fmt.Sprintf("node %d (%s:%d)", c.NodeID, c.Host, c.Port)
	case c.ServedBy != "":
		return c.ServedBy
	}
	return "unknown"
}

func opt(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown type"
	}
	return s
}

// hazardReport lists the hazards by severity, most severe first, each with
// its summary and the exchanges it rests on; the routine info hazards of
// new groups in one line per group.
func hazardReport(b *strings.Builder, s *correlate.Snapshot, ids func(string) string) {
	if len(s.Hazards) == 0 {
		b.WriteString("\nhazards: none\n")
		return
	}
	fmt.Fprintf(b, "\nhazards: %d critical, %d warn, %d info", s.HazardCounts[correlate.SeverityCritical],
		s.HazardCounts[correlate.SeverityWarn], s.HazardCounts[correlate.SeverityInfo])
	if s.HazardsDropped > 0 {
		fmt.Fprintf(b, " (%d more not listed)", s.HazardsDropped)
	}
	b.WriteString("\n")
	sev := ""
	folded := map[string]map[string]int{}
	for i := range s.Hazards {
		h := &s.Hazards[i]
		if routine(h) {
			if folded[h.Group] == nil {
				folded[h.Group] = map[string]int{}
			}
			folded[h.Group][h.Kind]++
			continue
		}
		if h.Severity != sev {
			sev = h.Severity
			fmt.Fprintf(b, "%s:\n", strings.ToUpper(sev))
		}
		fmt.Fprintf(b, "  %s %s: %s\n", Time(h.Time()), h.Kind, ids(h.Summary))
		for _, ev := range h.Evidence {
			fmt.Fprintf(b, "      %s %s #%d c%d %s>%s\n", Time(ev.TS.Time), ev.API, ev.CorrelationID, ev.Conn.ID, ev.Conn.Client, ev.Conn.Broker)
		}
	}
	if len(folded) > 0 {
		b.WriteString("INFO, routine (every hazard in --json):\n")
		for _, g := range slices.Sorted(maps.Keys(folded)) {
			fmt.Fprintf(b, "  %s\n", routineText(g, folded[g]))
		}
	}
}

// health is a partition's health as the text report shows it: its state,
// "-" when not judged (a capture shorter than --health-window).
func health(h *correlate.Health) string {
	if h == nil {
		return "-"
	}
	return h.State
}
