package correlate

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// listGroups handles ListGroups (key 16): every group listed is tracked,
// with its state (v4+) and type (v5+).
func (c *Correlator) listGroups(e *decode.Exchange) {
	resp, _ := e.Resp.(*kmsg.ListGroupsResponse)
	if resp == nil || resp.ErrorCode != 0 {
		return
	}
	for _, rg := range resp.Groups {
		g := c.group(rg.Group)
		if g == nil {
			continue
		}
		if g.protocolType == "" {
			g.protocolType = rg.ProtocolType
		}
		switch rg.GroupType {
		case GroupClassic, GroupConsumer, GroupShare, GroupStreams:
			g.setType(rg.GroupType)
		}
		g.listed = rg.GroupState
	}
}
