package correlate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/captest"
)

// lossFracs and lossSeeds make the lossy copies of TestHazardsUnderLoss:
// each committed capture with that fraction of its TCP data segments left
// out, drawn with each seed.
var (
	lossFracs = []float64{0.005, 0.01, 0.02}
	lossSeeds = []uint64{1, 2, 3}
)

// TestHazardsUnderLoss: a capture that lost data raises no warn or
// critical hazard that the lossless capture does not have (a hazard that
// rests on what was not seen becomes info with evidence_complete false
// where the capture lost data), and the lossless capture's hazards are
// still found wherever the exchanges they rest on survived (issue 15).
func TestHazardsUnderLoss(t *testing.T) {
	seeds := lossSeeds
	if testing.Short() {
		seeds = seeds[:1]
	}
	ran := false
	for _, tr := range loadHazardTruths(t) {
		for _, files := range captureSets(tr) {
			ran = true
			t.Run(strings.Join(files, "+"), func(t *testing.T) {
				_, rec := analyze(t, files...)
				orig := hazardEvents(rec)
				for _, frac := range lossFracs {
					for _, seed := range seeds {
						t.Run(fmt.Sprintf("drop%.1f%%/seed%d", 100*frac, seed), func(t *testing.T) {
							checkUnderLoss(t, orig, lossyCopies(t, files, frac, seed))
						})
					}
				}
			})
		}
	}
	if !ran {
		t.Skip("no captures in testdata")
	}
}

// captureSets lists the inputs a truth's captures make: each file alone,
// and the per-broker files together.
func captureSets(tr *hazardTruth) [][]string {
	var sets [][]string
	var brokers []string
	for _, c := range tr.Captures {
		sets = append(sets, []string{c.File})
		if strings.Count(c.File, ".") > 1 {
			brokers = append(brokers, c.File)
		}
	}
	if len(brokers) > 1 {
		sets = append(sets, brokers)
	}
	return sets
}

