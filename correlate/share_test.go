package correlate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareTruth is the share part of a generator truth file: each share
// group's records per topic and partition as the broker's answers on the
// generator's tap show them (internal/gen ShareTruth), never kwire.
type shareTruth struct {
	Case     string `json:"case"`
	Captures []struct {
		File string `json:"file"`
	} `json:"captures"`
	Share map[string]struct {
		Partitions map[string]map[string]ShareCounts `json:"partitions"`
	} `json:"share"`
	Hazards []truthHazard `json:"hazards"`
}

func loadShareTruths(t *testing.T) []*shareTruth {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	var out []*shareTruth
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var tr shareTruth
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(tr.Share) > 0 {
			out = append(out, &tr)
		}
	}
	if len(out) == 0 {
		t.Skip("no share group captures in testdata (go run ./cmd/kwire-gen -only share_clean)")
	}
	return out
}

// TestShareTruth: for every share group capture, kwire's records per
// partition (acquired, redelivered, accepted, released, rejected, highest
// delivery count) equal the broker's answers read off the generator's tap;
// the share_group events add up to the summary; the group is a share group
// with its members' epochs; and nothing acquired is left held or lost in a
// capture where every record was acknowledged in time.
func TestShareTruth(t *testing.T) {
	for _, tr := range loadShareTruths(t) {
		t.Run(tr.Case, func(t *testing.T) {
			c, rec := analyze(t, tr.Captures[0].File)
			s := c.Snapshot()
			evSum := map[tp]*ShareCounts{}
			for _, ev := range rec.events {
				e, ok := ev.(*ShareGroupEvent)
				if !ok {
					continue
				}
				k := tp{e.Topic, e.Partition}
				if evSum[k] == nil {
					evSum[k] = &ShareCounts{}
				}
				sum := evSum[k]
				sum.Acquired += e.Records
				sum.Redelivered += e.Redelivered
				sum.MaxDeliveryCount = max(sum.MaxDeliveryCount, e.MaxDeliveryCount)
				if e.ErrorCode <= 0 {
					sum.Accepted += e.Accepted
					sum.Released += e.Released
					sum.Rejected += e.Rejected
				}
			}
			for name, want := range tr.Share {
				g := findGroup(s, name)
				if g == nil || g.GroupType != GroupShare || g.Share == nil {
					t.Fatalf("share group %s: not found as a share group in %+v", name, g)
				}
				if len(g.Generations) == 0 || len(g.Members) == 0 {
					t.Errorf("%s: %d generations, %d members: want its epochs and members", name, len(g.Generations), len(g.Members))
				}
				got := map[string]map[string]ShareCounts{}
				for _, p := range g.Share.Partitions {
					if got[p.Topic] == nil {
						got[p.Topic] = map[string]ShareCounts{}
					}
					pc := p.ShareCounts
					pc.Renewed, pc.LockExpired = 0, 0 // not in the truth
					got[p.Topic][itoa64(int64(p.Partition))] = pc
					if d := diff(pc, *evSum[tp{p.Topic, p.Partition}]); d != "" {
						t.Errorf("%s %s[%d]: events do not add up to the summary (-summary +events):\n%s", name, p.Topic, p.Partition, d)
					}
					if p.Held != 0 {
						t.Errorf("%s %s[%d]: %d records held at the end, though the members acknowledged or left", name, p.Topic, p.Partition, p.Held)
					}
					lost := slices.ContainsFunc(tr.Hazards, func(h truthHazard) bool { return h.Kind == HazardShareAckLost })
					if (p.LockExpired > 0) != lost {
						t.Errorf("%s %s[%d]: %d records' locks expired; the truth lists share_ack_lost: %v", name, p.Topic, p.Partition, p.LockExpired, lost)
					}
				}
				if d := diff(want.Partitions, got); d != "" {
					t.Errorf("%s records (-broker +kwire):\n%s", name, d)
				}
			}
		})
	}
}

