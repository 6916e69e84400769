package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// listOffsets handles ListOffsets (key 2): a consumer looking up the
// earliest (-2) or latest (-1) offset, e.g. to reset after
// OFFSET_OUT_OF_RANGE. Attributed like a Fetch; the last answer per
// partition is kept with the group's partition, if the partition is the
// group's: one its members fetch, commit or own. A client bound to the
// group that looks up other partitions (an admin tool describing
// another group) does not make them the group's.
func (c *Correlator) listOffsets(e *decode.Exchange, req *kmsg.ListOffsetsRequest) {
	resp, _ := e.Resp.(*kmsg.ListOffsetsResponse)
	if resp == nil || req.ReplicaID >= 0 {
		return
	}
	a := c.attribute(c.keyOf(e))
	g := c.groups[a.group]
	if g == nil || a.group == "" {
		return
	}
	asked := make(map[tp]int64)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			asked[tp{t.Topic, p.Partition}] = p.Timestamp
		}
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			p := tp{t.Topic, rp.Partition}
			ps := g.parts[p]
			if ps == nil && g.owned(p) {
				ps = c.part(g, p)
			}
			if ps == nil {
				continue
			}
			off := rp.Offset
			if req.Version == 0 {
				off = -1
				if len(rp.OldStyleOffsets) > 0 {
					off = rp.OldStyleOffsets[0]
				}
			}
			ps.listed = &listedOffset{timestamp: asked[p], offset: off, code: rp.ErrorCode, at: e.RespTime.UTC()}
		}
	}
}
