package realgen

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// shareReport is a share mode report of the Java driver (ShareMode.java).
type shareReport struct {
	Kind          string         `json:"kind"`
	Group         string         `json:"share_group"`
	ClientID      string         `json:"client_id"`
	Records       int64          `json:"records"`
	FirstOffset   int64          `json:"first_offset"`
	LastOffset    int64          `json:"last_offset"`
	Offset        int64          `json:"offset"`
	DeliveryCount int16          `json:"delivery_count"`
	MaxDelivery   int16          `json:"max_delivery_count"`
	Acks          map[string]int `json:"acks"`
	OK            bool           `json:"ok"`
}

// shareCounts is what one client's records came to.
type shareCounts struct{ Acquired, Accepted, Released, Rejected int64 }

// checkShare compares kwire's share group with the broker's records and
// the Java clients' reports: the members (ShareGroupMemberMetadata
// records: member id and client id), every epoch kwire tells one of the
// group's (ShareGroupMetadata records), each member's records acquired
// and acknowledged (the clients' share_acks, and share_hold for a client
// SIGKILLed holding what it got), the poison record's last delivery
// (share_redelivery, and archived at that count in __share_group_state),
// the SIGKILLed member's records and their redelivery to another member
// (share_member_died), and the lock that ran out (share_ack_lost). It
// returns the member ids the broker expired: those of killed clients.
func checkShare(t *testing.T, truth Truth, st ShareTruth, g *correlate.Group, s *correlate.Snapshot) map[string]bool {
	t.Helper()
	client := map[string]string{} // member id -> client id
	for _, m := range st.Members {
		if !m.Gone {
			client[m.MemberID] = m.ClientID
		}
	}
	got := map[string]string{}
	for _, m := range g.Members {
		got[m.MemberID] = m.ClientID
	}
	if d := realkafka.DiffMaps(client, got); d != "" {
		t.Errorf("share group %s: members, ShareGroupMemberMetadata records vs kwire (-want +got):\n%s", st.Group, d)
	}
	// The group epochs no member reached (a leave or an expiry that left
	// only a dead member, or none) are in no member's record, nor on the
	// wire: kwire tells the others, each with its members.
	checkEpochs(t, st.Group, st.Epochs, st.Assignments, g.Generations, nil)
	t.Logf("share group %s: members %v", st.Group, client)

	want := map[string]shareCounts{}
	held := map[string]shareReport{} // a client's share_hold
	closed := map[string]bool{}
	var poison shareReport
	pending := map[string]shareReport{} // a client's share_acks until its share_commit
	for _, raw := range truth.Reports {
		var r shareReport
		if json.Unmarshal(raw, &r) != nil || r.Group != st.Group {
			continue
		}
		c := want[r.ClientID]
		switch r.Kind {
		case "share_acks":
			c.Acquired += r.Records
			pending[r.ClientID] = r
		case "share_commit":
			// The broker took the acknowledgements (commitSync: one
			// partition here); refused (INVALID_RECORD_STATE after the
			// lock ran out), kwire does not count them either.
			if a := pending[r.ClientID]; r.OK {
				c.Accepted += int64(a.Acks["accept"])
				c.Released += int64(a.Acks["release"])
				c.Rejected += int64(a.Acks["reject"])
			}
			delete(pending, r.ClientID)
		case "share_hold":
			held[r.ClientID] = r
		case "closing":
			closed[r.ClientID] = true
		case "poison":
			if r.DeliveryCount > poison.DeliveryCount {
				poison = r
			}
		}
		want[r.ClientID] = c
	}
	killed := map[string]bool{}
	for cl, h := range held {
		if !closed[cl] { // SIGKILLed while holding: acknowledged none
			c := want[cl]
			c.Acquired += h.Records
			want[cl] = c
			killed[cl] = true
		}
	}
	gotC := map[string]shareCounts{}
	if g.Share != nil {
		for _, m := range g.Share.Members {
			gotC[client[m.MemberID]] = shareCounts{m.Acquired, m.Accepted, m.Released, m.Rejected}
		}
	}
	if d := realkafka.DiffMaps(want, gotC); d != "" {
		t.Errorf("share group %s: records per client, the Java clients vs kwire (-want +got):\n%s", st.Group, d)
	}
	t.Logf("share group %s: per client %v", st.Group, want)

	// The poison record: archived at its last delivery.
	archived := false
	for _, r := range st.State {
		for _, b := range r.Batches {
			archived = archived || (b.FirstOffset <= poison.Offset && b.LastOffset >= poison.Offset && b.State == 4 &&
				b.DeliveryCount == poison.DeliveryCount)
		}
	}
	if poison.DeliveryCount > 0 && !archived {
		t.Errorf("share group %s: poison offset %d: no archived state batch at delivery count %d in __share_group_state", st.Group, poison.Offset, poison.DeliveryCount)
	}
	expired := map[string]bool{}
	died, redelivered, lost := false, false, false
	for _, h := range s.Hazards {
		if h.Group != st.Group {
			continue
		}
		switch h.Kind {
		case correlate.HazardShareRedelivery:
			if h.FromOffset == nil || *h.FromOffset != poison.Offset || h.DeliveryCount == nil || *h.DeliveryCount != poison.DeliveryCount {
				break
			}
			redelivered = true
			// The broker archived it at this count: its last delivery, by
			// the limit kwire is told (--share-delivery-limit).
			if int(h.DeliveryLimit) != int(poison.DeliveryCount) || !strings.Contains(h.Summary, "this is the last delivery") {
				t.Errorf("share_redelivery of poison offset %d: delivery limit %d, the broker archived it at delivery %d: %s",
					poison.Offset, h.DeliveryLimit, poison.DeliveryCount, h.Summary)
			}
		case correlate.HazardShareAckLost:
			cl := client[h.MemberID]
			lost = lost || (held[cl].Records > 0 && closed[cl])
		case correlate.HazardShareMemberDied:
			cl := client[h.MemberID]
			if !killed[cl] {
				t.Errorf("share_member_died for %s (client %s), which was not SIGKILLed: %s", h.MemberID, cl, h.Summary)
				continue
			}
			// Every record it held, delivered again to a member of
			// another client.
			n := int64(0)
			if h.Records != nil {
				n = *h.Records
			}
			if n != held[cl].Records {
				t.Errorf("share_member_died for %s: %d records, client %s held %d", h.MemberID, n, cl, held[cl].Records)
			}
			for id, c := range client {
				if c != cl && strings.Contains(h.Summary, "again to member "+id) {
					died = true
				}
			}
		}
	}
	for id, cl := range client {
		if killed[cl] {
			expired[id] = true
		}
	}
	if poison.DeliveryCount > 0 && !redelivered {
		t.Errorf("share group %s: no share_redelivery of poison offset %d at delivery count %d", st.Group, poison.Offset, poison.DeliveryCount)
	}
	if len(killed) > 0 && !died {
		t.Errorf("share group %s: no share_member_died naming the records of %v and the member they went to", st.Group, killed)
	}
	if !lost {
		t.Errorf("share group %s: no share_ack_lost of a client that held its records past the lock", st.Group)
	}
	return expired
}
