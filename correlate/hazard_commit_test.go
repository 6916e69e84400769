package correlate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hazardView is what the hazard tests compare of a HazardEvent.
type hazardView struct {
	Kind, Severity, Group, Topic string
	Partition                    int32 // -1: none
	Member                       string
	Offset, Previous             int64 // -1: none
	From, To                     int64 // -1: none
	Skipped, Replayed            int64 // -1: none
	Missing                      []int64
}

func viewOf(ev *HazardEvent) hazardView {
	v := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	part := int32(-1)
	if ev.Partition != nil {
		part = *ev.Partition
	}
	return hazardView{ev.Kind, ev.Severity, ev.Group, ev.Topic, part, ev.MemberID, v(ev.Offset), v(ev.PreviousOffset),
		v(ev.FromOffset), v(ev.ToOffset), v(ev.Skipped), v(ev.Replayed), ev.MissingOffsets}
}

// hazards returns the hazard events recorded, of the given kinds (all
// when none given).
func (h *harness) hazards(kinds ...string) []*HazardEvent {
	var out []*HazardEvent
	for _, ev := range h.events("hazard") {
		hz := ev.(*HazardEvent)
		if len(kinds) == 0 || contains(kinds, hz.Kind) {
			out = append(out, hz)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (h *harness) hazardViews(kinds ...string) []hazardView {
	var out []hazardView
	for _, ev := range h.hazards(kinds...) {
		out = append(out, viewOf(ev))
	}
	return out
}

// batchOf returns one record batch of n records from offset first; control
// marks it a transaction marker.
func batchOf(first int64, n int32, control bool) []byte {
	b := kmsg.RecordBatch{FirstOffset: first, Magic: 2, LastOffsetDelta: n - 1, NumRecords: n, Records: []byte{0}}
	if control {
		b.Attributes = 0x20
	}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return b.AppendTo(nil)
}

// member1 is the connection and client id of stableGroup's first member.
func (h *harness) member1() (c1 string, cid string) { return "10.0.0.1:5000", "c-m1" }

// commit sends an OffsetCommit of member (generation gen) for t/p from the
// connection of client and answers it with code.
func (h *harness) commit(at time.Duration, client, cid, member string, gen int32, p int32, off int64, code int16) {
	req := commitReq("g", member, gen, "t", map[int32]int64{p: off})
	h.ex(at, h.conn(client, "10.0.0.9:9092"), cid, req, commitResp(req, code))
}

// fetch fetches t/p from off and delivers data (hwm: high watermark).
func (h *harness) fetch(at time.Duration, client, cid string, p int32, off, hwm int64, data []byte) {
	req := fetchReq(12, "t", map[int32]int64{p: off})
	h.ex(at, h.conn(client, "10.0.0.8:9092"), cid, req, fetchResp(req, hwm, map[int32][]byte{p: data}))
}

// TestHazardCommitGap is field report 4's sequence: a member commits after
// each record (committed offset = record offset + 1) of one batch, never
// commits record 30, commits 32 after record 31.
func TestHazardCommitGap(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want []hazardView
	}{
		{"one batch", batchOf(0, 32, false), []hazardView{{Kind: HazardCommitGap, Severity: SeverityCritical,
			Group: "g", Topic: "t", Partition: 0, Member: "m1", Offset: 32, Previous: 30, From: -1, To: -1,
			Skipped: 1, Replayed: -1, Missing: []int64{30}}}},
		// One record per batch: commit per poll looks the same; no proof
		// of record-by-record committing, no hazard.
		{"batch per record", batches(0, 32), nil},
		// Offset 30 is a transaction marker: no record was skipped.
		{"control record", append(append(batchOf(0, 30, false), batchOf(30, 1, true)...), batchOf(31, 1, false)...), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
			c, cid := h.member1()
			h.fetch(100*ms, c, cid, 0, 0, 32, tt.data)
			at := 200 * ms
			for off := int64(1); off <= 32; off++ {
				if off == 31 {
					continue
				}
				h.commit(at, c, cid, "m1", 1, 0, off, 0)
				at += 10 * ms
			}
			h.close(at)
			if d := diff(tt.want, h.hazardViews(HazardCommitGap)); d != "" {
				t.Errorf("commit_gap (-want +got):\n%s", d)
			}
			if n := len(h.hazards(HazardCommitRegression, HazardCommitBeyondFetch)); n != 0 {
				t.Errorf("%d other commit hazards, want 0", n)
			}
		})
	}
}

// TestHazardCommitGapOutOfOrder is field report 4's worker pool: a member
// commits each record when a thread finishes it, odd records before the
// slower even ones (2, 1, 4, 3, ...: each late commit a regression). It
// holds record 8: it commits 10 and up, never 9, and ends. Record 8 is
// lost when the member ends, if the committed offset it leaves is above it.
func TestHazardCommitGapOutOfOrder(t *testing.T) {
	order := []int64{2, 1, 4, 3, 6, 5, 8, 7, 10, 12, 11, 14, 13}
	tests := []struct {
		name   string
		commit []int64
		leave  bool // else it expires (no request for its 10 s session)
		want   []hazardView
	}{
		{"left", order, true, []hazardView{{Kind: HazardCommitGap, Severity: SeverityCritical,
			Group: "g", Topic: "t", Partition: 0, Member: "m1", Offset: 10, Previous: 7, From: -1, To: -1,
			Skipped: 1, Replayed: -1, Missing: []int64{8}}}},
		{"expired", order, false, []hazardView{{Kind: HazardCommitGap, Severity: SeverityCritical,
			Group: "g", Topic: "t", Partition: 0, Member: "m1", Offset: 10, Previous: 7, From: -1, To: -1,
			Skipped: 1, Replayed: -1, Missing: []int64{8}}}},
		// Records 8 and 12 held: one hazard each.
		{"two", []int64{2, 1, 4, 3, 6, 5, 8, 7, 10, 12, 11, 14}, true, []hazardView{
			{Kind: HazardCommitGap, Severity: SeverityCritical, Group: "g", Topic: "t", Partition: 0, Member: "m1",
				Offset: 10, Previous: 7, From: -1, To: -1, Skipped: 1, Replayed: -1, Missing: []int64{8}},
			{Kind: HazardCommitGap, Severity: SeverityCritical, Group: "g", Topic: "t", Partition: 0, Member: "m1",
				Offset: 14, Previous: 11, From: -1, To: -1, Skipped: 1, Replayed: -1, Missing: []int64{12}}}},
		// Record 8 done at last: nothing lost.
		{"filled at the end", append(slices.Clone(order), 9), true, nil},
		// Its last commit moves the committed offset back to 8: the next
		// owner processes record 8 (again: a regression, not a loss).
		{"committed back below", append(slices.Clone(order), 8), true, nil},
		// Every poll committed (strides of 3, never filled): no evidence of
		// record-by-record commits.
		{"per poll", []int64{3, 6, 10, 13}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
			c, cid := h.member1()
			h.fetch(100*ms, c, cid, 0, 0, 14, batchOf(0, 14, false))
			at := 200 * ms
			for _, off := range tt.commit {
				h.commit(at, c, cid, "m1", 1, 0, off, 0)
				at += 10 * ms
			}
			if tt.leave {
				leave := kmsg.NewPtrLeaveGroupRequest()
				leave.Version, leave.Group, leave.MemberID = 1, "g", "m1"
				h.ex(at+10*ms, h.conn(c, "10.0.0.9:9092"), cid, leave, kmsg.NewPtrLeaveGroupResponse())
			}
			h.close(at + time.Minute)
			if d := diff(tt.want, h.hazardViews(HazardCommitGap)); d != "" {
				t.Errorf("commit_gap (-want +got):\n%s", d)
			}
		})
	}
}

