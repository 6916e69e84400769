package jsonout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kwire/kwire/correlate"
)

// What a hazard says happens to records (correlate.Impact.What), as the
// verdict says it.
var impactWords = map[string]string{
	correlate.ImpactLost:        "never processed",
	correlate.ImpactNotRead:     "not read (the new group started at the log's end)",
	correlate.ImpactReplayed:    "processed again",
	correlate.ImpactRedelivered: "redelivered",
}

// groupVerdict is what the verdict says of one group's hazards.
type groupVerdict struct {
	group   string
	worst   int
	kinds   map[string]*kindVerdict
	routine map[string]int
	// spans are the records its hazards at warn or worse lose or replay,
	// by what and partition, merged; unranged counts those known only by
	// number.
	spans    map[spanKey]correlate.Spans
	unranged map[string]int64
}

type spanKey struct {
	what, topic string
	part        int32
}

// kindVerdict is one kind's hazards in a group.
type kindVerdict struct {
	kind                 string
	worst, n, incomplete int
	spans                map[spanKey]correlate.Spans
	unranged             map[string]int64
	members, clients     []string
	parts, other, gens   []string
}

// verdicts sorts s's hazards into their groups' verdicts, most severe
// first; a group without hazards (or with routine ones only) is worst 0.
func verdicts(s *correlate.Snapshot, ids func(string) string) []*groupVerdict {
	byGroup := map[string]*groupVerdict{}
	get := func(g string) *groupVerdict {
		v := byGroup[g]
		if v == nil {
			v = &groupVerdict{group: g, kinds: map[string]*kindVerdict{}, routine: map[string]int{},
				spans: map[spanKey]correlate.Spans{}, unranged: map[string]int64{}}
			byGroup[g] = v
		}
		return v
	}
	for _, g := range s.Groups {
		get(g.Group)
	}
	for i := range s.Hazards {
		h := &s.Hazards[i]
		v := get(h.Group)
		if routine(h) {
			v.routine[h.Kind]++
			continue
		}
		rank := correlate.SeverityRank(h.Severity)
		v.worst = max(v.worst, rank)
		k := v.kinds[h.Kind]
		if k == nil {
			k = &kindVerdict{kind: h.Kind, spans: map[spanKey]correlate.Spans{}, unranged: map[string]int64{}}
			v.kinds[h.Kind] = k
		}
		k.add(h, ids)
		if im, ok := h.Impact(); ok && rank >= 2 {
			addImpact(v.spans, v.unranged, im)
		}
	}
	out := slices.Collect(maps.Values(byGroup))
	slices.SortFunc(out, func(a, b *groupVerdict) int {
		return cmp.Or(cmp.Compare(b.worst, a.worst), cmp.Compare(a.group, b.group))
	})
	return out
}

func (k *kindVerdict) add(h *correlate.HazardEvent, ids func(string) string) {
	k.n++
	k.worst = max(k.worst, correlate.SeverityRank(h.Severity))
	if h.EvidenceComplete != nil && !*h.EvidenceComplete {
		k.incomplete++
	}
	im, ok := h.Impact()
	if ok {
		addImpact(k.spans, k.unranged, im)
	}
	if h.MemberID != "" {
		k.members = addOnce(k.members, ids(h.MemberID))
	}
	switch {
	case h.ClientID != "" && h.ClientHost != "":
		k.clients = addOnce(k.clients, h.ClientID+"@"+h.ClientHost)
	case h.ClientID != "" || h.ClientHost != "":
		k.clients = addOnce(k.clients, h.ClientID+h.ClientHost)
	}
	if h.Topic != "" && h.Partition != nil && !im.Ranged {
		k.parts = addOnce(k.parts, fmt.Sprintf("%s/%d", h.Topic, *h.Partition))
	}
	switch {
	case h.TransactionalID != "":
		k.other = addOnce(k.other, "transactional id "+h.TransactionalID)
	case h.FirstGeneration != nil && h.LastGeneration != nil:
		k.other = addOnce(k.other, fmt.Sprintf("generations %d..%d", *h.FirstGeneration, *h.LastGeneration))
	case h.Kind == correlate.HazardRebalanceSlow && h.Generation != nil:
		k.gens = append(k.gens, fmt.Sprint(*h.Generation))
	case h.Acks != nil:
		k.other = addOnce(k.other, fmt.Sprintf("acks=%d on %s", *h.Acks, h.Topic))
	}
}

