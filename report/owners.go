package report

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/correlate"
)

// Ownership rows, in SVG units.
const (
	ownerSep  = "\x00" // between the owners of a share group's partition
	ownerRowH = 16.0
	minSeg    = 2.0 // narrower ownership segments are drawn together as churn
	palette   = 8   // member fill classes o0..o7 (style.css)
)

type partKey struct {
	topic     string
	partition int32
}

// ownership draws which member owned each partition over time, from the
// assignments of the group's generations: a segment per owner, labelled
// with the member, and a revocation mark where a partition was taken
// away. An eager protocol revokes everything at a rebalance's start;
// cooperative ones and KIP-848 only what moves. A share group's partition
// may have several owners at once (KIP-932): one segment names them all.
func ownership(ts timeScale, g *correlate.Group, spans []genSpan, ms *members) template.HTML {
	var parts []partKey
	seen := map[partKey]bool{}
	owners := make([]map[partKey]string, len(spans))
	for i, sp := range spans {
		owners[i] = map[partKey]string{}
		for _, gm := range sp.ev.Members {
			for t, ps := range gm.Assignment {
				for _, p := range ps {
					k := partKey{t, p}
					if o := owners[i][k]; o != "" {
						owners[i][k] = o + ownerSep + gm.MemberID
					} else {
						owners[i][k] = gm.MemberID
					}
					if !seen[k] {
						seen[k] = true
						parts = append(parts, k)
					}
				}
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.SortFunc(parts, func(a, b partKey) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	more := 0
	if len(parts) > maxOwnerRows {
		parts, more = parts[:maxOwnerRows], len(parts)-maxOwnerRows
	}
	height := axisH + 6 + float64(len(parts))*ownerRowH + 8
	if more > 0 {
		height += ownerRowH
	}
	eager := g.GroupType == correlate.GroupClassic && !strings.Contains(g.Protocol, "cooperative")
	var s svg
	s.open(height, "partition ownership of group "+g.Group)
	s.axis(ts, height-4)
	y := axisH + 6
	for _, k := range parts {
		s.raw(`<g class="own-row" data-partition="%s">`, esc(fmt.Sprintf("%s[%d]", k.topic, k.partition)))
		s.text(labelW-8, y+ownerRowH/2+4, "lane-label", "end", fmt.Sprintf("%s[%d]", k.topic, k.partition))
		s.ownerRow(ts, k, spans, owners, ms, eager, y)
		s.raw("</g>")
		y += ownerRowH
	}
	if more > 0 {
		s.text(labelW-8, y+ownerRowH/2+4, "lane-label", "end", fmt.Sprintf("+%d more partitions", more))
	}
	return s.close()
}

// ownerRow draws one partition's owners. Segments too narrow to see are
// gathered into one churn mark.
func (s *svg) ownerRow(ts timeScale, k partKey, spans []genSpan, owners []map[partKey]string, ms *members, eager bool, y float64) {
	var churnFrom, churnTo time.Time
	churn := 0
	flush := func() {
		if churn == 0 {
			return
		}
		x0, x1 := ts.x(churnFrom), ts.x(churnTo)
		s.raw(`<g><rect class="seg" x="%s" y="%s" width="%s" height="%s" fill="url(#p-storm)"/>`, num(x0), num(y+2), num(max(x1-x0, 1)), num(ownerRowH-4))
		s.title(fmt.Sprintf("%d owners in turn, too fast to draw", churn))
		s.raw("</g>")
		churn = 0
	}
	for i := 0; i < len(spans); {
		owner := owners[i][k]
		j := i + 1
		for !eager && j < len(spans) && owners[j][k] == owner {
			j++
		}
		from, to := spans[i].stable, spans[j-1].to
		revoked := j < len(spans)
		ids := strings.Split(owner, ownerSep)
		if !revoked && len(ids) == 1 { // the current owner: to its end, if it ended
			if x := ms.byID[owner]; x != nil && x.m != nil && x.m.GoneAt != nil && x.m.GoneAt.Before(to) {
				to = x.m.GoneAt.Time
			}
		}
		i = j
		if owner == "" {
			continue
		}
		if ts.x(to)-ts.x(from) < minSeg {
			if churn == 0 {
				churnFrom = from
			}
			churn++
			churnTo = to
			continue
		}
		flush()
		s.segment(ts, ids, ms, from, to, y, revoked)
	}
	flush()
}

// segment draws the owners ids (member ids) of a partition from from to to.
func (s *svg) segment(ts timeScale, ids []string, ms *members, from, to time.Time, y float64, revoked bool) {
	x0, x1 := ts.x(from), ts.x(to)
	class := "o-unknown"
	if x := ms.byID[ids[0]]; x != nil {
		class = fmt.Sprintf("o%d", x.idx%palette)
	}
	labels, who := make([]string, len(ids)), make([]string, len(ids))
	for i, id := range ids {
		r := ms.ref(id)
		labels[i], who[i] = orDash(r.Label), strings.TrimSpace(r.Label+" "+id)
	}
	label := strings.Join(labels, "+")
	s.raw(`<g class="seg" data-owner="%s">`, esc(strings.Join(ids, " ")))
	tip := fmt.Sprintf("%s owned it from %s to %s", strings.Join(who, " and "), clock(from), clock(to))
	if revoked {
		tip += ", then revoked"
	}
	s.title(tip)
	s.raw(`<rect class="%s" x="%s" y="%s" width="%s" height="%s"/>`, class, num(x0), num(y+2), num(max(x1-x0, 1)), num(ownerRowH-4))
	if x1-x0 >= float64(len(label))*6+8 {
		s.text((x0+x1)/2, y+ownerRowH/2+4, "seg-label", "middle", label)
	}
	if revoked {
		s.raw(`<path class="revoke" d="M%s %sv%s"/>`, num(x1), num(y), num(ownerRowH))
	}
	s.raw("</g>")
}