// TestShareHazards checks the share hazards of their captures beyond what
// TestHazardScenarios matches from the truth: share_redelivery is reported
// once, at the delivery that reached Hazards.ShareRedeliveries, with the
// releases it rests on as evidence; share_ack_lost names every record the
// stuck member acquired (those the other consumer got again), at its lock's
// end; neither is raised in the other share captures.
func TestShareHazards(t *testing.T) {
	kinds := []string{HazardShareRedelivery, HazardShareAckLost}
	for _, tr := range loadShareTruths(t) {
		t.Run(tr.Case, func(t *testing.T) {
			c, rec := analyze(t, tr.Captures[0].File)
			var got []*HazardEvent
			for _, ev := range hazardEvents(rec) {
				if slices.Contains(kinds, ev.Kind) {
					got = append(got, ev)
				}
			}
			var want []truthHazard
			for _, h := range tr.Hazards {
				if slices.Contains(kinds, h.Kind) {
					want = append(want, h)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d share hazards, the truth lists %d: %v", len(got), len(want), hazardSummaries(got))
			}
			for i, ev := range got {
				if msg := matchHazard(want[i], ev); msg != "" {
					t.Errorf("%s differs from the truth: %s", ev.Kind, msg)
				}
				if ev.Severity != SeverityWarn || ev.EvidenceComplete != nil {
					t.Errorf("%s: severity %s, evidence_complete %v: want warn, complete", ev.Kind, ev.Severity, ev.EvidenceComplete)
				}
				switch ev.Kind {
				case HazardShareRedelivery:
					if ev.DeliveryCount == nil || int(*ev.DeliveryCount) != c.opts.Hazards.ShareRedeliveries {
						t.Errorf("share_redelivery at delivery count %v, want the threshold %d", ev.DeliveryCount, c.opts.Hazards.ShareRedeliveries)
					}
					// The consumer released the record at each delivery before.
					if n := c.opts.Hazards.ShareRedeliveries - 1; !strings.Contains(ev.Summary, fmt.Sprintf("(the capture shows %d releases)", n)) ||
						len(ev.Evidence) < 2 {
						t.Errorf("share_redelivery: want the %d releases before it shown, with their exchanges: %s %v", n, ev.Summary, ev.Evidence)
					}
				case HazardShareAckLost:
					p := findGroup(c.Snapshot(), ev.Group).Share.Partitions[0]
					if ev.Records == nil || *ev.Records != p.Redelivered || *ev.Records != p.LockExpired {
						t.Errorf("share_ack_lost of %v records; %d were delivered again, %d locks expired", ev.Records, p.Redelivered, p.LockExpired)
					}
					if lock := time.Duration(ev.LockTimeoutMillis) * time.Millisecond; !ev.Time().Equal(ev.Evidence[0].TS.Add(lock)) &&
						ev.Time().Sub(ev.Evidence[0].TS.Time) < lock {
						t.Errorf("share_ack_lost at %v, before its %v lock from the acquisition at %v ran out", ev.Time(), lock, ev.Evidence[0].TS)
					}
				}
			}
		})
	}
}

func hazardSummaries(evs []*HazardEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Kind+": "+ev.Summary)
	}
	return out
}

