package tui

import (
	"sync"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// Options describe what the UI shows. A nil *Options means defaults.
type Options struct {
	// Source names the input in the status bar: a file name, an interface.
	Source string
	// Refresh is how often the UI looks at the clock when no frame comes,
	// for the status bar (default 1s).
	Refresh time.Duration
	// Screen is where the UI draws; nil means the terminal. Tests and
	// benchmarks pass a tcell.SimulationScreen.
	Screen tcell.Screen
	// FullIDs shows member ids whole; otherwise they are shortened as in
	// all of kwire's text (correlate.ShortID). A hazard's own view (enter)
	// always has them whole.
	FullIDs bool
}

// UI is the terminal UI. Build it with New and Run it on one goroutine;
// Stop may be called from any. Everything else runs on the goroutine of
// the application's event loop (or a test driving the UI without one).
type UI struct {
	app  *tview.Application
	feed *Feed
	ctl  Control
	opts Options

	root   *tview.Flex
	tabs   *textPane
	pages  *tview.Pages
	filter *tview.InputField
	status *textPane

	groups   *groupsView
	detail   *detailView
	hazards  *hazardsView
	evidence *evidenceView
	traffic  *trafficView
	txns     *txnsView
	member   *memberView
	part     *partitionView
	help     *textPane

	view    view // the page shown
	top     view // the last top-level view (Groups, Hazards, Traffic)
	beneath view // what the help covers
	frame   *Frame
	rates   rateWindow
	frozen  bool // live capture paused: frames are dropped
	// filtering is set while the filter input has the focus.
	filtering bool
	// lastKey is the key whose action runs.
	lastKey *tcell.EventKey

	mu      sync.Mutex
	stopped bool
	quit    chan struct{} // closed by Stop
}

// New returns a UI drawing the frames of feed; ctl is the replay's
// control, nil for a live capture. opts may be nil.
func New(feed *Feed, ctl Control, opts *Options) *UI {
	u := &UI{app: tview.NewApplication(), feed: feed, ctl: ctl, quit: make(chan struct{})}
	if opts != nil {
		u.opts = *opts
	}
	if u.opts.Refresh <= 0 {
		u.opts.Refresh = time.Second
	}
	u.tabs = newTextPane(u.tabsText)
	u.status = newTextPane(u.statusText)
	u.filter = tview.NewInputField().SetLabel("/").SetFieldBackgroundColor(tcell.ColorDefault)
	u.filter.SetChangedFunc(func(text string) { u.setFilter(text) })
	u.filter.SetDoneFunc(u.filterDone)

	u.groups = newGroupsView()
	u.detail = newDetailView()
	u.hazards = newHazardsView()
	u.evidence = newEvidenceView()
	u.traffic = newTrafficView()
	u.traffic.dropped = feed.Dropped
	u.txns = newTxnsView()
	u.member = newMemberView()
	u.part = newPartitionView()
	ids := idForm(u.opts.FullIDs)
	u.detail.ids, u.hazards.ids, u.member.ids, u.part.ids = ids, ids, ids, ids
	u.help = newTextPane(func(width int) string { return helpText(width) })

	u.pages = tview.NewPages()
	u.pages.AddPage(viewGroups.String(), u.groups.table, true, true)
	u.pages.AddPage(viewDetail.String(), u.detail.pane, true, false)
	u.pages.AddPage(viewHazards.String(), u.hazards.pane, true, false)
	u.pages.AddPage(viewEvidence.String(), u.evidence.pane, true, false)
	u.pages.AddPage(viewTraffic.String(), u.traffic.pane, true, false)
	u.pages.AddPage(viewTxns.String(), u.txns.pane, true, false)
	u.pages.AddPage(viewMember.String(), u.member.pane, true, false)
	u.pages.AddPage(viewPartition.String(), u.part.pane, true, false)
	u.pages.AddPage(viewHelp.String(), u.help, true, false)

	u.root = tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(u.tabs, 1, 0, false).
		AddItem(u.pages, 0, 1, true).
		AddItem(u.filter, 0, 0, false).
		AddItem(u.status, 1, 0, false)
	u.app.SetRoot(u.root, true).SetInputCapture(u.capture)
	if u.opts.Screen != nil {
		u.app.SetScreen(u.opts.Screen)
	}
	u.show(viewGroups)
	return u
}

// Run draws on the terminal until the user quits (q, ctrl-c) or Stop is
// called, and gives the terminal back before it returns. It takes the
// feed's frames as they come.
func (u *UI) Run() error {
	u.mu.Lock()
	stopped := u.stopped
	u.mu.Unlock()
	if stopped {
		return nil
	}
	ended := make(chan struct{})
	defer close(ended)
	go u.refresh(ended)
	return u.app.Run()
}

// Stop makes Run return (at once if it has not started); it does not
// wait. It is safe from any goroutine.
func (u *UI) Stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.stopped {
		u.stopped = true
		close(u.quit)
	}
}

