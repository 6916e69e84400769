package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// Frames from committed real-client captures (kgo against kfake), made by
// running the real pipeline.
var (
	// churnMid is g_churn 4.8s in: generation 8, three live members.
	churnMid = func(t *testing.T) *Frame {
		full := frameOf(t, "g_churn.pcapng", time.Time{})
		return frameOf(t, "g_churn.pcapng", full.Traffic.First.Add(4800*time.Millisecond))
	}
	// commitGap is h_commit_gap to its end: a critical commit_gap.
	commitGap = func(t *testing.T) *Frame { return frameOf(t, "h_commit_gap.pcapng", time.Time{}) }
	// offsetReset is h_offset_reset to its end: two groups.
	offsetReset = func(t *testing.T) *Frame { return frameOf(t, "h_offset_reset.pcapng", time.Time{}) }
)

// keys are key presses: special keys by name, runes as themselves.
type press struct {
	key tcell.Key
	r   rune
}

func keys(s ...any) []press {
	var out []press
	for _, k := range s {
		switch k := k.(type) {
		case tcell.Key:
			out = append(out, press{key: k})
		case string:
			for _, r := range k {
				out = append(out, press{key: tcell.KeyRune, r: r})
			}
		}
	}
	return out
}

// TestViews draws each view on a simulation screen from a real capture's
// frame, after some keys, and checks what is on screen: each want is a
// regexp that some line must match, each reject one that no line may;
// selected, if set, must match the lines drawn in reverse video (the
// selection), one each.
func TestViews(t *testing.T) {
	tests := []struct {
		name     string
		frame    func(*testing.T) *Frame
		w, h     int
		keys     []press
		want     []string
		reject   []string
		selected []string
		opts     Options
	}{{
		name: "groups", frame: churnMid, w: 80, h: 24,
		want: []string{
			`^kwire \[1 Groups\]  2 Hazards \(\d+\)   3 Traffic  sort:name +\?:help q:quit$`,
			`^GROUP +STATE +GEN +LIVE/ALL +LAG +LAG\(S\) +HAZARDS +LAST REBALANCE`,
			`^gc-group +stable +8 +3/4 +5 +0\.0 +I10 +11:38:33 member_left`, // gc-orders/2: committed 149, end 154, made 27 ms before
			`^test\.pcapng │ 4017pkt 578kB │ drop 0 gap 0 resync 0 │ [\d.]+ ev/s +live 11:38:33$`,
		},
	}, {
		name: "group detail: members, assignments, heartbeats", frame: churnMid, w: 80, h: 24,
		keys: keys(tcell.KeyEnter),
		want: []string{
			`› gc-group`,
			`^gc-group  classic consumer/cooperative-sticky  state STABLE  generation 8$`,
			`^MEMBERS 3 live of 4$`,
			`^gc-membe…\w+ gc-member-1 127\.0\.0\.1 live +8 \[[#-]{6}\] [\d.]+ms/6\.0s gc-orders\[0,2\]$`,
			`^gc-membe…\w+ gc-member-2 127\.0\.0\.1 live +8 \[[#-]{6}\] [\d.]+ms/6\.0s gc-orders\[3,4\]$`,
			`^gc-membe…\w+ gc-member-3 127\.0\.0\.1 left +7 - +gc-orders\[2,5\]$`,
			`^gc-membe…\w+ gc-member-4 127\.0\.0\.1 live +8 \[[#-]{6}\] [\d.]+ms/6\.0s gc-orders\[1,5\]$`,
			`^GENERATIONS 8, newest first$`,
			`^ +8 11:38:33\.173 +0 +3 -gc-member-3 +member_left`,
			`^ +6 11:38:31\.769 +100ms +4 \+gc-member-4 +member_joined`,
		},
	}, {
		name: "group detail scrolled to the end: commits", frame: churnMid, w: 80, h: 24,
		keys: keys(tcell.KeyEnter, "G"),
		want: []string{
			`^TIME +PARTITION +OFFSET +MEMBER +GEN +RESULT$`,
			`^11:38:33\.\d+ gc-orders/\d +\d+ gc-member-\S+ +8 ok$`,
		},
	}, {
		name: "large terminal shows ids shortened as kwire's text does", frame: churnMid, w: 200, h: 60,
		keys: keys(tcell.KeyEnter),
		want: []string{
			`^gc-member-1-1fa6e38b +gc-member-1 +127\.0\.0\.1 +live`,
			`^TOPIC +PART +OWNER +POSITION +COMMITTED +END +LAG +LAG\(S\) +FETCH ERROR$`,
			`^gc-orders +3 gc-member-2-160f59b1 +152 +152 +152 +0 +0\.0 -$`,
			`^RECENT COMMITS newest first$`,
		},
		reject: []string{`gc-member-\d-[0-9a-f]{9}`},
	}, {
		name: "--full-ids: whole ids", frame: churnMid, w: 200, h: 60, opts: Options{FullIDs: true},
		keys: keys(tcell.KeyEnter),
		want: []string{
			`^gc-member-1-1fa6e38bf95327b2e2e5a43e82197b4a +gc-member-1 +127\.0\.0\.1 +live`,
			`^gc-orders +3 gc-member-2-160f59b1e59815ccec09d457a5d55a7f +152 +152 +152 +0 +0\.0 -$`,
		},
	}, {
		name: "hazard summaries shorten ids too", frame: commitGap, w: 200, h: 24,
		keys:   keys("2"),
		want:   []string{`member hcg-worker-[0-9a-f]{8} `},
		reject: []string{`hcg-worker-[0-9a-f]{9}`},
	}, {
		name: "hazards, severity in words", frame: commitGap, w: 80, h: 24,
		keys: keys("2"),
		want: []string{
			`^kwire  1 Groups  \[2 Hazards \(3\)\]  3 Traffic  sort:newest`,
			`^TIME +SEVERITY +KIND +GROUP +SUMMARY$`,
			`^11:39:12\.098 WARN +member_expired +hcg-group `,
			`^11:39:06\.098 CRIT +commit_gap +hcg-group `,
			`^11:39:06\.096 INFO +commit_on_receive hcg-group `,
		},
	}, {
		name: "hazard evidence", frame: commitGap, w: 80, h: 24,
		keys: keys("2", "s", "g", tcell.KeyEnter),
		want: []string{
			`› evidence`,
			`^CRIT commit_gap at 11:39:06\.098$`,
			`^hcg-group hcg-orders/0: member hcg-worker-`,
			`^TIME +CONN +CLIENT > BROKER +API +CORR ID$`,
			`^11:39:06\.\d{6} +c\d+ 127\.0\.0\.1:\d+ > 127\.0\.0\.1:\d+ OffsetCommit +\d+$`,
		},
	}, {
		name: "filter groups", frame: offsetReset, w: 80, h: 24,
		keys:   keys("/", "fresh", tcell.KeyEnter),
		want:   []string{`^hor-fresh +empty`, `filter:fresh`},
		reject: []string{`^hor-lagging`, `^/`},
	}, {
		name: "filter typed, then cleared with esc", frame: offsetReset, w: 80, h: 24,
		keys: keys("/", "fresh", tcell.KeyEscape),
		want: []string{`^hor-fresh +empty`, `^hor-lagging +empty`},
	}, {
		name: "filter without a match", frame: offsetReset, w: 80, h: 24,
		keys: keys("/", "nothing", tcell.KeyEnter),
		want: []string{`no group matches the filter`},
	}, {
		name: "sort by hazards", frame: offsetReset, w: 80, h: 24,
		keys: keys("s", "s"),
		want: []string{`sort:hazards`, `^hor-lagging .* C1 I1 `},
	}, {
		name: "hazards filtered to one group", frame: offsetReset, w: 80, h: 24,
		keys:   keys("2", "/", "hor-fresh", tcell.KeyEnter),
		want:   []string{`^11:40:30\.177 INFO +offset_reset +hor-fresh`},
		reject: []string{`hor-lagging `},
	}, {
		name: "traffic", frame: churnMid, w: 80, h: 24,
		keys: keys(tcell.KeyTab, tcell.KeyTab),
		want: []string{
			`\[3 Traffic\]`,
			`^API +REQ/S +ERR/S +P50 +P90 +P99 +WAIT +REQUESTS +ERRORS +NO RESP$`,
			`^Fetch +[\d.]+ +0 +(\d+µs|\d\.\dms) .* (9\d|1[0-4]\d)ms/500ms +\d+ +0 +\d+$`, // the long poll apart: ~100ms waiting for the producer
			`^OffsetCommit +[\d.]+ +0 +\S+ +\S+ +\S+ +- +181 +0 +0$`,
			`^Heartbeat +[\d.]+ +[\d.]+ +\S+ +\S+ +\S+ +- +41 +14 +0$`,
		},
	}, {
		name: "help from the key table", frame: churnMid, w: 80, h: 24,
		keys: keys("?"),
		want: []string{`^kwire keys`, `^enter +open`, `^/ +filter`},
	}, {
		name: "help scrolled to its end", frame: churnMid, w: 80, h: 24,
		keys: keys("?", "G"),
		want: []string{`^q ctrl-c +quit$`, `long poll`, `WAIT is the median wait`},
	}, {
		name: "processes from an eBPF source", w: 100, h: 24, keys: keys(tcell.KeyEnter),
		frame: func(t *testing.T) *Frame {
			fr := churnMid(t)
			for i := range fr.Traffic.Clients {
				if cl := &fr.Traffic.Clients[i]; cl.ClientID == "gc-member-1" {
					cl.PID, cl.Comm = 4242, "java"
				}
			}
			return fr
		},
		want: []string{`^MEMBER +CLIENT +HOST +PID/COMM +STATUS`, `gc-member-1 127\.0\.0\.1 4242/java live `, `gc-member-2 127\.0\.0\.1 -  +live `},
	}, {
		name: "groups: the name column as wide as the longest name, not the screen", frame: churnMid, w: 200, h: 24,
		want: []string{`^GROUP    STATE +GEN `, `^gc-group stable +8 `},
	}, {
		name: "hazards: summaries without the group, whole under the list", frame: commitGap, w: 100, h: 24,
		keys: keys("2", "j"),
		want: []string{
			`^TIME +SEVERITY KIND +GROUP +SUMMARY$`,
			`^11:39:06\.098 CRIT +commit_gap +hcg-group hcg-orders/0: member hcg-worker-45d2ce6c \(generat…$`,
			`^11:39:12\.098 WARN +member_expired +hcg-group member hcg-worker-45d2ce6c \(client hcg-worker`,
			`^─{100}$`,
			`^CRIT commit_gap: hcg-group hcg-orders/0: member hcg-worker-45d2ce6c \(generation 1\) committed one`,
			`never processes it$`, // the summary's end, cut in the list
		},
		reject:   []string{`hcg-group hcg-group`, `^\d\d:.*never processes it$`},
		selected: []string{`^11:39:06\.098 CRIT +commit_gap `},
	}, {
		name: "hazards: severity filter warn+", frame: commitGap, w: 80, h: 24,
		keys:   keys("2", "v"),
		want:   []string{`sort:newest sev:warn\+`, `^11:39:12\.098 WARN +member_expired`, `^11:39:06\.098 CRIT +commit_gap`},
		reject: []string{`INFO`},
	}, {
		name: "hazards: severity filter critical", frame: commitGap, w: 80, h: 24,
		keys:   keys("2", "v", "v"),
		want:   []string{`sev:critical`, `^11:39:06\.098 CRIT +commit_gap`},
		reject: []string{`WARN`, `INFO`},
	}, {
		name: "hazards: severity filter back to all", frame: commitGap, w: 80, h: 24,
		keys: keys("2", "v", "v", "v"),
		want: []string{`sev:all`, `^11:39:12\.098 WARN`, `^11:39:06\.098 CRIT`, `^11:39:06\.096 INFO`},
	}, {
		name: "hazards: severity filter and a text filter matching none", frame: commitGap, w: 80, h: 24,
		keys: keys("2", "v", "v", "/", "expired", tcell.KeyEnter),
		want: []string{`^no critical hazard matches the filter`},
	}, {
		name: "hazards: enter opens the selected one, the newest", frame: commitGap, w: 80, h: 24,
		keys: keys("2", tcell.KeyEnter),
		want: []string{`^WARN member_expired at 11:39:12\.098$`},
	}, {
		name: "group detail: the first member selected", frame: churnMid, w: 100, h: 40,
		keys:     keys(tcell.KeyEnter),
		selected: []string{`^gc-member-1-1fa6e38b gc-member-1 `},
	}, {
		name: "group detail: down past the members to the partitions", frame: churnMid, w: 100, h: 60,
		keys:     keys(tcell.KeyEnter, "jjjjj"),
		selected: []string{`^gc-orders +1 gc-member-4-5604c97c `},
	}, {
		name: "group detail: the selection kept on screen", frame: churnMid, w: 100, h: 24,
		keys:     keys(tcell.KeyEnter, "jjjjjjjjj"),
		selected: []string{`^gc-orders +5 gc-member-\S+ `},
	}, {
		name: "member detail: generations, assignment history, heartbeats, fetched, commits", frame: churnMid, w: 120, h: 60,
		keys: keys(tcell.KeyEnter, "j", tcell.KeyEnter),
		want: []string{
			`› gc-group › member gc-member-2-160f59b1 `,
			`^gc-member-2-160f59b1  of gc-group  client gc-member-2 on 127\.0\.0\.1  status LIVE  generation 8$`,
			`^member id +gc-member-2-160f59b1e59815ccec09d457a5d55a7f$`, // whole, to copy
			`^last request +\[[#-]{6}\] [\d.]+ms/6\.0s$`,
			`^heartbeats +\d+, longest gap [\d.]+m?s of a 6\.0s session timeout; \d+ answered REBALANCE_IN_PROGRESS$`,
			`^assigned now +gc-orders\[3,4\]$`,
			`^GENERATIONS AND ASSIGNMENTS in 7 of 8, newest first$`,
			`^ +4 11:38:30\.366 gc-orders\[3,4\] +-gc-orders\[5\] +member_joined`,
			`^ +3 11:38:29\.259 gc-orders\[3,4,5\] \+gc-orders\[3,4,5\] +metadata_change`,
			`^ +2 11:38:28\.957 \(none\) +=? +member_joined`,
			`^FETCHED 3 partitions$`,
			`^gc-orders +3 +\d+ +\d+ +\d+ +\d+ +\d+kB +\d+ 11:38:3\d\.\d{3} -$`,
			`^COMMITS \d+ remembered, newest first$`,
			`^11:38:33\.\d{3} gc-orders/[34] +\d+ +7 ok$`,
		},
	}, {
		name: "partition detail: offsets, lag, owners, commits", frame: commitGap, w: 120, h: 60,
		keys: keys(tcell.KeyEnter, "jj", tcell.KeyEnter),
		want: []string{
			`› hcg-group › hcg-orders/0`,
			`^hcg-orders/0  of hcg-group  owner -  health -$`,
			`^committed +52 at 11:39:12\.122 by hcg-successor-670c9087 \(generation 3\), source commit$`,
			`^end offset +52 at 11:39:12\.\d{3}, from \w+$`,
			`^lag +0$`,
			`^lag seconds +0\.0s`,
			`^health +- `,
			`^position +52$`,
			`^fetched +52 records, `,
			`^OWNERS who was assigned it, newest first$`,
			`^ +3 11:39:12\.121 hcg-successor-670c9087 hcg-successor +member_joined$`,
			`^ +1 11:39:06\.089 hcg-worker-45d2ce6c +hcg-worker +member_joined$`,
			`^COMMITS 32 remembered, newest first$`,
			`^11:39:12\.122 +52 hcg-successor-670c9087 +3 ok$`,
			`^11:39:06\.098 +32 hcg-worker-45d2ce6c +1 ok$`, // the gap: 30, then 32
			`^11:39:06\.098 +30 hcg-worker-45d2ce6c +1 ok$`,
		},
	}, {
		name: "member detail: esc back to the group, the member still selected", frame: churnMid, w: 100, h: 40,
		keys:     keys(tcell.KeyEnter, "jj", tcell.KeyEnter, tcell.KeyEscape),
		want:     []string{`^MEMBERS 3 live of 4$`},
		selected: []string{`^gc-member-3-82375e67 gc-member-3 `},
	}, {
		name: "esc goes back", frame: churnMid, w: 80, h: 24,
		keys: keys(tcell.KeyEnter, tcell.KeyEscape),
		want: []string{`^gc-group +stable`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScreenOpts(t, nil, tc.w, tc.h, tc.opts)
			s.u.apply(tc.frame(t))
			s.draw()
			for _, k := range tc.keys {
				s.press(k.key, k.r)
				s.draw()
			}
			lines := s.draw()
			checkScreen(t, lines, tc.want, tc.reject)
			if tc.selected != nil {
				checkSelected(t, s, tc.selected)
			}
			for i, l := range lines {
				if n := len([]rune(l)); n > tc.w {
					t.Errorf("line %d is %d wide, more than the screen's %d", i, n, tc.w)
				}
			}
		})
	}
}

