package tui

import (
	"fmt"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// view names a screen.
type view uint8

const (
	viewGroups view = iota
	viewDetail
	viewHazards
	viewEvidence
	viewTraffic
	viewTxns      // transactional ids and partitions (txns.go)
	viewMember    // one member of the group shown (member.go)
	viewPartition // one partition of the group shown (partition.go)
	viewHelp
	numViews
)

var viewNames = [numViews]string{"Groups", "Group", "Hazards", "Evidence", "Traffic", "Transactions", "Member", "Partition", "Help"}

// String is the view's name, as the tab bar and the help write it.
func (v view) String() string { return viewNames[v] }

// scope is a set of views a key works in.
type scope uint16

func in(vs ...view) scope {
	var s scope
	for _, v := range vs {
		s |= 1 << v
	}
	return s
}

const everywhere scope = 1<<numViews - 1

func (s scope) has(v view) bool { return s&(1<<v) != 0 }

// key is one key: a special key, or a rune (Key == tcell.KeyRune).
type key struct {
	Key  tcell.Key
	Rune rune
}

func special(k tcell.Key) key { return key{Key: k} }
func char(r rune) key         { return key{Key: tcell.KeyRune, Rune: r} }

// binding is one row of the key table: the keys, what the help says, the
// views where it works and what it does. A nil action means the focused
// widget handles the key itself (tview's tables and text views move,
// page and scroll); it is listed for the help.
type binding struct {
	keys   []key
	label  string // how the help writes the keys
	help   string
	where  scope
	action func(u *UI)
}

// bindings is the key table: the only place keys are defined, and the
// source of the help screen. Earlier rows win when two match.
var bindings = []binding{
	{keys: []key{special(tcell.KeyUp), special(tcell.KeyDown), char('k'), char('j')}, label: "↑ ↓ k j", where: in(viewDetail),
		help: "move between the group's members and partitions (enter opens one); past the first or the last, scroll", action: (*UI).moveDetail},
	{keys: []key{special(tcell.KeyUp), special(tcell.KeyDown), char('k'), char('j')}, label: "↑ ↓ k j",
		help: "move the selection, scroll", where: everywhere &^ in(viewDetail)},
	{keys: []key{special(tcell.KeyPgUp), special(tcell.KeyPgDn), char('g'), char('G')}, label: "PgUp PgDn g G",
		help: "page up and down, first and last row", where: everywhere},
	{keys: []key{special(tcell.KeyEnter)}, label: "enter", where: in(viewGroups, viewHazards, viewDetail),
		help: "open: the selected group's detail, the selected hazard's evidence, or in a group the selected member's or partition's detail", action: (*UI).open},
	{keys: []key{special(tcell.KeyEscape)}, label: "esc", where: everywhere,
		help: "back: close the group, the member, the partition, the evidence or the help; clear the filter", action: (*UI).back},
	{keys: []key{char('/')}, label: "/", where: in(viewGroups, viewHazards, viewTraffic, viewTxns),
		help: "filter the list: type, enter keeps the filter, esc clears it", action: (*UI).startFilter},
	{keys: []key{char('s')}, label: "s", where: in(viewGroups, viewHazards),
		help: "sort by the next column (Groups: name, lag, hazards, members, last rebalance, state; Hazards: newest, severity)", action: (*UI).nextSort},
	{keys: []key{char('v')}, label: "v", where: in(viewHazards),
		help: "severity filter: all, warn and critical (warn+), critical only; the tab bar shows it (sev:)", action: (*UI).nextSeverity},
	{keys: []key{char('p')}, label: "p", where: everywhere,
		help: "pause or resume the replay (live capture: freeze the screen, the capture goes on)", action: (*UI).togglePause},
	{keys: []key{char('n')}, label: "n", where: everywhere,
		help: "replay: when paused, replay the next step of capture time, then pause again", action: (*UI).step},
	{keys: []key{char('f')}, label: "f", where: everywhere,
		help: "replay: switch between capture pace and as fast as possible", action: (*UI).togglePace},
	{keys: []key{special(tcell.KeyTab), special(tcell.KeyBacktab)}, label: "tab shift-tab", where: everywhere,
		help: "next or previous view: Groups, Hazards, Traffic, Transactions (once the capture has transactions)", action: (*UI).cycleView},
	{keys: []key{char('1'), char('2'), char('3'), char('4')}, label: "1 2 3 4", where: everywhere,
		help: "go to Groups, Hazards, Traffic, Transactions", action: (*UI).jumpView},
	{keys: []key{char('?')}, label: "?", where: everywhere,
		help: "this help", action: (*UI).toggleHelp},
	{keys: []key{char('q'), special(tcell.KeyCtrlC)}, label: "q ctrl-c", where: everywhere,
		help: "quit", action: (*UI).quitKey},
}

// lookup returns the binding of the key event in view v, nil if none.
func lookup(ev *tcell.EventKey, v view) *binding {
	k := key{Key: ev.Key()}
	if k.Key == tcell.KeyRune {
		k.Rune = ev.Rune()
	}
	for i := range bindings {
		b := &bindings[i]
		if !b.where.has(v) {
			continue
		}
		for _, bk := range b.keys {
			if bk == k {
				return b
			}
		}
	}
	return nil
}

// helpText is the help screen, written from the key table: each key, then
// what it does and where, wrapped to width.
func helpText(width int) string {
	var b strings.Builder
	b.WriteString("[::b]kwire keys[::-]  (esc or ? closes)\n\n")
	kw := 0
	for _, k := range bindings {
		kw = max(kw, len([]rune(k.label)))
	}
	for _, k := range bindings {
		text := k.help
		if k.where != everywhere {
			text += " (" + whereText(k.where) + ")"
		}
		for i, l := range tview.WordWrap(tview.Escape(text), max(width-kw-2, 20)) {
			label := ""
			if i == 0 {
				label = k.label
			}
			fmt.Fprintf(&b, "[::b]%s[::-]  %s\n", pad(label, kw, false), l)
		}
	}
	b.WriteString("\n")
	for _, l := range tview.WordWrap("Severity is always written out (CRIT, WARN, INFO), not only coloured. "+
		"The Groups view's HAZARDS column counts them: C critical, W warn, I info; LIVE/ALL counts live and remembered members. "+
		"Heartbeat bars fill up to the member's session timeout, ending in ! past it. "+
		"Rates are per second of capture time over the last 10s of it. "+
		"Hazards opens on its top row, the newest (sorted by severity: the newest of the worst), and follows new ones while the top row is selected. "+
		"Traffic's P50, P90 and P99 are the broker's answer times. A Fetch (or ShareFetch) is a long poll: the broker holds it "+
		"until records come or its MaxWaitMillis runs out, so its time is mostly waiting for producers, not the broker's speed. "+
		"Its P50-P99 leave that wait out (from when its newest record was made, by the batch timestamps, to the answer; "+
		"an empty answer has none); WAIT is the median wait, over the longest a Fetch asked for (500ms/500ms: nothing to read). "+
		"JoinGroup and SyncGroup are held until the rebalance completes. "+
		"A replay (kwire analyze --tui) can be paused (p), stepped (n) and switched between capture pace and full speed (f); "+
		"on a live capture p freezes the screen while the capture goes on.", width) {
		b.WriteString(l + "\n")
	}
	return b.String()
}

func whereText(s scope) string {
	var names, others []string
	for v := range numViews {
		if s.has(v) {
			names = append(names, v.String())
		} else {
			others = append(others, v.String())
		}
	}
	if len(others) < len(names) {
		return "in all views but " + strings.Join(others, ", ")
	}
	return "in " + strings.Join(names, ", ")
}