func TestHazardCommitRegression(t *testing.T) {
	superseded := func(off, prev int64) hazardView {
		return hazardView{Kind: HazardCommitRegression, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0, Member: "m1",
			Offset: off, Previous: prev, From: -1, To: -1, Skipped: -1, Replayed: -1}
	}
	inForce := func(off, prev, from int64) hazardView {
		return hazardView{Kind: HazardCommitRegression, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0, Member: "m1",
			Offset: off, Previous: prev, From: from, To: prev - 1, Skipped: -1, Replayed: prev - from}
	}
	other := "10.0.0.2:5000"
	tests := []struct {
		name    string
		commits []int64
		then    func(h *harness, at time.Duration)
		want    []hazardView
		said    string // in the last hazard's summary
	}{
		// 50, then 40 (held), 45 (part of it), 50 again (superseded: told,
		// nothing processed again), the same offset repeated (nothing), 30
		// (a new one, still in force at the end of the input).
		{"superseded, then in force at the end", []int64{50, 40, 45, 50, 50, 50, 30}, nil,
			[]hazardView{superseded(40, 50), inForce(30, 50, 30)}, "when the capture ended"},
		// The member leaves while the committed offset is 45: the next
		// owner resumes there.
		{"in force when the member leaves", []int64{50, 40, 45}, func(h *harness, at time.Duration) {
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version, leave.Group, leave.MemberID = 1, "g", "m1"
			h.ex(at, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "c-m1", leave, kmsg.NewPtrLeaveGroupResponse())
		}, []hazardView{inForce(40, 50, 45)}, "when member m1 left the group"},
		{"in force at the next generation", []int64{50, 40}, func(h *harness, at time.Duration) {
			stableGroup(h, at, "g", 2, map[string]tps{"m1": {"t": {0}}})
		}, []hazardView{inForce(40, 50, 40)}, "when generation 2 began"},
		// Another client fetches from the committed offset: it processes
		// 40..49 again, whatever is committed later.
		{"in force when another client fetches from it", []int64{50, 40}, func(h *harness, at time.Duration) {
			bindAlone(h, at, other, "solo")
			h.fetch(at+100*ms, other, "solo", 0, 40, 120, batchOf(40, 80, false))
			h.commit(at+200*ms, other, "solo", "", -1, 0, 120, 0)
		}, []hazardView{inForce(40, 50, 40)}, "client solo on 10.0.0.2 resumed from it (Fetch 40)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
			c, cid := h.member1()
			h.fetch(100*ms, c, cid, 0, 0, 120, batchOf(0, 120, false))
			at := time.Second
			for _, off := range tt.commits {
				h.commit(at, c, cid, "m1", 1, 0, off, 0)
				at += time.Second
			}
			if tt.then != nil {
				tt.then(h, at)
			}
			h.close(at + time.Second) // before m1's session times out
			if d := diff(tt.want, h.hazardViews(HazardCommitRegression)); d != "" {
				t.Errorf("hazards (-want +got):\n%s", d)
			}
			evs := h.hazards(HazardCommitRegression)
			if len(evs) == 0 {
				return
			}
			// Told with the regressing commit's time and evidence (and the
			// superseding commit's).
			first := evs[0]
			if !first.Time().Equal(base.Add(2*time.Second)) || len(first.Evidence) < 2 || first.Evidence[1].TS.Time != base.Add(2*time.Second) {
				t.Errorf("ts %v evidence %+v, want the regressing commit's", first.Time(), first.Evidence)
			}
			if last := evs[len(evs)-1]; !strings.Contains(last.Summary, tt.said) {
				t.Errorf("summary %q, want it to say %q", last.Summary, tt.said)
			}
		})
	}
}

