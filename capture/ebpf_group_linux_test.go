//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package capture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// analysis runs decode and correlate over one source, on the source's
// goroutine, and publishes a snapshot at every tick.
type analysis struct {
	name string
	dec  *decode.Decoder
	corr *correlate.Correlator
	last time.Time
	// memberPIDs maps a member id to the pids of the processes owning
	// the connections its requests came on.
	memberPIDs map[string]map[uint32]bool
	conns      map[uint64]*capture.Conn
	anomalies  map[decode.AnomalyKind]int
	// fetches are the decoded Fetch responses' fields other than records,
	// by connection and correlation id; holed those of them decoded with
	// records not copied, lost those whose body holes cost.
	fetches     map[string]string
	holed, lost []string

	mu      sync.Mutex
	snap    correlate.Snapshot
	changed chan struct{}
}

func newAnalysis(name string) *analysis {
	a := &analysis{name: name, memberPIDs: map[string]map[uint32]bool{}, conns: map[uint64]*capture.Conn{},
		anomalies: map[decode.AnomalyKind]int{}, fetches: map[string]string{}, changed: make(chan struct{})}
	a.corr = correlate.New(nil, nil)
	a.dec = decode.New(a, nil)
	return a
}

func (a *analysis) Chunk(c *capture.Chunk) {
	if c.Time.After(a.last) {
		a.last = c.Time
	}
	a.conns[c.Conn.ID] = c.Conn
	a.dec.Chunk(c)
}

func (a *analysis) Tick(time.Time) { a.publish() }

func (a *analysis) publish() {
	s := a.corr.Snapshot()
	a.mu.Lock()
	a.snap = *s
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

func (a *analysis) Exchange(e *decode.Exchange) {
	var member string
	switch r := e.Req.(type) {
	case *kmsg.JoinGroupRequest:
		if resp, ok := e.Resp.(*kmsg.JoinGroupResponse); ok && resp.ErrorCode == 0 {
			member = resp.MemberID
		}
	case *kmsg.SyncGroupRequest:
		member = r.MemberID
	case *kmsg.HeartbeatRequest:
		member = r.MemberID
	case *kmsg.OffsetCommitRequest:
		member = r.MemberID
	}
	if member != "" && e.Conn.Process != nil {
		if a.memberPIDs[member] == nil {
			a.memberPIDs[member] = map[uint32]bool{}
		}
		a.memberPIDs[member][e.Conn.Process.PID] = true
	}
	if e.Key == 1 {
		k := fmt.Sprintf("%s>%s#%d", e.Conn.Client, e.Conn.Server, e.CorrelationID)
		if resp, ok := e.Resp.(*kmsg.FetchResponse); ok {
			a.fetches[k] = fetchFields(resp)
			if len(e.RecordsNotCopied) > 0 {
				a.holed = append(a.holed, k)
			}
		} else if e.RespErr == decode.ErrNotCopied {
			a.lost = append(a.lost, k)
		}
	}
	a.corr.Exchange(e)
}

// fetchFields renders every field of a Fetch response but its records.
func fetchFields(r *kmsg.FetchResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "err %d session %d", r.ErrorCode, r.SessionID)
	for _, t := range r.Topics {
		fmt.Fprintf(&b, " %s%x:", t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, " p%d err %d hwm %d lso %d start %d aborted %d replica %d",
				p.Partition, p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.LogStartOffset, len(p.AbortedTransactions), p.PreferredReadReplica)
		}
	}
	return b.String()
}

func (a *analysis) Anomaly(x *decode.Anomaly) { a.anomalies[x.Kind]++ }

// wait returns once cond holds for the latest snapshot.
func (a *analysis) wait(t *testing.T, what string, cond func(*correlate.Snapshot) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		a.mu.Lock()
		ok, ch := cond(&a.snap), a.changed
		a.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: timed out waiting for %s", a.name, what)
		}
	}
}

// run runs src into a until ctx is done; the returned channel yields
// Run's error once the final snapshot is taken.
func (a *analysis) run(ctx context.Context, src capture.Source) <-chan error {
	return a.runVia(ctx, src, a)
}

