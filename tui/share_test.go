package tui

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// TestShareGroupViews: a share group (a real kgo share consumer releasing
// a poison record until the delivery limit, h_share_redelivery) is a row
// of the groups view, typed share, with its warn hazard; its detail shows
// its members and epochs and, in place of partitions and commits, its
// records per partition with the numbers the broker's answers on the
// generator's tap give (the truth file), and per member.
func TestShareGroupViews(t *testing.T) {
	b, err := os.ReadFile("../testdata/h_share_redelivery.truth.json")
	if err != nil {
		t.Skip("no h_share_redelivery capture in testdata")
	}
	var tr struct {
		Share map[string]struct {
			Partitions map[string]map[string]map[string]int64 `json:"partitions"`
		} `json:"share"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	n := tr.Share["hsr-group"].Partitions["hsr-orders"]["0"]
	if n == nil {
		t.Fatal("no hsr-group hsr-orders[0] in the truth")
	}
	fr := frameOf(t, "h_share_redelivery.pcapng", time.Time{})
	for _, tc := range []struct {
		name   string
		keys   []press
		want   []string
		reject []string
	}{{
		name: "groups",
		want: []string{`^hsr-group +empty +1 +0/1 +- +- +W1 .* 1 share$`},
	}, {
		name: "detail",
		keys: keys(tcell.KeyEnter),
		want: []string{
			`^hsr-group  share  state EMPTY  generation 1$`,
			`^MEMBERS 0 live of 1$`,
			`^GENERATIONS 1, newest first$`,
			`^SHARE RECORDS 1 partitions$`,
			`^TOPIC +PART +ACQUIRED +REDELIV +ACCEPT +RELEASE +REJECT +LOCK EXP +MAX DC +HELD$`,
			fmt.Sprintf(`^hsr-orders +0 +%d +%d +%d +%d +%d +0 +%d +0$`, n["acquired"], n["redelivered"], n["accepted"], n["released"],
				n["rejected"], n["max_delivery_count"]),
			`^SHARE MEMBERS 1$`,
		},
		reject: []string{`^PARTITIONS`, `^RECENT COMMITS`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScreen(t, nil, 100, 40)
			s.u.apply(fr)
			s.draw()
			for _, k := range tc.keys {
				s.press(k.key, k.r)
				s.draw()
			}
			checkScreen(t, s.draw(), tc.want, tc.reject)
		})
	}
}