func TestHazardCommitBeyondFetch(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0, 1}}})
	c, cid := h.member1()
	h.fetch(100*ms, c, cid, 0, 0, 100, batchOf(0, 100, false))
	h.commit(time.Second, c, cid, "m1", 1, 0, 100, 0)
	h.commit(2*time.Second, c, cid, "m1", 1, 0, 500, 0)
	// t/1: the commit is taken in before the Fetch (requested earlier)
	// that delivered what it commits: no hazard.
	h.commit(3*time.Second, c, cid, "m1", 1, 1, 20, 0)
	h.fetch(3*time.Second-5*ms, c, cid, 1, 0, 20, batchOf(0, 20, false))
	h.c.Close(base.Add(10 * time.Second))
	want := []hazardView{{Kind: HazardCommitBeyondFetch, Severity: SeverityCritical, Group: "g", Topic: "t", Partition: 0,
		Member: "m1", Offset: 500, Previous: 100, From: -1, To: -1, Skipped: 400, Replayed: -1}}
	if d := diff(want, h.hazardViews()); d != "" {
		t.Errorf("hazards (-want +got):\n%s", d)
	}
	if ev := h.hazards()[0]; ev.DeliveredTo == nil || *ev.DeliveredTo != 100 || ev.HighWatermark == nil || *ev.HighWatermark != 100 ||
		!ev.Time().Equal(base.Add(2*time.Second)) {
		t.Errorf("delivered_to %v, high_watermark %v, time %v: want 100, 100, the commit's", ev.DeliveredTo, ev.HighWatermark, ev.Time())
	}
}