// refresh is the only goroutine that talks to the application's event
// loop (tview's QueueUpdate waits for the loop, so it must not be called
// once the loop has ended): it has a frame drawn when one comes, the
// status bar redrawn every Refresh, and stops the loop when Stop asks.
func (u *UI) refresh(ended <-chan struct{}) {
	t := time.NewTicker(u.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ended:
			return
		case <-u.quit:
			u.app.QueueUpdate(u.app.Stop)
			return
		case <-u.feed.Ready():
		case <-t.C:
		}
		select {
		case <-ended:
			return
		default:
			u.app.QueueUpdateDraw(u.takeFrame)
		}
	}
}

// takeFrame applies the latest frame, unless the screen is frozen (a
// frozen screen drops frames).
func (u *UI) takeFrame() {
	fr := u.feed.Take()
	if fr != nil && !u.frozen {
		u.apply(fr)
		return
	}
	u.drawChrome()
}

// apply makes fr the frame on screen.
func (u *UI) apply(fr *Frame) {
	u.frame = fr
	u.rates.add(fr)
	u.groups.update(fr)
	u.detail.update(fr)
	u.hazards.update(fr)
	u.evidence.update(fr)
	u.traffic.update(fr, &u.rates)
	u.txns.update(fr)
	u.member.update(fr)
	u.part.update(fr)
	u.drawChrome()
}

// capture is the application's input capture: the key table.
func (u *UI) capture(ev *tcell.EventKey) *tcell.EventKey {
	if ev.Key() == tcell.KeyCtrlC {
		u.Stop() // even while filtering: tview would stop the loop itself
		return nil
	}
	if u.filtering {
		return ev // the input field's own keys; its done func ends it
	}
	b := lookup(ev, u.view)
	if b == nil || b.action == nil {
		return ev
	}
	u.lastKey = ev
	b.action(u)
	return nil
}

// show switches to view v. Hazards, opened from another view, selects
// its top row: the newest (the newest of the worst, sorted by severity),
// not the one selected when it was last left.
func (u *UI) show(v view) {
	if v == viewHazards && u.top != viewHazards {
		u.hazards.selectTop()
	}
	if v != viewHelp {
		u.beneath = v
	}
	if v == viewGroups || v == viewHazards || v == viewTraffic || v == viewTxns {
		u.top = v
	}
	u.view = v
	u.pages.SwitchToPage(v.String())
	u.app.SetFocus(u.focusOf(v))
	u.drawChrome()
}

func (u *UI) focusOf(v view) tview.Primitive {
	switch v {
	case viewDetail:
		return u.detail.pane
	case viewHazards:
		return u.hazards.table
	case viewEvidence:
		return u.evidence.pane
	case viewTraffic:
		return u.traffic.pane
	case viewTxns:
		return u.txns.table
	case viewMember:
		return u.member.pane
	case viewPartition:
		return u.part.pane
	case viewHelp:
		return u.help
	}
	return u.groups.table
}

// Key actions (the key table's).