// TestShareAckLostUnderLoss: share_ack_lost rests on the absence of an
// acknowledgement; when the capture of h_share_ack_lost lost bytes on the
// stuck member's connection inside the lock's window (a gap reported as
// the decoder would, just after its acquisition), the hazard is info with
// evidence_complete false and the loss figures; a gap on another client's
// connection changes nothing.
func TestShareAckLostUnderLoss(t *testing.T) {
	const file = "h_share_ack_lost.pcapng"
	if _, err := os.Stat(filepath.Join("..", "testdata", file)); err != nil {
		t.Skip("no " + file + " in testdata")
	}
	for _, tt := range []struct {
		name   string
		client string // whose ShareFetch connection loses bytes
		want   string
	}{
		{"gap on the stuck member's connection", "hsa-stuck", SeverityInfo},
		{"gap on the other consumer's connection", "hsa-consumer", SeverityWarn},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var conn *capture.Conn
			var at time.Time
			injected := false
			p := &pipeline{}
			p.tap = func(e *decode.Exchange) {
				if conn == nil && e.ClientID == tt.client && e.Key == 78 {
					conn, at = e.Conn, e.RespTime.Add(time.Second)
				}
				if conn != nil && !injected && e.ReqTime.After(at) {
					injected = true
					p.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap, Conn: conn, Time: at, Bytes: 1448})
				}
			}
			_, rec := analyzeTaps(t, p, filepath.Join("..", "testdata", file))
			if !injected {
				t.Fatalf("no ShareFetch of %s followed by another exchange a second later", tt.client)
			}
			var lost *HazardEvent
			for _, ev := range hazardEvents(rec) {
				if ev.Kind == HazardShareAckLost {
					lost = ev
				}
			}
			switch {
			case lost == nil:
				t.Fatal("no share_ack_lost")
			case lost.Severity != tt.want:
				t.Errorf("severity %s, want %s: %s", lost.Severity, tt.want, lost.Summary)
			case tt.want == SeverityInfo && (lost.EvidenceComplete == nil || *lost.EvidenceComplete || lost.Loss == nil ||
				lost.Loss.Gaps != 1 || lost.Loss.GapBytes != 1448 || !strings.Contains(lost.Summary, "evidence may be incomplete")):
				t.Errorf("evidence_complete %v, loss %+v: want false and the one 1448-byte gap", lost.EvidenceComplete, lost.Loss)
			case tt.want == SeverityWarn && (lost.EvidenceComplete != nil || lost.Loss != nil):
				t.Errorf("evidence_complete %v, loss %+v on a complete hazard", lost.EvidenceComplete, lost.Loss)
			}
		})
	}
}

// TestShareAckLostSameMember: the records whose lock ran out are
// redelivered to the same member, which accepts them at once. Its
// acknowledgement, sent after the lock ran out, is for the redelivery:
// the first acquisition is still share_ack_lost. The capture's second
// consumer takes the redelivery; its ShareFetch and ShareAcknowledge
// requests are given the stuck member's id here, so that the same
// member's session close, after the lock ran out, does not take the lost
// acquisition away either.
func TestShareAckLostSameMember(t *testing.T) {
	const file = "h_share_ack_lost.pcapng"
	if _, err := os.Stat(filepath.Join("..", "testdata", file)); err != nil {
		t.Skip("no " + file + " in testdata")
	}
	stuck, rewritten := "", 0
	p := &pipeline{}
	p.tap = func(e *decode.Exchange) {
		switch req := e.Req.(type) {
		case *kmsg.ShareFetchRequest:
			if e.ClientID == "hsa-stuck" && stuck == "" {
				stuck = *req.MemberID
			} else if e.ClientID == "hsa-consumer" && stuck != "" {
				req.MemberID = &stuck
				rewritten++
			}
		case *kmsg.ShareAcknowledgeRequest:
			if e.ClientID == "hsa-consumer" && stuck != "" {
				req.MemberID = &stuck
				rewritten++
			}
		}
	}
	_, rec := analyzeTaps(t, p, filepath.Join("..", "testdata", file))
	if stuck == "" || rewritten == 0 {
		t.Fatalf("stuck member %q, %d requests of the other consumer rewritten: want both", stuck, rewritten)
	}
	var lost []*HazardEvent
	for _, ev := range hazardEvents(rec) {
		if ev.Kind == HazardShareAckLost && ev.MemberID == stuck {
			lost = append(lost, ev)
		}
	}
	if len(lost) != 1 || lost[0].Records == nil || *lost[0].Records != 20 {
		t.Fatalf("share_ack_lost of the stuck member: %v, want one of 20 records", hazardSummaries(lost))
	}
}

