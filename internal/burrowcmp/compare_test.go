package burrowcmp

import (
	"fmt"
	"strings"
	"time"
)

// kwireState is the kwire health state for each of Burrow's partition
// statuses (Burrow's ERR is only a group's, for a partition STOP, STALL
// or REWIND).
var kwireState = map[string]string{"OK": "ok", "WARN": "lagging", "STALL": "stalled", "STOP": "stopped", "REWIND": "rewind"}

// compare reads every sample's capture with kwire and holds it against
// what Burrow said at that moment. It logs one line per sample and group:
// each partition's lag and state by both tools (Burrow's first).
//
// Lag: at a settled sample both rest on the same offsets, and each
// partition's lag must be equal. In the middle of a burst they need not:
// Burrow's end offset is its last ListOffsets answer (up to offset-refresh,
// 1 s, old) and its committed offset what it last read from
// __consumer_offsets, while kwire has the newest Produce and Fetch
// responses and the commit responses up to that moment; those samples are
// logged, not held equal.
//
// States: before the turn every group keeps up, and both tools must say
// OK/ok; from turnAt + healthWindow on, both must say the scenario's
// state. In between they may differ, for their windows are not alike:
// Burrow judges its last Intervals commits (and calls a partition stopped
// only once the time since its last commit exceeds the span of those
// commits), kwire judges the last healthWindow of capture time (stopped:
// no commit in the window while the end moved; stalled: two or more
// commits in it, all of the offset committed before it). Right after the
// turn kwire's window still holds commits from before it, so a group
// whose lag grows while its last commits moved is lagging to kwire, while
// Burrow, whose stored commits had lag 0, still says OK (its rule 1: a
// window with a zero-lag commit is OK).
func (r *run) compare(kwire string, start time.Time) {
	t := r.t
	settled := 0
	for _, s := range r.samples {
		r.analyze(kwire, s)
		rel := s.at.Sub(start)
		check := s.settled && (rel < turnAt || rel >= turnAt+healthWindow)
		if s.settled {
			settled++
		}
		for _, sc := range scenarios {
			var lags, states []string
			for p := range int32(parts) {
				bp := s.burrow[sc.group].partition(p)
				kp, ok := s.kwire[sc.group][p]
				if bp == nil || !ok {
					if s.settled {
						t.Errorf("sample %s: %s/%d: in Burrow %v, in kwire %v", s.name, sc.group, p, bp != nil, ok)
					}
					lags, states = append(lags, "-|"+str(kp.Lag)), append(states, "-|"+kp.state())
					continue
				}
				lags = append(lags, fmt.Sprintf("%d|%s", bp.CurrentLag, str(kp.Lag)))
				ks := kp.state()
				mark := ""
				if kwireState[bp.Status] != ks {
					mark = "≠"
				}
				states = append(states, bp.Status+"|"+ks+mark)
				if s.settled && (kp.Lag == nil || *kp.Lag != bp.CurrentLag) {
					t.Errorf("sample %s (+%.1fs): %s/%d: lag Burrow %d (end %d, commit %d), kwire %s (end %s from %s, committed %s)",
						s.name, rel.Seconds(), sc.group, p, bp.CurrentLag, s.ends[p], bp.End.Offset,
						str(kp.Lag), str(kp.EndOffset), kp.EndOffsetFrom, str(kp.Committed))
				}
				if !check {
					continue
				}
				wantB, wantK := "OK", "ok"
				if rel >= turnAt {
					wantB, wantK = sc.burrow, sc.kwire
				}
				if bp.Status != wantB || ks != wantK {
					t.Errorf("sample %s (+%.1fs): %s/%d (%s): Burrow %s, kwire %s (%s); want %s and %s",
						s.name, rel.Seconds(), sc.group, p, sc.doc, bp.Status, ks, kp.evidence(), wantB, wantK)
				}
			}
			t.Logf("%-6s %+6.1fs settled=%-5v %-12s lag B|K %-24s state B|K %s",
				s.name, rel.Seconds(), s.settled, sc.group, strings.Join(lags, " "), strings.Join(states, " "))
		}
	}
	r.logStates()
	if settled < periods-1 {
		t.Errorf("%d of %d bursts settled (Burrow had the last commits and end offsets before the next burst): too few moments compared", settled, periods)
	}
}

// logStates logs both tools' states of each scenario at the last settled
// sample, side by side, with what kwire says the wire shows behind its.
func (r *run) logStates() {
	var last *sample
	for _, s := range r.samples {
		if s.settled {
			last = s
		}
	}
	if last == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "consumer states at sample %s:\n%-12s %-54s %-7s %-8s %s\n", last.name, "group", "what it does", "Burrow", "kwire", "kwire's evidence")
	for _, sc := range scenarios {
		var bs, ks, ev []string
		for p := range int32(parts) {
			if bp := last.burrow[sc.group].partition(p); bp != nil {
				bs = append(bs, bp.Status)
			}
			kp := last.kwire[sc.group][p]
			ks, ev = append(ks, kp.state()), append(ev, kp.evidence())
		}
		fmt.Fprintf(&b, "%-12s %-54s %-7s %-8s %s\n", sc.group, sc.doc, same(bs), same(ks), same(ev))
	}
	r.t.Log(b.String())
}

// same returns the one value of vs, or all of them when they differ.
func same(vs []string) string {
	for _, v := range vs {
		if v != vs[0] {
			return strings.Join(vs, ",")
		}
	}
	if len(vs) == 0 {
		return "-"
	}
	return vs[0]
}

// partition returns the status of partition p of the topic, or nil.
func (g *GroupStatus) partition(p int32) *PartitionStatus {
	if g == nil {
		return nil
	}
	for _, ps := range g.Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return ps
		}
	}
	return nil
}

func (k kwirePart) state() string {
	if k.Health == nil {
		return "-"
	}
	return k.Health.State
}

func (k kwirePart) evidence() string {
	if k.Health == nil {
		return ""
	}
	return k.Health.Evidence
}

func str(v *int64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}
