package tui

import (
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"
)

// TestKeyTable: no key means two things in one view, and the help screen
// lists every binding the table has.
func TestKeyTable(t *testing.T) {
	for v := range numViews {
		seen := map[key]string{}
		for _, b := range bindings {
			if !b.where.has(v) {
				continue
			}
			for _, k := range b.keys {
				if other, ok := seen[k]; ok {
					t.Errorf("view %s: key %v is both %q and %q", v, k, other, b.label)
				}
				seen[k] = b.label
			}
		}
	}
	help := helpText(120)
	for _, b := range bindings {
		if !strings.Contains(help, b.label) {
			t.Errorf("help does not list %q", b.label)
		}
	}
}

// TestRequiredKeys: the keys the issue asks for are bound where they
// apply.
func TestRequiredKeys(t *testing.T) {
	tests := []struct {
		name string
		ev   *tcell.EventKey
		v    view
	}{
		{"up", tcell.NewEventKey(tcell.KeyUp, 0, 0), viewGroups},
		{"j", tcell.NewEventKey(tcell.KeyRune, 'j', 0), viewHazards},
		{"k", tcell.NewEventKey(tcell.KeyRune, 'k', 0), viewDetail},
		{"enter", tcell.NewEventKey(tcell.KeyEnter, 0, 0), viewGroups},
		{"enter on hazards", tcell.NewEventKey(tcell.KeyEnter, 0, 0), viewHazards},
		{"esc", tcell.NewEventKey(tcell.KeyEscape, 0, 0), viewEvidence},
		{"/", tcell.NewEventKey(tcell.KeyRune, '/', 0), viewGroups},
		{"s", tcell.NewEventKey(tcell.KeyRune, 's', 0), viewGroups},
		{"p", tcell.NewEventKey(tcell.KeyRune, 'p', 0), viewTraffic},
		{"tab", tcell.NewEventKey(tcell.KeyTab, 0, 0), viewDetail},
		{"q", tcell.NewEventKey(tcell.KeyRune, 'q', 0), viewHelp},
		{"?", tcell.NewEventKey(tcell.KeyRune, '?', 0), viewGroups},
	}
	for _, tc := range tests {
		if lookup(tc.ev, tc.v) == nil {
			t.Errorf("%s: not bound in %s", tc.name, tc.v)
		}
	}
}

// TestPauseFreezesLive: without a replay, p freezes the screen: frames
// are dropped until p again.
func TestPauseFreezesLive(t *testing.T) {
	s := newScreen(t, nil, 80, 24)
	s.u.feed.Publish(nowForTest, func(fr *Frame) { fr.Events = 1 })
	s.u.takeFrame()
	s.press(tcell.KeyRune, 'p')
	if !strings.Contains(s.text(), "FROZEN") {
		t.Fatalf("status does not say FROZEN:\n%s", s.text())
	}
	s.u.feed.Publish(nowForTest, func(fr *Frame) { fr.Events = 2 })
	s.u.takeFrame()
	if s.u.frame.Events != 1 {
		t.Errorf("frozen screen took frame with %d events", s.u.frame.Events)
	}
	s.press(tcell.KeyRune, 'p')
	s.u.feed.Publish(nowForTest, func(fr *Frame) { fr.Events = 3 })
	s.u.takeFrame()
	if s.u.frame.Events != 3 {
		t.Errorf("after p again the screen shows frame with %d events, want 3", s.u.frame.Events)
	}
}