func TestHazardCommitRejected(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0, 1, 2}}})
	c, cid := h.member1()
	admin := "10.0.0.7:5000"
	for p := int32(0); p < 3; p++ {
		h.fetch(100*ms, c, cid, p, 0, 100, batchOf(0, 100, false))
		h.commit(time.Second, c, cid, "m1", 1, p, 50, 0)
	}
	// t/0: a stale generation, never retried: 50..59 replayed.
	h.commit(2*time.Second, c, cid, "m1", 0, 0, 60, kerr.IllegalGeneration.Code)
	// t/1: rejected during a rebalance, committed again after it.
	h.commit(2*time.Second, c, cid, "m1", 1, 1, 70, kerr.RebalanceInProgress.Code)
	h.commit(3*time.Second, c, cid, "m1", 1, 1, 70, 0)
	// t/2: an admin commit refused while the group has members: it would
	// have moved the offset back; nothing is replayed.
	h.commit(4*time.Second, admin, "admin", "", -1, 2, 10, kerr.UnknownMemberID.Code)
	h.c.Close(base.Add(5 * time.Second))
	want := []hazardView{
		{Kind: HazardCommitRejected, Severity: SeverityInfo, Group: "g", Topic: "t", Partition: 2,
			Offset: 10, Previous: 50, From: -1, To: -1, Skipped: -1, Replayed: -1},
		{Kind: HazardCommitRejected, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0, Member: "m1",
			Offset: 60, Previous: 50, From: 50, To: 59, Skipped: -1, Replayed: 10},
	}
	if d := diff(want, h.hazardViews()); d != "" {
		t.Errorf("hazards (-want +got):\n%s", d)
	}
	if evs := h.hazards(); len(evs) == 2 && (evs[1].Error != "ILLEGAL_GENERATION" || *evs[1].Generation != 0) {
		t.Errorf("error %q generation %d, want ILLEGAL_GENERATION 0", evs[1].Error, *evs[1].Generation)
	}
}