// addImpact merges im into spans (ranged) or unranged: two hazards over
// the same records count them once.
func addImpact(spans map[spanKey]correlate.Spans, unranged map[string]int64, im correlate.Impact) {
	if !im.Ranged {
		unranged[im.What] += im.N
		return
	}
	k := spanKey{im.What, im.Topic, im.Partition}
	ss := spans[k]
	ss.Add(correlate.Span{First: im.First, Last: im.Last})
	spans[k] = ss
}

// total is how many records spans and unranged count of what.
func total(spans map[spanKey]correlate.Spans, unranged map[string]int64, what string) int64 {
	n := unranged[what]
	for k, ss := range spans {
		if k.what == what {
			n += ss.Count()
		}
	}
	return n
}

// impactText is "processed again hcj-orders/0 107..116 (10), 12 more" for
// each what, most serious first.
func impactText(spans map[spanKey]correlate.Spans, unranged map[string]int64) string {
	var out []string
	for _, what := range []string{correlate.ImpactLost, correlate.ImpactNotRead, correlate.ImpactReplayed, correlate.ImpactRedelivered} {
		var parts []string
		for _, k := range slices.SortedFunc(maps.Keys(spans), func(a, b spanKey) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
		}) {
			if k.what != what {
				continue
			}
			var rs []string
			for _, s := range spans[k] {
				if s.First == s.Last {
					rs = append(rs, fmt.Sprint(s.First))
				} else {
					rs = append(rs, fmt.Sprintf("%d..%d", s.First, s.Last))
				}
			}
			parts = append(parts, fmt.Sprintf("%s/%d %s", k.topic, k.part, strings.Join(listed(rs, 4), ", ")))
		}
		line := records(total(spans, unranged, what)) + " " + impactWords[what]
		switch n := unranged[what]; {
		case len(parts) > 0 && n > 0:
			out = append(out, fmt.Sprintf("%s: %s; %d more whose partitions the hazards' summaries name", line, strings.Join(listed(parts, 6), "; "), n))
		case len(parts) > 0:
			out = append(out, line+": "+strings.Join(listed(parts, 6), "; "))
		case n > 0:
			out = append(out, line+" (the hazards' summaries name the partitions)")
		}
	}
	return strings.Join(out, "; ")
}

// verdictReport writes the report's first block: per consumer group, most
// severe first, its worst severity, what its hazards say will be lost or
// processed again (offset ranges per partition, counted once where
// hazards overlap), and where (partitions, members, clients); then what
// to do, a line per hazard kind. One line when nothing is wrong.
func verdictReport(b *strings.Builder, s *correlate.Snapshot, ids func(string) string) {
	vs := verdicts(s, ids)
	routineN := 0
	var names []string
	for _, v := range vs {
		for _, n := range v.routine {
			routineN += n
		}
		if v.group != "" {
			names = append(names, v.group)
		}
	}
	if len(vs) == 0 || vs[0].worst == 0 {
		what := "no consumer group traffic"
		switch len(names) {
		case 0:
		case 1:
			what = "consumer group " + names[0]
		default:
			what = fmt.Sprintf("%d consumer groups (%s)", len(names), strings.Join(listed(names, 5), ", "))
		}
		fmt.Fprintf(b, "verdict: healthy: %s: nothing lost or processed again, no warning", what)
		if routineN > 0 {
			fmt.Fprintf(b, " (%d info hazards every new group shows, folded)", routineN)
		}
		b.WriteString("\n")
		return
	}
	b.WriteString("== verdict (worst first)\n")
	for _, v := range vs {
		who := v.group
		if who == "" {
			who = "producers and clients (no group)"
		}
		fmt.Fprintf(b, "%-8s  %s: %s\n", verdictLabel(v.worst), who, v.headline())
		for _, k := range slices.SortedFunc(maps.Values(v.kinds), func(a, b *kindVerdict) int {
			return cmp.Or(cmp.Compare(b.worst, a.worst), cmp.Compare(a.kind, b.kind))
		}) {
			fmt.Fprintf(b, "    %-8s  %s\n", verdictLabel(k.worst), k.text())
		}
	}
	whatToDo(b, vs)
}