func (u *UI) open() {
	switch u.view {
	case viewGroups:
		if g := u.groups.selected(); g != "" {
			u.detail.set(g, u.frame)
			u.show(viewDetail)
		}
	case viewHazards:
		if h := u.hazards.selected(); h != nil {
			u.evidence.set(h)
			u.show(viewEvidence)
		}
	case viewDetail:
		switch p := u.detail.sel; {
		case p.member != "":
			u.member.set(u.detail.group, p.member, u.frame)
			u.show(viewMember)
		case p.topic != "":
			u.part.set(u.detail.group, p.topic, p.partition, u.frame)
			u.show(viewPartition)
		}
	}
}

func (u *UI) back() {
	switch u.view {
	case viewHelp:
		u.show(u.beneath)
	case viewDetail:
		u.show(viewGroups)
	case viewMember, viewPartition:
		u.show(viewDetail)
	case viewEvidence:
		u.show(viewHazards)
	default:
		if u.filterOf(u.view) != "" {
			u.setFilter("")
			u.filter.SetText("")
		}
	}
}

func (u *UI) toggleHelp() {
	if u.view == viewHelp {
		u.show(u.beneath)
		return
	}
	u.show(viewHelp)
}

func (u *UI) cycleView() {
	order := u.topViews()
	i := 0
	for j, v := range order {
		if v == u.top {
			i = j
		}
	}
	ev := u.lastKey
	step := 1
	if ev != nil && ev.Key() == tcell.KeyBacktab {
		step = len(order) - 1
	}
	u.show(order[(i+step)%len(order)])
}

func (u *UI) jumpView() {
	if u.lastKey == nil {
		return
	}
	switch u.lastKey.Rune() {
	case '1':
		u.show(viewGroups)
	case '2':
		u.show(viewHazards)
	case '3':
		u.show(viewTraffic)
	case '4':
		if hasTxns(u.frame) {
			u.show(viewTxns)
		}
	}
}

func (u *UI) nextSort() {
	switch u.view {
	case viewGroups:
		u.groups.nextSort()
	case viewHazards:
		u.hazards.nextSort()
	}
	u.drawChrome()
}

func (u *UI) nextSeverity() {
	u.hazards.nextSeverity()
	u.drawChrome()
}

// moveDetail moves the group detail's selection up or down (the key
// pressed).
func (u *UI) moveDetail() {
	if u.lastKey == nil {
		return
	}
	step := 1
	if k := u.lastKey; k.Key() == tcell.KeyUp || k.Key() == tcell.KeyRune && k.Rune() == 'k' {
		step = -1
	}
	u.detail.move(step)
}

func (u *UI) togglePause() {
	if u.ctl != nil {
		u.ctl.TogglePause()
	} else {
		u.frozen = !u.frozen
	}
	u.drawChrome()
}

func (u *UI) step() {
	if u.ctl != nil {
		u.ctl.Step()
	}
	u.drawChrome()
}

func (u *UI) togglePace() {
	if u.ctl != nil {
		u.ctl.TogglePace()
	}
	u.drawChrome()
}

func (u *UI) quitKey() { u.Stop() }

// Filter.

func (u *UI) startFilter() {
	u.filtering = true
	u.filter.SetText(u.filterOf(u.view))
	u.root.ResizeItem(u.filter, 1, 0)
	u.app.SetFocus(u.filter)
}

func (u *UI) filterDone(k tcell.Key) {
	if k == tcell.KeyEscape {
		u.filter.SetText("")
		u.setFilter("")
	}
	u.filtering = false
	u.root.ResizeItem(u.filter, 0, 0)
	u.app.SetFocus(u.focusOf(u.view))
	u.drawChrome()
}

func (u *UI) filterOf(v view) string {
	switch v {
	case viewGroups:
		return u.groups.filter
	case viewHazards:
		return u.hazards.filter
	case viewTraffic:
		return u.traffic.filter
	case viewTxns:
		return u.txns.filter
	}
	return ""
}

func (u *UI) setFilter(s string) {
	switch u.view {
	case viewGroups:
		u.groups.setFilter(s)
	case viewHazards:
		u.hazards.setFilter(s)
	case viewTraffic:
		u.traffic.setFilter(s)
	case viewTxns:
		u.txns.setFilter(s)
	}
	u.drawChrome()
}
