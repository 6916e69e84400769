package correlate

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCommits(t *testing.T) {
	h := newHarness(t, &Options{MaxCommitHistory: 3})
	stableGroup(h, 0, "g", 1, map[string]tps{"m1": {"t": {0}}})
	c1 := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	admin := h.conn("10.0.0.7:5000", "10.0.0.9:9092")
	steps := []struct {
		conn   string
		member string
		gen    int32
		offset int64
		code   int16 // -1: no response
	}{
		{"m1", "m1", 1, 5, 0},
		{"m1", "m1", 1, 9, 0},
		{"m1", "m1", 0, 7, kerr.IllegalGeneration.Code},
		{"m1", "m1", 1, 6, -1},
		{"admin", "", -1, 3, 0},
	}
	for i, s := range steps {
		req := commitReq("g", s.member, s.gen, "t", map[int32]int64{0: s.offset})
		var resp kmsg.Response
		if s.code >= 0 {
			resp = commitResp(req, s.code)
		}
		conn, cid := c1, "c-m1"
		if s.conn == "admin" {
			conn, cid = admin, "admin"
		}
		h.ex(time.Duration(i+1)*time.Second, conn, cid, req, resp)
	}

	type view struct {
		Member  string
		Gen     int32
		Offset  int64
		Code    int16
		Outcome string
	}
	var got []view
	for _, ev := range h.events("commit") {
		c := ev.(*CommitEvent)
		got = append(got, view{c.MemberID, c.Generation, c.Offset, c.ErrorCode, c.Outcome})
	}
	want := []view{
		{"m1", 1, 5, 0, CommitAccepted},
		{"m1", 1, 9, 0, CommitAccepted},
		{"m1", 0, 7, 22, CommitRejected},
		{"m1", 1, 6, -1, CommitUnknown},
		{"", -1, 3, 0, CommitAccepted},
	}
	if d := diff(want, got); d != "" {
		t.Errorf("commit events (-want +got):\n%s", d)
	}
	checkCommitState(t, h)
}

// checkCommitState checks TestCommits' partition, stats and bindings.
func checkCommitState(t *testing.T, h *harness) {
	p := findPartition(h.c.Snapshot(), "g", "t", 0)
	if p == nil {
		t.Fatal("no partition t/0")
	}
	gotP := []any{*p.Committed, p.CommittedBy, p.CommittedGeneration, p.CommittedSource, len(p.Commits), p.CommitsDropped, p.Commits[0].Offset}
	wantP := []any{3, "", -1, "commit", 3, 2, 7}
	if d := diff(wantP, gotP); d != "" {
		t.Errorf("committed, by, generation, source, history, dropped, oldest kept (-want +got):\n%s", d)
	}
	if st := h.c.Stats(); st.Commits != 5 || st.CommitsAccepted != 3 || st.CommitsRejected != 1 || st.CommitsUnanswered != 1 || st.Limits.CommitsDropped != 2 {
		t.Errorf("stats = %+v", st)
	}
	// The admin client's commit bound it to g without a member.
	if cl := findClient(h.c.Snapshot(), "10.0.0.7", "admin"); cl == nil || !cl.Bindings[0].WithoutMember {
		t.Errorf("admin client = %+v, want a binding without member", cl)
	}
}

func TestOffsetFetchSetsCommitted(t *testing.T) {
	h := newHarness(t, nil)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	req.Groups = append(req.Groups, rg)
	resp := kmsg.NewPtrOffsetFetchResponse()
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = "g"
	t0 := kmsg.NewOffsetFetchResponseGroupTopic()
	t0.Topic = "t"
	for p, off := range []int64{12, -1} {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset = int32(p), off
		t0.Partitions = append(t0.Partitions, rp)
	}
	g.Topics = append(g.Topics, t0)
	resp.Groups = append(resp.Groups, g)
	h.ex(0, h.conn("10.0.0.1:5000", "10.0.0.9:9092"), "truth", req, resp)

	s := h.c.Snapshot()
	p0, p1 := findPartition(s, "g", "t", 0), findPartition(s, "g", "t", 1)
	if p0 == nil || p0.Committed == nil || *p0.Committed != 12 || p0.CommittedSource != "offset_fetch" {
		t.Errorf("t/0 = %+v, want committed 12 from offset_fetch", p0)
	}
	if p1 == nil || p1.Committed != nil {
		t.Errorf("t/1 = %+v, want no committed offset", p1)
	}
}

// TestCommitHistoryWindow: after every commit the history is exactly the
// last MaxCommitHistory commits, oldest first, and the rest are counted
// dropped, however the slice behind it is compacted; a merge keeps the
// whole of both histories in time order.
func TestCommitHistoryWindow(t *testing.T) {
	const keep = 32
	var ps, other partState
	var lim Limits
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		ps.addCommit(commitRec{at: at.Add(time.Duration(2*i) * time.Second), offset: int64(i), member: "m"}, keep, &lim)
		h := ps.commits.all()
		if want := min(i+1, keep); len(h) != want {
			t.Fatalf("after %d commits: %d in the history, want %d", i+1, len(h), want)
		}
		for j, r := range h {
			if want := int64(i + 1 - len(h) + j); r.offset != want {
				t.Fatalf("after %d commits: history[%d] is offset %d, want %d", i+1, j, r.offset, want)
			}
		}
		if want := int64(max(0, i+1-keep)); ps.commitsDropped != want || lim.CommitsDropped != want {
			t.Fatalf("after %d commits: %d dropped (limits %d), want %d", i+1, ps.commitsDropped, lim.CommitsDropped, want)
		}
		if len(ps.commits.s) > keep+keep/4+1 {
			t.Fatalf("after %d commits the slice holds %d", i+1, len(ps.commits.s))
		}
	}
	for i := range 5 {
		other.addCommit(commitRec{at: at.Add(time.Duration(2*(190+i)+1) * time.Second), offset: int64(1000 + i)}, keep, &lim)
	}
	mergePart(&ps, &other)
	var got []int64
	for _, r := range ps.commits.all() {
		got = append(got, r.offset)
	}
	want := []int64{168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189,
		190, 1000, 191, 1001, 192, 1002, 193, 1003, 194, 1004, 195, 196, 197, 198, 199}
	if !slices.Equal(got, want) {
		t.Errorf("merged history %v\nwant %v", got, want)
	}
}