// TestShareRedeliveryCauseUnderLoss: h_share_redelivery's consumer
// releases its records (acknowledgement type 2), and share_redelivery
// names that cause. With its releases hidden (the tap drops them from the
// requests), the cause is inferred for want of a return: warn on a
// complete capture, and info with its evidence incomplete when the
// capture lost bytes on the holder's connection after it acquired them.
func TestShareRedeliveryCauseUnderLoss(t *testing.T) {
	const file = "h_share_redelivery.pcapng"
	if _, err := os.Stat(filepath.Join("..", "testdata", file)); err != nil {
		t.Skip("no " + file + " in testdata")
	}
	released := func(types []int8) bool { return slices.Contains(types, 2) }
	for _, tt := range []struct {
		name         string
		hide, gap    bool
		wantSeverity string
		wantReasons  []string
	}{
		{"releases seen", false, false, SeverityWarn, []string{ShareCauseReleased}},
		{"releases hidden", true, false, SeverityWarn, []string{ShareCauseUnknown, ShareCauseLock}},
		{"releases hidden, bytes lost", true, true, SeverityInfo, []string{ShareCauseUnknown, ShareCauseLock}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			injected := false
			p := &pipeline{}
			p.tap = func(e *decode.Exchange) {
				if e.ClientID != "hsr-consumer" {
					return
				}
				if tt.hide {
					switch r := e.Req.(type) {
					case *kmsg.ShareFetchRequest:
						for i := range r.Topics {
							for j := range r.Topics[i].Partitions {
								pt := &r.Topics[i].Partitions[j]
								pt.AcknowledgementBatches = slices.DeleteFunc(pt.AcknowledgementBatches,
									func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) bool {
										return released(b.AcknowledgeTypes)
									})
							}
						}
					case *kmsg.ShareAcknowledgeRequest:
						for i := range r.Topics {
							for j := range r.Topics[i].Partitions {
								pt := &r.Topics[i].Partitions[j]
								pt.AcknowledgementBatches = slices.DeleteFunc(pt.AcknowledgementBatches,
									func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) bool {
										return released(b.AcknowledgeTypes)
									})
							}
						}
					}
				}
				// The gaps: as each ShareFetch that redelivers
				// records a third time or more, on its connection.
				if r, ok := e.Resp.(*kmsg.ShareFetchResponse); ok && tt.gap && redelivers(r, 3) {
					injected = true
					p.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap, Conn: e.Conn, Time: e.ReqTime, Bytes: 1448})
				}
			}
			_, rec := analyzeTaps(t, p, filepath.Join("..", "testdata", file))
			if tt.gap && !injected {
				t.Fatal("no ShareFetch of hsr-consumer redelivering records a third time")
			}
			n := 0
			for _, ev := range hazardEvents(rec) {
				if ev.Kind != HazardShareRedelivery {
					continue
				}
				n++
				if ev.Severity != tt.wantSeverity || !slices.Contains(tt.wantReasons, ev.Reason) {
					t.Errorf("share_redelivery %s, reason %q: want %s, one of %v: %s", ev.Severity, ev.Reason, tt.wantSeverity, tt.wantReasons, ev.Summary)
				}
				incomplete := ev.EvidenceComplete != nil && !*ev.EvidenceComplete
				if incomplete != (tt.wantSeverity == SeverityInfo) {
					t.Errorf("evidence_complete %v, loss %+v", ev.EvidenceComplete, ev.Loss)
				}
			}
			if n == 0 {
				t.Fatal("no share_redelivery")
			}
		})
	}
}

// redelivers reports whether r gives records delivered count times or more.
func redelivers(r *kmsg.ShareFetchResponse, count int16) bool {
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				if a.DeliveryCount >= count {
					return true
				}
			}
		}
	}
	return false
}
