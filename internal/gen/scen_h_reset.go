package gen

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { Register(hResetRegression) }

var hResetRegression = Scenario{
	Name: "h_reset_regression",
	Doc: "hrr-orders (1 partition) holds 100 records; an admin client (hrr-admin, no membership) commits offset 500 " +
		"for the empty group hrr-group, beyond the high watermark; a member then joins, fetches at 500, gets " +
		"OFFSET_OUT_OF_RANGE, resets to the earliest offset (ListOffsets -2 answered 0), reads 0..99 and commits: " +
		"its first accepted commit is lower than 500, the committed offset goes backwards because of the reset",
	Options:  oneTopic("hrr-orders", 1),
	Attempts: 2,
	Run: func(ctx context.Context, c *Cluster) error {
		const topic, group = "hrr-orders", "hrr-group"
		if err := produceN(ctx, c, "hrr-producer", topic, 0, 100); err != nil {
			return err
		}
		admin, err := c.Kgo(kgo.ClientID("hrr-admin"))
		if err != nil {
			return err
		}
		defer admin.Close()
		if code, err := c.rawCommit(ctx, admin, group, "", -1, topic, 0, 500); err != nil || code != 0 {
			return fmt.Errorf("admin commit 500 on the empty group: code %d, %v", code, err)
		}
		sleepCtx(ctx, 300*time.Millisecond)
		joined := time.Now()
		var first atomic.Int64 // the first offset the member read
		first.Store(-1)
		m, err := startGMember(ctx, c, GMemberArgs{ClientID: "hrr-member", Group: group, Topics: []string{topic},
			OnRecords: func(rs []*kgo.Record) {
				first.CompareAndSwap(-1, rs[0].Offset)
			}})
		if err != nil {
			return err
		}
		if err := c.waitCaughtUp(ctx, group, topic); err != nil {
			return err
		}
		id, gen := m.cl.GroupMetadata()
		var reg *tapCommit
		for _, cm := range c.tapCommits(group, joined) {
			if cm.Code == 0 && cm.MemberID == id && cm.Offset < 500 {
				reg = &cm
				break
			}
		}
		if reg == nil || first.Load() != 0 {
			return fmt.Errorf("no accepted commit below 500 by %s (first record read %d): %w", id, first.Load(), ErrRetry)
		}
		c.AddHazard(Hazard{Kind: "non_owner_commit", Group: group, Topic: topic, Partition: i32(0), ClientID: "hrr-admin", Generation: i32(-1),
			Numbers: map[string]int64{"offset": 500, "error_code": 0},
			Note:    "admin commit (generation -1, empty member id) accepted while the group had no members"})
		c.AddHazard(Hazard{Kind: "offset_reset", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hrr-member",
			Generation: i32(gen), Numbers: map[string]int64{"from": 500, "to": 0, "log_start_offset": 0, "high_watermark": 100},
			Note: "committed 500 is beyond the log end (100): OFFSET_OUT_OF_RANGE, ListOffsets earliest, resumed at 0"})
		c.AddHazard(Hazard{Kind: "commit_regression", Group: group, Topic: topic, Partition: i32(0), MemberID: id, ClientID: "hrr-member",
			Generation: i32(reg.Generation), Numbers: map[string]int64{"committed": reg.Offset, "previous": 500}, Cause: "offset_reset",
			Note: fmt.Sprintf("after the reset, the member's first accepted commit (%d, from the broker's answers) is below the "+
				"previous accepted commit 500 (hrr-admin's)", reg.Offset)})
		m.leave()
		if err := c.RecordGroups(ctx, group); err != nil {
			return err
		}
		return c.RecordEndOffsets(ctx, topic)
	},
}
