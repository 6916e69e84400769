package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/rivo/tview"
	"github.com/rivo/uniseg"
)

// rateWindow is how far back rates look, in capture time.
const rateSpan = 10 * time.Second

// sample is a frame's counters at its capture time.
type sample struct {
	at      time.Time
	events  int64
	traffic *Traffic
}

// rateWindow keeps the recent frames' counters, to turn totals into rates
// over the last rateSpan of capture time.
type rateWindow struct {
	samples []sample // oldest first
}

func frameTime(fr *Frame) time.Time {
	if fr.Snapshot != nil && !fr.Snapshot.Time.IsZero() {
		return fr.Snapshot.Time.Time
	}
	return fr.Traffic.Last
}

func (r *rateWindow) add(fr *Frame) {
	s := sample{at: frameTime(fr), events: fr.Events, traffic: &fr.Traffic}
	if s.at.IsZero() {
		return // nothing seen yet
	}
	if len(r.samples) == 0 && !fr.Traffic.First.IsZero() {
		// Counting started with the first request: a zero sample then.
		r.samples = append(r.samples, sample{at: fr.Traffic.First, traffic: &Traffic{}})
	}
	r.samples = append(r.samples, s)
	// Keep the newest sample at least a window old, and what follows.
	cut := s.at.Add(-rateSpan)
	keep := 0
	for i, o := range r.samples {
		if !o.at.After(cut) {
			keep = i
		}
	}
	r.samples = r.samples[keep:]
}

// span returns the latest sample, the base rates are counted from, and the
// capture time between them (0: no rate yet).
func (r *rateWindow) span() (cur, base sample, secs float64) {
	if len(r.samples) == 0 {
		return sample{traffic: &Traffic{}}, sample{traffic: &Traffic{}}, 0
	}
	cur, base = r.samples[len(r.samples)-1], r.samples[0]
	return cur, base, cur.at.Sub(base.at).Seconds()
}

// perSec is (now - then) per second over secs, 0 when secs is 0.
func perSec(now, then int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(now-then) / secs
}

// drawChrome has the tab bar and the status bar written again.
func (u *UI) drawChrome() {
	u.tabs.invalidate()
	u.status.invalidate()
}

// tabsText is the top line: the views (the current one in brackets, so
// it is told without colour) and what applies to it.
func (u *UI) tabsText(width int) string {
	var b strings.Builder
	b.WriteString("[::b]kwire[::-] ")
	nHaz := 0
	if u.frame != nil && u.frame.Snapshot != nil {
		for _, n := range u.frame.Snapshot.HazardCounts {
			nHaz += n
		}
	}
	for i, v := range u.topViews() {
		name := fmt.Sprintf("%d %s", i+1, v)
		if v == viewHazards && nHaz > 0 {
			name += fmt.Sprintf(" (%d)", nHaz)
		}
		if v == u.top {
			fmt.Fprintf(&b, "[::r]%s[::-] ", tview.Escape("["+name+"]"))
		} else {
			fmt.Fprintf(&b, " %s  ", name)
		}
	}
	var ctx []string
	switch u.view {
	case viewDetail:
		ctx = append(ctx, "› "+tview.Escape(u.detail.group))
	case viewMember:
		ctx = append(ctx, "› "+tview.Escape(u.member.group)+" › member "+tview.Escape(u.member.ids.id(u.member.id)))
	case viewPartition:
		ctx = append(ctx, "› "+tview.Escape(u.part.group)+" › "+tview.Escape(fmt.Sprintf("%s/%d", u.part.topic, u.part.partition)))
	case viewEvidence:
		ctx = append(ctx, "› evidence")
	case viewHelp:
		ctx = append(ctx, "› help")
	}
	if u.view == viewGroups || u.view == viewHazards {
		if u.view == viewGroups {
			ctx = append(ctx, "sort:"+u.groups.sortName())
		} else {
			ctx = append(ctx, "sort:"+u.hazards.sortName(), "sev:"+u.hazards.severityName())
		}
	}
	if f := u.filterOf(u.view); f != "" && !u.filtering {
		ctx = append(ctx, "filter:"+tview.Escape(f))
	}
	left := b.String() + strings.Join(ctx, " ")
	right := "?:help q:quit"
	gap := width - tview.TaggedStringWidth(left) - uniseg.StringWidth(right)
	if gap < 1 {
		return left
	}
	return left + strings.Repeat(" ", gap) + right
}

// statusText is the bottom line: the source and every loss counter, so
// that loss is always visible, the packet count and the event rate, and the
// replay state at the capture clock. When the line is too narrow the
// source name is cut, then the event rate and the packet count left out;
// loss and state never are.
func (u *UI) statusText(width int) string {
	var pkts, loss, evs string
	fr := u.frame
	if fr == nil {
		loss = "waiting for traffic"
	} else {
		cs, ds := &fr.Capture, &fr.Decode
		drops := cs.PacketsOverCap
		if cs.Live != nil {
			drops += cs.Live.KernelDrops
		}
		loss = fmt.Sprintf("drop %s gap %s resync %s", count(drops), count(cs.Gaps), count(ds.Resyncs))
		if drops+cs.Gaps+uint64(ds.Resyncs) > 0 {
			loss = "[red]" + loss + " LOSS[-]"
		}
		cur, base, secs := u.rates.span()
		pkts = fmt.Sprintf("%spkt %s", count(cs.Packets), bytesText(cs.Bytes))
		evs = fmt.Sprintf("%s ev/s", rate(perSec(cur.events, base.events, secs)))
	}
	var state string
	switch {
	case u.ctl != nil:
		state = u.ctl.State().String()
		if fr != nil && fr.Done {
			state = "replay done"
		}
	case u.frozen:
		state = "FROZEN (p)"
	default:
		state = "live"
	}
	if fr != nil {
		if t := frameTime(fr); !t.IsZero() {
			state += " " + t.UTC().Format("15:04:05")
		}
	}
	right := "[::b]" + tview.Escape(state) + "[::-]"
	src := orDash(u.opts.Source)
	for _, parts := range [][]string{{pkts, loss, evs}, {loss, evs}, {loss}} {
		var keep []string
		for _, p := range parts {
			if p != "" {
				keep = append(keep, p)
			}
		}
		mid := strings.Join(keep, " │ ")
		room := width - tview.TaggedStringWidth(mid) - tview.TaggedStringWidth(right) - 4
		if room < 6 {
			continue
		}
		line := tview.Escape(shortSource(src, room)) + " │ " + mid
		gap := width - tview.TaggedStringWidth(line) - tview.TaggedStringWidth(right)
		return line + strings.Repeat(" ", max(gap, 1)) + right
	}
	return loss + " " + right
}

// shortSource fits a source name in width: whole, without a capture file
// extension, or cut.
func shortSource(src string, width int) string {
	if uniseg.StringWidth(src) <= width {
		return src
	}
	for _, ext := range []string{".pcapng", ".pcap"} {
		src = strings.ReplaceAll(src, ext, "")
	}
	return cut(src, width, false)
}
