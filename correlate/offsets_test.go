package correlate

import "testing"

// TestPartitionOffsets: what PartitionOffsets gives of each group
// partition is what Snapshot says of it, less the owner, the commit
// history and the ListOffsets answer; every partition, in the same order.
func TestPartitionOffsets(t *testing.T) {
	for _, file := range []string{"group.pcapng", "h_offset_reset.pcapng", "h_hanging_lso.pcapng"} {
		t.Run(file, func(t *testing.T) {
			c, _ := analyze(t, file)
			type gp struct {
				Group string
				P     Partition
			}
			var want, got []gp
			for _, g := range c.Snapshot().Groups {
				for _, p := range g.Partitions {
					p.Owner, p.Commits, p.ListOffsets = "", nil, nil
					want = append(want, gp{g.Group, p})
				}
			}
			c.PartitionOffsets(func(group string, p *Partition) { got = append(got, gp{group, *p}) })
			if len(want) == 0 {
				t.Fatal("no group partition in the capture")
			}
			if d := diff(want, got); d != "" {
				t.Errorf("PartitionOffsets (-Snapshot +got):\n%s", d)
			}
		})
	}
}