// checkSelected fails unless the lines in reverse video match want, one
// regexp each, in order.
func checkSelected(t *testing.T, s *screen, want []string) {
	t.Helper()
	got := s.reversed()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile(want[i]).MatchString(got[i])
	}
	if !ok {
		t.Errorf("selected lines:\n%s\nwant lines matching:\n%s\nscreen:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), s.text())
	}
}

// checkScreen fails when a want matches no line or a reject matches one.
func checkScreen(t *testing.T, lines, want, reject []string) {
	t.Helper()
	var missing []string
	for _, w := range want {
		re := regexp.MustCompile(w)
		if !containsMatch(lines, re) {
			missing = append(missing, w)
		}
	}
	for _, r := range reject {
		if containsMatch(lines, regexp.MustCompile(r)) {
			missing = append(missing, "not "+r)
		}
	}
	if len(missing) > 0 {
		t.Errorf("screen does not match:\n  %s\nscreen:\n%s", strings.Join(missing, "\n  "), strings.Join(lines, "\n"))
	}
}

func containsMatch(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestDetailKeepsScroll: a new frame redraws the group detail where the
// user scrolled to, not at the top, with the same row selected and kept
// on screen when the new data moves it.
func TestDetailKeepsScroll(t *testing.T) {
	fr := churnMid(t)
	s := newScreen(t, nil, 80, 24)
	s.u.apply(fr)
	s.press(tcell.KeyEnter, 0)
	for range 5 { // four members, then the second partition, below the screen's end
		s.press(tcell.KeyRune, 'j')
	}
	top := s.draw()[1]
	if strings.HasPrefix(top, "gc-group ") {
		t.Fatalf("the selection moved off the screen: the detail is not scrolled:\n%s", s.text())
	}
	checkSelected(t, s, []string{`^gc-orders +1 `})
	s.u.apply(frameOf(t, "g_churn.pcapng", time.Time{})) // two generations more: the partitions two lines down
	if got := s.draw()[1]; strings.HasPrefix(got, "gc-group ") || got == top {
		t.Fatalf("a new frame did not keep the detail scrolled to the selected row (the first line was %q):\n%s", top, s.text())
	}
	checkSelected(t, s, []string{`^gc-orders +1 `})
}

// TestHazardsOpenOnNewest: opening Hazards selects the newest hazard, not
// the one selected when the view was left (nor the first one reported,
// selected before newer ones came): enter opens what is new. While the
// top row is selected, newer hazards take it; a row chosen further down
// stays chosen.
func TestHazardsOpenOnNewest(t *testing.T) {
	full := frameOf(t, "g_churn.pcapng", time.Time{})
	if len(full.Hazards) < 6 {
		t.Fatalf("%d hazards, want at least 6", len(full.Hazards))
	}
	// The frame before the newest came: the Feed's list then, the
	// oldest three (the Feed keeps its hazards: the same pointers).
	early := *full
	early.Hazards = full.Hazards[len(full.Hazards)-3:]
	newest := `^` + regexp.QuoteMeta(clock(full.Hazards[0].Time())) + ` WARN +member_expired `

	t.Run("hazards came while another view was shown", func(t *testing.T) {
		s := newScreen(t, nil, 120, 30)
		s.u.apply(&early) // the Groups view; Hazards' list selects its first row
		s.draw()
		s.u.apply(full)
		s.press(tcell.KeyRune, '2')
		checkSelected(t, s, []string{newest})
		s.press(tcell.KeyEnter, 0)
		checkScreen(t, s.draw(), []string{`^WARN member_expired at `}, nil)
	})
	t.Run("a row chosen, the view left and opened again", func(t *testing.T) {
		s := newScreen(t, nil, 120, 30)
		s.u.apply(full)
		s.press(tcell.KeyRune, '2')
		s.press(tcell.KeyRune, 'j')
		s.press(tcell.KeyRune, 'j')
		s.press(tcell.KeyRune, '1')
		s.press(tcell.KeyRune, '2')
		checkSelected(t, s, []string{newest})
	})
	t.Run("the top row follows new hazards", func(t *testing.T) {
		s := newScreen(t, nil, 120, 30)
		s.u.apply(&early)
		s.press(tcell.KeyRune, '2')
		s.u.apply(full)
		checkSelected(t, s, []string{newest})
	})
	t.Run("a row further down stays chosen", func(t *testing.T) {
		s := newScreen(t, nil, 120, 30)
		s.u.apply(&early)
		s.press(tcell.KeyRune, '2')
		s.press(tcell.KeyRune, 'j')
		chosen := s.u.hazards.selected()
		s.u.apply(full)
		if got := s.u.hazards.selected(); got != chosen {
			t.Fatalf("selected %s at %s after a new frame, want %s at %s", got.Kind, clock(got.Time()), chosen.Kind, clock(chosen.Time()))
		}
	})
}

// TestStatusReplayState: the status bar says what the replay does, in
// words.
func TestStatusReplayState(t *testing.T) {
	tests := []struct {
		name string
		opts ReplayOptions
		keys []press
		done bool
		want string
	}{
		{"paused", ReplayOptions{Pace: Real, Paused: true}, nil, false, `PAUSED 11:38:33$`},
		{"p resumes at capture pace", ReplayOptions{Pace: Real, Paused: true}, keys("p"), false, ` real 11:38:33$`},
		{"f switches to fast", ReplayOptions{Pace: Real}, keys("f"), false, ` fast 11:38:33$`},
		{"real x4", ReplayOptions{Pace: Real, Speed: 4}, nil, false, ` real x4 11:38:33$`},
		{"done", ReplayOptions{}, nil, true, ` replay done 11:38:33$`},
	}
	fr := churnMid(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReplay(nil, &tc.opts)
			s := newScreen(t, r, 80, 24)
			f := *fr
			f.Done = tc.done
			s.u.apply(&f)
			for _, k := range tc.keys {
				s.press(k.key, k.r)
			}
			checkScreen(t, s.draw(), []string{tc.want}, nil)
		})
	}
}