// runVia is run with sink in front of a (it must end in a, and tick it).
func (a *analysis) runVia(ctx context.Context, src capture.Source, sink capture.Sink) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := src.Run(ctx, sink)
		a.corr.Close(a.last)
		a.publish()
		done <- err
	}()
	return done
}

// groupView is what both captures must agree on: generations with their
// members and assignments, members, and per partition the commits.
type groupView struct {
	Generations []string
	Members     []string
	Commits     []string
}

func viewOf(s *correlate.Snapshot, group string) groupView {
	var v groupView
	for _, g := range s.Groups {
		if g.Group != group {
			continue
		}
		for _, gen := range g.Generations {
			var ms []string
			for _, m := range gen.Members {
				ms = append(ms, fmt.Sprintf("%s(%s)=%v", m.ClientID, m.MemberID, m.Assignment))
			}
			v.Generations = append(v.Generations, fmt.Sprintf("gen %d %s leader %s: %s", gen.Generation, gen.Protocol, gen.Leader, strings.Join(ms, " ")))
		}
		for _, m := range g.Members {
			v.Members = append(v.Members, fmt.Sprintf("%s %s %s gen %d", m.ClientID, m.MemberID, m.Status, m.Generation))
		}
		for _, p := range g.Partitions {
			for _, c := range p.Commits {
				v.Commits = append(v.Commits, fmt.Sprintf("%s/%d %d by %s gen %d err %d", p.Topic, p.Partition, c.Offset, c.ClientID, c.Generation, c.ErrorCode))
			}
			if p.Committed != nil {
				v.Commits = append(v.Commits, fmt.Sprintf("%s/%d committed %d", p.Topic, p.Partition, *p.Committed))
			}
		}
	}
	sort.Strings(v.Members)
	return v
}

// allLeft is true once the group has n members, none of them live.
func allLeft(group string, n int) func(*correlate.Snapshot) bool {
	return func(s *correlate.Snapshot) bool {
		for _, g := range s.Groups {
			if g.Group != group || len(g.Members) != n {
				continue
			}
			for _, m := range g.Members {
				if m.Status == "live" {
					return false
				}
			}
			return true
		}
		return false
	}
}

// TestEBPFGroup runs a 3-member kgo group against a kfake cluster, all as
// separate processes: members join one at a time, one leaves, then the
// others. The eBPF capture and a packet capture of lo, running together,
// must show the same generations, members, assignments and commits; the
// eBPF one must map each member to its process.
func TestEBPFGroup(t *testing.T) {
	const topic, group, parts = "orders", "billing", 6
	broker := startChild(t, "broker", childSpec{Topic: topic, Partitions: parts})
	addrs := broker.waitReady(t, "broker")
	ports := portsOf(addrs)
	brokers := strings.Split(addrs, ",")

	ebpfSrc := openEBPF(t, &capture.EBPFOptions{TickEvery: 100 * time.Millisecond}, ports)
	p, _ := capture.ParsePorts(ports)
	pktSrc, err := capture.OpenLive(&capture.LiveOptions{Interface: "lo", TickEvery: 100 * time.Millisecond}, &capture.Options{Ports: p})
	if err != nil {
		ebpfSrc.Close()
		t.Fatalf("packet capture on lo: %v", err)
	}
	t.Logf("hooks: %s", ebpfSrc.Hooks())
	viaEBPF, viaPackets := newAnalysis("ebpf"), newAnalysis("packets")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ebpfDone, pktDone := viaEBPF.run(ctx, ebpfSrc), viaPackets.run(ctx, pktSrc)

	prod := startChild(t, "producer", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, ClientID: "producer"})
	prod.waitReady(t, "producer")
	members := map[string]*child{}
	for _, id := range []string{"member-a", "member-b", "member-c"} {
		members[id] = startChild(t, "member", childSpec{Brokers: brokers, Topic: topic, Partitions: parts, Group: group, ClientID: id})
		members[id].waitReady(t, id)
	}
	for _, id := range []string{"member-b", "member-a", "member-c"} {
		members[id].stop(t)
	}
	prod.stop(t)
	for _, a := range []*analysis{viaEBPF, viaPackets} {
		a.wait(t, "every member to leave", allLeft(group, 3))
	}
	cancel()
	for name, done := range map[string]<-chan error{"ebpf": ebpfDone, "packets": pktDone} {
		if err := <-done; err != nil && err != context.Canceled {
			t.Errorf("%s capture: %v", name, err)
		}
	}

	got, want := viewOf(&viaEBPF.snap, group), viewOf(&viaPackets.snap, group)
	if len(want.Generations) < 3 || len(want.Members) != 3 || len(want.Commits) == 0 {
		t.Fatalf("the packet capture shows too little to compare: %s", dump(want))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("eBPF and packet captures disagree (-packets +ebpf):\n-%s\n+%s", dump(want), dump(got))
	}
	checkPIDs(t, viaEBPF, members, broker.pid())
	checkHoledFetches(t, viaEBPF, viaPackets)

	st := ebpfSrc.Stats()
	t.Logf("ebpf: %+v", *st.EBPF)
	t.Logf("ebpf: %d gaps (%d bytes), anomalies %v; packets: anomalies %v", st.Gaps, st.GapBytes, viaEBPF.anomalies, viaPackets.anomalies)
	if st.EBPF.RingDrops != 0 || st.EBPF.KernelEvents != st.EBPF.Events {
		t.Errorf("ring buffer: %d drops, %d events submitted, %d read; want no drops, all read", st.EBPF.RingDrops, st.EBPF.KernelEvents, st.EBPF.Events)
	}
}