// lossyCopies writes each file of testdata with frac of its data segments
// dropped (seeded) to a temporary directory, and returns their paths.
func lossyCopies(t *testing.T, files []string, frac float64, seed uint64) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		d, err := captest.Drop(b, frac, seed+uint64(i)*1000)
		if err != nil {
			t.Fatal(err)
		}
		if keep := os.Getenv("KWIRE_LOSS_DUMP"); keep != "" {
			dir = keep // keep the copies to look at: KWIRE_LOSS_DUMP=dir
		}
		p := filepath.Join(dir, fmt.Sprintf("%s.drop%g.seed%d%s", strings.TrimSuffix(f, ".pcapng"), 100*frac, seed, ".pcapng"))
		if err := os.WriteFile(p, d.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// hazardKey identifies a hazard across a capture and its lossy copy.
func hazardKey(ev *HazardEvent) string {
	return fmt.Sprintf("%s %s %s/%v %s", ev.Kind, ev.Group, ev.Topic, ptrStr(ev.Partition), ev.MemberID)
}

// exchangeKey identifies an exchange by connection and correlation id:
// connection ids may differ between a capture and its lossy copy.
func exchangeKey(client, broker, api string, corr int32) string {
	return fmt.Sprintf("%s>%s %s #%d", client, broker, api, corr)
}

// survivalLookback is how long before its first evidence a hazard may
// rest on exchanges it does not list (a run of commits, of deliveries).
const survivalLookback = time.Minute

func checkUnderLoss(t *testing.T, orig []*HazardEvent, lossy []string) {
	t.Helper()
	survived := map[string]bool{}
	// A loss on a connection happened after its previous exchange and
	// before the anomaly that reports it.
	last := map[string]time.Time{}      // connection -> its latest exchange
	lost := map[string][][2]time.Time{} // connection -> when bytes were lost on it
	_, rec := analyzeTaps(t, &pipeline{
		tap: func(e *decode.Exchange) {
			k := e.Conn.Client.String() + ">" + e.Conn.Server.String()
			if e.ReqTime.After(last[k]) {
				last[k] = e.ReqTime
			}
			if e.Req != nil && e.Resp != nil && e.Response == decode.ResponseSeen {
				survived[exchangeKey(e.Conn.Client.String(), e.Conn.Server.String(), kmsg.NameForKey(e.Key), e.CorrelationID)] = true
			}
		},
		atap: func(a *decode.Anomaly) {
			k := a.Conn.Client.String() + ">" + a.Conn.Server.String()
			lost[k] = append(lost[k], [2]time.Time{last[k], a.Time})
		},
	}, lossy...)
	// intact: every exchange of ev survived, and its connections lost
	// nothing from survivalLookback before its first one to ev itself.
	intact := func(ev *HazardEvent) bool {
		if len(ev.Evidence) == 0 {
			return false
		}
		from, to := ev.Evidence[0].TS.Add(-survivalLookback), ev.Time().Add(time.Second)
		for _, x := range ev.Evidence {
			if !survived[exchangeKey(x.Conn.Client, x.Conn.Broker, x.API, x.CorrelationID)] {
				return false
			}
			for _, l := range lost[x.Conn.Client+">"+x.Conn.Broker] {
				if !l[1].Before(from) && !l[0].After(to) {
					return false
				}
			}
		}
		return true
	}
	worst := map[string]int{}
	for _, ev := range orig {
		worst[hazardKey(ev)] = max(worst[hazardKey(ev)], SeverityRank(ev.Severity))
	}
	got := map[string]bool{}
	for _, ev := range hazardEvents(rec) {
		got[hazardKey(ev)] = true
		if r := SeverityRank(ev.Severity); r > SeverityRank(SeverityInfo) && r > worst[hazardKey(ev)] {
			t.Errorf("false alarm under loss: %s %s: %s", ev.Severity, ev.Kind, ev.Summary)
		}
	}
	for _, ev := range orig {
		if SeverityRank(ev.Severity) < SeverityRank(SeverityWarn) || got[hazardKey(ev)] {
			continue
		}
		if intact(ev) {
			t.Errorf("lost under loss, though its exchanges survived: %s %s: %s", ev.Severity, ev.Kind, ev.Summary)
		}
	}
}

// TestLossJudgement: a heartbeat_late gap is judged against the loss on
// the member's own connections in its window: a gap there, or packets the
// source dropped, make it info with evidence_complete false and the
// figures; loss on another client's connection, or outside the window,
// leaves it warn.
func TestLossJudgement(t *testing.T) {
	tests := []struct {
		name string
		loss func(h *harness, c1, c2 *capture.Conn)
		want string // severity of m1's heartbeat_late
		gaps int64
		drop int64
		n    int64 // hazards made info (m2 is late too)
	}{
		{"no loss", func(*harness, *capture.Conn, *capture.Conn) {}, SeverityWarn, 0, 0, 0},
		{"gap on its connection", func(h *harness, c1, _ *capture.Conn) {
			h.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap, Conn: c1, Time: base.Add(12 * time.Second), Bytes: 57})
		}, SeverityInfo, 1, 0, 1},
		{"gap on another client's", func(h *harness, _, c2 *capture.Conn) {
			h.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyGap, Conn: c2, Time: base.Add(12 * time.Second), Bytes: 57})
		}, SeverityWarn, 0, 0, 1},
		{"TLS is not loss", func(h *harness, c1, _ *capture.Conn) {
			h.c.Anomaly(&decode.Anomaly{Kind: decode.AnomalyTLS, Conn: c1, Time: base.Add(12 * time.Second)})
		}, SeverityWarn, 0, 0, 0},
		// The first count is of drops before 2s, the window starts at 3s;
		// the second of drops between 2s and 12s.
		{"source drops in the window", func(h *harness, _, _ *capture.Conn) {
			h.c.SourceLoss(base.Add(2*time.Second), 3)
			h.c.SourceLoss(base.Add(12*time.Second), 4)
		}, SeverityInfo, 0, 4, 2},
		{"source drops before it", func(h *harness, _, _ *capture.Conn) {
			h.c.SourceLoss(base.Add(2*time.Second), 3)
			h.c.SourceLoss(base.Add(2500*time.Millisecond), 4)
		}, SeverityWarn, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil) // joinReq: 10s session timeout
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
			c1, c2 := h.conn("10.0.0.1:5000", "10.0.0.9:9092"), h.conn("10.0.0.2:5000", "10.0.0.9:9092")
			h.ex(3*time.Second, c1, "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(0))
			h.ex(3*time.Second, c2, "c-m2", heartbeatReq("g", "m2", 1), heartbeatResp(0))
			tt.loss(h, c1, c2)
			h.ex(13*time.Second, c1, "c-m1", heartbeatReq("g", "m1", 1), heartbeatResp(0)) // 10s: late
			h.ex(13*time.Second, c2, "c-m2", heartbeatReq("g", "m2", 1), heartbeatResp(0))
			h.close(14 * time.Second)
			evs := h.hazards(HazardHeartbeatLate)
			var late *HazardEvent
			for _, ev := range evs {
				if ev.MemberID == "m1" && ev.HeartbeatGapMillis == 10000 {
					late = ev
				}
			}
			if late == nil {
				t.Fatalf("no heartbeat_late for m1's 10s gap in %v", h.hazardViews())
			}
			if late.Severity != tt.want || (late.EvidenceComplete != nil) != (tt.want == SeverityInfo) {
				t.Fatalf("severity %s, evidence_complete %v: want %s", late.Severity, late.EvidenceComplete, tt.want)
			}
			if got := h.c.Stats().HazardsIncomplete; got != tt.n {
				t.Errorf("hazards_incomplete %d, want %d", got, tt.n)
			}
			if tt.want == SeverityWarn {
				if late.Loss != nil {
					t.Errorf("loss %+v on a complete hazard", late.Loss)
				}
				return
			}
			if l := late.Loss; l == nil || l.Gaps != tt.gaps || l.SourceDrops != tt.drop || (tt.gaps > 0 && (l.GapBytes != 57 || l.Connections != 1)) {
				t.Errorf("loss %+v, want %d gaps of 57 bytes on 1 connection, %d source drops", late.Loss, tt.gaps, tt.drop)
			}
		})
	}
}