func TestHazardNonOwnerCommit(t *testing.T) {
	h := newHarness(t, nil)
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}, "m2": {"t": {1}}})
	c1, c2, admin := "10.0.0.1:5000", "10.0.0.2:5000", "10.0.0.7:5000"
	h.fetch(50*ms, c1, "c-m1", 0, 0, 100, batchOf(0, 100, false))
	h.fetch(50*ms, c2, "c-m2", 1, 0, 100, batchOf(0, 100, false))
	h.commit(100*ms, c1, "c-m1", "m1", 1, 0, 90, 0)
	h.commit(100*ms, c2, "c-m2", "m2", 1, 1, 100, 0)
	// m1 commits m2's partition in generation 1.
	h.commit(200*ms, c1, "c-m1", "m1", 1, 1, 40, 0)
	// Generation 2 (cooperative): m2 revokes t/1, which nobody owns yet;
	// its final commit of t/1 in generation 2 is no hazard. A commit of
	// generation 1 by m1 for t/0, still its own, after generation 2
	// began: no hazard either.
	stableGroup(h, time.Second, "g", 2, map[string]tps{"m1": {"t": {0}}, "m2": {}})
	h.commit(1100*ms, c2, "c-m2", "m2", 2, 1, 100, 0)
	h.commit(1100*ms, c1, "c-m1", "m1", 1, 0, 100, 0)
	// Both leave; an admin tool moves t/0 back and t/1 forward.
	for i, m := range []string{"m1", "m2"} {
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group, leave.MemberID = 1, "g", m
		h.ex(2*time.Second, h.conn([]string{c1, c2}[i], "10.0.0.9:9092"), "c-"+m, leave, kmsg.NewPtrLeaveGroupResponse())
	}
	h.commit(3*time.Second, admin, "admin", "", -1, 0, 10, 0)
	h.commit(3*time.Second, admin, "admin", "", -1, 1, 150, 0)
	h.commit(3500*ms, admin, "admin", "", -1, 1, 150, 0) // repeated: one episode
	// A standalone consumer commits what it fetched itself: no hazard.
	standalone := "10.0.0.6:5000"
	bindAlone(h, 4*time.Second, standalone, "solo")
	h.fetch(4100*ms, standalone, "solo", 0, 10, 200, batchOf(10, 190, false))
	h.commit(4200*ms, standalone, "solo", "", -1, 0, 200, 0)
	// Every backward move is a commit_regression too, naming the
	// non_owner_commit that explains it (issue 15).
	want := []hazardView{
		{Kind: HazardNonOwnerCommit, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 1, Member: "m1",
			Offset: 40, Previous: 100, From: -1, To: -1, Skipped: -1, Replayed: -1},
		{Kind: HazardCommitRegression, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 1, Member: "m1",
			Offset: 40, Previous: 100, From: 40, To: 99, Skipped: -1, Replayed: 60},
		{Kind: HazardNonOwnerCommit, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0,
			Offset: 10, Previous: 100, From: 10, To: 99, Skipped: -1, Replayed: 90},
		{Kind: HazardNonOwnerCommit, Severity: SeverityCritical, Group: "g", Topic: "t", Partition: 1,
			Offset: 150, Previous: 100, From: 100, To: 149, Skipped: 50, Replayed: -1},
		// Told when the standalone consumer resumes from 10 (its Fetch),
		// before its commit 200 puts the committed offset past 100.
		{Kind: HazardCommitRegression, Severity: SeverityWarn, Group: "g", Topic: "t", Partition: 0,
			Offset: 10, Previous: 100, From: 10, To: 99, Skipped: -1, Replayed: 90},
	}
	if d := diff(want, h.hazardViews()); d != "" {
		t.Errorf("hazards (-want +got):\n%s", d)
	}
	for _, ev := range h.hazards(HazardCommitRegression) {
		owner := h.hazards(HazardNonOwnerCommit)
		if ev.Cause == nil || ev.Cause.Kind != HazardNonOwnerCommit || !slices.ContainsFunc(owner, func(o *HazardEvent) bool {
			return o.Time().Equal(ev.Cause.TS.Time) && *o.Partition == *ev.Partition
		}) {
			t.Errorf("regression of t/%d: cause %+v, want the non_owner_commit of that partition", *ev.Partition, ev.Cause)
		}
	}
	if evs := h.hazards(HazardNonOwnerCommit); len(evs) > 0 && (evs[0].Owner != "m2" || *evs[0].OwnerGeneration != 1) {
		t.Errorf("owner %q generation %d, want m2 1", evs[0].Owner, *evs[0].OwnerGeneration)
	}
}

// bindAlone binds a client to group g without a member (an OffsetFetch
// answered without offsets), as a standalone consumer does.
func bindAlone(h *harness, at time.Duration, client, cid string) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "g"
	h.ex(at, h.conn(client, "10.0.0.9:9092"), cid, req, kmsg.NewPtrOffsetFetchResponse())
}

func TestHazardCommitOnReceive(t *testing.T) {
	// "after poll": a commit 3ms after each delivery (fast synchronous
	// processing looks the same): info only. "timer": deliveries every
	// 70ms, commits every 200ms of all delivered so far (auto-commit of
	// what was polled): persistent, warn.
	tests := []struct {
		name              string
		every, commitEach time.Duration
		want              []string
	}{
		{"after poll", 200 * ms, 0, []string{SeverityInfo}},
		{"timer", 70 * ms, 200 * ms, []string{SeverityInfo, SeverityWarn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
			c, cid := h.member1()
			next := time.Second + 35*ms // the timer's next commit
			for j := int64(0); j < 40; j++ {
				at := time.Second + time.Duration(j)*tt.every
				for tt.commitEach > 0 && next < at {
					h.commit(next, c, cid, "m1", 1, 0, j*10, 0)
					next += tt.commitEach
				}
				h.fetch(at, c, cid, 0, j*10, (j+1)*10, batchOf(j*10, 10, false))
				if tt.commitEach == 0 {
					h.commit(at+3*ms, c, cid, "m1", 1, 0, (j+1)*10, 0)
				}
			}
			var got []string
			for _, ev := range h.hazards() {
				if ev.Kind != HazardCommitOnReceive {
					t.Errorf("hazard %s, want only commit_on_receive", ev.Kind)
				}
				got = append(got, ev.Severity)
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("commit_on_receive severities (-want +got):\n%s", d)
			}
		})
	}
}
