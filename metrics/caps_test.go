package metrics

import "testing"

// TestTiered: names only mentioned share a tenth of the budget and
// never take a real group's label; past each budget, "other".
func TestTiered(t *testing.T) {
	type call struct {
		group      string
		real       bool
		want       string
		wantFolded bool
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"named_then_real", []call{
			{"junk-1", false, "junk-1", false}, // the named budget: max(20/10, 1) = 2
			{"junk-2", false, "junk-2", false},
			{"junk-3", false, other, true},
			{"real-1", true, "real-1", false}, // the real budget is apart
			{"real-1", false, "real-1", false},
			{"junk-1", false, "junk-1", false}, // admitted values stay
		}},
		{"named_becomes_real", []call{
			{"g", false, "g", false},
			{"g", true, "g", false},            // moves to the real budget...
			{"junk-1", false, "junk-1", false}, // ...and frees its named place
			{"junk-2", false, "junk-2", false},
			{"junk-3", false, other, true},
		}},
		{"real_budget_full", []call{
			{"junk-1", false, "junk-1", false},
			{"junk-2", false, "junk-2", false},
		}},
	}
	for i := range 20 {
		tests[2].calls = append(tests[2].calls, call{string(rune('a' + i)), true, string(rune('a' + i)), false})
	}
	tests[2].calls = append(tests[2].calls, call{"late", true, other, true}, call{"junk-2", true, "junk-2", false})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTiered(20)
			for i, c := range tt.calls {
				if got, folded := g.label(c.group, c.real); got != c.want || folded != c.wantFolded {
					t.Errorf("call %d: label(%q, %v) = %q, %v; want %q, %v", i, c.group, c.real, got, folded, c.want, c.wantFolded)
				}
			}
		})
	}
}