// checkHoledFetches checks that the Fetch responses the eBPF capture
// decoded with records not copied (--snap) carry every other field as the
// packet capture saw them.
func checkHoledFetches(t *testing.T, viaEBPF, viaPackets *analysis) {
	t.Helper()
	st := viaEBPF.dec.Stats()
	t.Logf("ebpf: %d Fetch responses decoded, %d of them with records not copied, %d bodies lost to holes outside records; %d bytes not copied, %d frames lost",
		len(viaEBPF.fetches), len(viaEBPF.holed), len(viaEBPF.lost), st.NotCopiedBytes, st.NotCopiedFrames)
	if len(viaEBPF.holed) == 0 {
		t.Errorf("no Fetch response was decoded with records not copied: the hole-aware path was not exercised")
	}
	for _, k := range viaEBPF.holed {
		if got, want := viaEBPF.fetches[k], viaPackets.fetches[k]; got != want {
			t.Errorf("Fetch %s decoded around holes:\n got  %s\n want %s (packet capture)", k, got, want)
		}
	}
}

// checkPIDs checks that every member's requests came from its process,
// and that no connection was attributed to the broker.
func checkPIDs(t *testing.T, a *analysis, members map[string]*child, broker uint32) {
	t.Helper()
	byClient := map[string]correlate.Member{} // client id -> member
	for _, g := range a.snap.Groups {
		for _, m := range g.Members {
			byClient[m.ClientID] = m
		}
	}
	for id, c := range members {
		m, ok := byClient[id]
		if !ok {
			t.Errorf("member %s not in the eBPF capture", id)
			continue
		}
		mid := m.MemberID
		if m.PID != c.pid() || m.Comm == "" {
			t.Errorf("member %s (%s) in the snapshot: pid %d comm %q, want pid %d and a comm", id, mid, m.PID, m.Comm, c.pid())
		}
		if want := map[uint32]bool{c.pid(): true}; !reflect.DeepEqual(a.memberPIDs[mid], want) {
			t.Errorf("member %s (%s): pids %v, want {%d}", id, mid, a.memberPIDs[mid], c.pid())
		}
	}
	for _, c := range a.conns {
		switch {
		case c.Process == nil:
			t.Errorf("connection %d %s -> %s has no process", c.ID, c.Client, c.Server)
		case c.Process.PID == broker:
			t.Errorf("connection %d %s -> %s attributed to the broker's process", c.ID, c.Client, c.Server)
		}
	}
}

func dump(v groupView) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