// headline says in a few words what a group's hazards cost.
func (v *groupVerdict) headline() string {
	var parts []string
	for _, what := range []string{correlate.ImpactLost, correlate.ImpactReplayed, correlate.ImpactRedelivered} {
		if n := total(v.spans, v.unranged, what); n > 0 {
			parts = append(parts, records(n)+" "+impactWords[what])
		}
	}
	switch {
	case len(parts) > 0:
	case v.worst == 0:
		parts = append(parts, "healthy")
	default:
		parts = append(parts, "nothing lost or processed again that the capture shows")
	}
	if n := len(v.routine); n > 0 {
		c := 0
		for _, x := range v.routine {
			c += x
		}
		parts = append(parts, fmt.Sprintf("%d routine info folded", c))
	}
	return strings.Join(parts, "; ")
}

// text is a kind's line: "member_expired ×5: 190 records processed again
// ...; members a, b; clients c@h".
func (k *kindVerdict) text() string {
	s := k.kind
	if k.n > 1 {
		s += fmt.Sprintf(" ×%d", k.n)
	}
	var parts []string
	if t := impactText(k.spans, k.unranged); t != "" {
		parts = append(parts, t)
	}
	if on := k.unnamed(); len(on) > 0 {
		parts = append(parts, "on "+strings.Join(listed(on, 6), ", "))
	}
	parts = append(parts, listed(k.other, 3)...)
	switch len(k.gens) {
	case 0:
	case 1:
		parts = append(parts, "generation "+k.gens[0])
	default:
		parts = append(parts, "generations "+strings.Join(listed(k.gens, 6), ", "))
	}
	if len(k.members) > 0 {
		parts = append(parts, "member "+strings.Join(listed(k.members, 3), ", "))
	}
	if len(k.clients) > 0 {
		parts = append(parts, "client "+strings.Join(listed(k.clients, 3), ", "))
	}
	if k.incomplete > 0 {
		parts = append(parts, fmt.Sprintf("%d info only: the capture lost data where their evidence would be", k.incomplete))
	}
	if len(parts) == 0 {
		return s
	}
	return s + ": " + strings.Join(parts, "; ")
}

// unnamed are the partitions of k's hazards without a range that its
// ranges do not already name (a commit_regression superseded, next to
// one in force on the same partition).
func (k *kindVerdict) unnamed() []string {
	named := map[string]bool{}
	for sk := range k.spans {
		named[fmt.Sprintf("%s/%d", sk.topic, sk.part)] = true
	}
	return slices.DeleteFunc(slices.Clone(k.parts), func(p string) bool { return named[p] })
}

// whatToDo writes a line per hazard kind in the verdict: what to do.
func whatToDo(b *strings.Builder, vs []*groupVerdict) {
	worst := map[string]int{}
	for _, v := range vs {
		for kind, k := range v.kinds {
			worst[kind] = max(worst[kind], k.worst)
		}
	}
	if len(worst) == 0 {
		return
	}
	b.WriteString("\n== what to do (docs/runbook.md says more)\n")
	for _, kind := range slices.SortedFunc(maps.Keys(worst), func(a, b string) int {
		return cmp.Or(cmp.Compare(worst[b], worst[a]), cmp.Compare(a, b))
	}) {
		fmt.Fprintf(b, "%s: %s\n", kind, Remedy(kind))
	}
}

func verdictLabel(rank int) string {
	if rank == 0 {
		return "OK"
	}
	return strings.ToUpper([]string{"", correlate.SeverityInfo, correlate.SeverityWarn, correlate.SeverityCritical}[rank])
}

// listed keeps the first n of xs and says how many more there are.
func listed(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(slices.Clone(xs[:n]), fmt.Sprintf("%d more", len(xs)-n))
}

func addOnce(xs []string, x string) []string {
	if slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

// records is "1 record" or "n records".
func records(n int64) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}
