package realgen

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/internal/realkafka"
)

// exactConsumption are the scenarios where every record a group's Fetches
// delivered reached its application exactly once (no record fetched and
// dropped by a rebalance or a close): kwire's records per member and
// partition must be the clients' consumed reports.
// (Not r_worker: rk-w3 resumes at 51, inside the batch of records 32..51,
// which the broker sends whole and kwire counts whole, as delivered.)
var exactConsumption = map[string]bool{
	// Both consumers own their partitions before the first record is
	// written, and every record is consumed before they close.
	"r_coordclose": true,
}

// fcClosed are the scenarios of field report 1: the capture must show each
// member's FindCoordinator connection closed while its group went on.
var fcClosed = map[string]bool{"r_coordclose": true}

// groupReports are truth's client reports of group (consumed: a poll's
// records per partition; processed and held: a worker's, field report 4;
// committed: an accepted commit, from the client's interceptor).
func groupReports(truth Truth, group string) []Report {
	var out []Report
	for _, raw := range truth.Reports {
		var r Report
		if json.Unmarshal(raw, &r) == nil && r.Group == group {
			out = append(out, r)
		}
	}
	return out
}

// checkLost compares kwire's commit_gap hazards with what a worker group
// (field report 4: reports of records processed) lost: every record below
// the committed offset __consumer_offsets holds that no client processed
// (a worker's processed reports; a plain consumer processes what it
// consumed). Each such record must be a missing offset of a commit_gap
// hazard of its partition, and each hazard must name a commit the broker
// accepted (an offset commit record), the commit record before it as its
// previous offset, and the member whose client reported that commit.
func checkLost(t *testing.T, truth Truth, gt GroupTruth, s *correlate.Snapshot) {
	t.Helper()
	rs := groupReports(truth, gt.Group)
	done := processings(rs)
	if done == nil {
		return
	}
	committer := map[string]string{} // "topic/p@offset" -> member id of the client that reported it accepted
	for _, r := range rs {
		if r.Kind != "committed" {
			continue
		}
		for topic, ps := range r.Offsets {
			for part, o := range ps {
				committer[fmt.Sprintf("%s/%s@%d", topic, part, o)] = r.MemberID
			}
		}
	}
	want := map[string][]int64{}
	for p, end := range gt.Committed {
		for o := int64(0); o < end; o++ {
			if done[p][o] == 0 {
				want[p] = append(want[p], o)
			}
		}
	}
	got := map[string][]int64{}
	for _, h := range s.Hazards {
		if h.Kind != correlate.HazardCommitGap || h.Group != gt.Group || h.Partition == nil || h.Offset == nil || h.PreviousOffset == nil {
			continue
		}
		p := fmt.Sprintf("%s/%d", h.Topic, *h.Partition)
		got[p] = append(got[p], h.MissingOffsets...)
		prev := int64(-1)
		accepted := false
		for _, c := range gt.Commits {
			if fmt.Sprintf("%s/%d", c.Topic, c.Partition) != p {
				continue
			}
			if c.Offset == *h.Offset {
				accepted = true
				break
			}
			prev = c.Offset
		}
		if !accepted || prev != *h.PreviousOffset {
			t.Errorf("group %s %s: commit_gap names commit %d after %d; the offset commit records have %d after %d (accepted: %v)",
				gt.Group, p, *h.Offset, *h.PreviousOffset, *h.Offset, prev, accepted)
		}
		if m := committer[fmt.Sprintf("%s@%d", p, *h.Offset)]; m != h.MemberID {
			t.Errorf("group %s %s: commit_gap names member %s for commit %d; the client that reported it: %q", gt.Group, p, h.MemberID, *h.Offset, m)
		}
	}
	for p := range got {
		slices.Sort(got[p])
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: records below the committed offset that no client processed, the clients' reports vs kwire's commit_gap missing offsets (-want +got):\n%s", gt.Group, d)
	}
	t.Logf("group %s: never processed %v; kwire commit_gap missing %v", gt.Group, want, got)
}

// checkConsumption compares what kwire attributes to g's members with
// what the clients consumed (consumed reports), per client and
// partition, and the group's records per partition; no Fetch of the
// scenario is unattributed or ambiguous.
func checkConsumption(t *testing.T, truth Truth, g *correlate.Group, s *correlate.Snapshot) {
	t.Helper()
	want := map[string]int64{} // "client topic/p" -> records
	wantGroup := map[string]int64{}
	for _, r := range groupReports(truth, g.Group) {
		if r.Kind != "consumed" {
			continue
		}
		p := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		want[r.ClientID+" "+p] += r.Records
		wantGroup[p] += r.Records
	}
	got := map[string]int64{}
	for _, m := range g.Members {
		for _, f := range m.Fetched {
			if f.Records > 0 {
				got[fmt.Sprintf("%s %s/%d", m.ClientID, f.Topic, f.Partition)] += f.Records
			}
		}
	}
	gotGroup := map[string]int64{}
	for _, p := range g.Partitions {
		if p.Records > 0 {
			gotGroup[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Records
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" {
		t.Errorf("group %s: records by client and partition, consumed reports vs kwire's members' fetches (-want +got):\n%s", g.Group, d)
	}
	if d := realkafka.DiffMaps(wantGroup, gotGroup); d != "" {
		t.Errorf("group %s: records by partition, consumed reports vs kwire's group (-want +got):\n%s", g.Group, d)
	}
	for _, u := range s.Unattributed {
		t.Errorf("kwire left client %s on %s's fetches unattributed (%s, candidates %v)", u.ClientID, u.ClientHost, u.Status, u.Candidates)
	}
	if st := s.Stats; st.FetchesAmbiguous != 0 || st.FetchesUnknown != 0 {
		t.Errorf("kwire: %d fetches ambiguous, %d unattributed; every consumer is in one group", st.FetchesAmbiguous, st.FetchesUnknown)
	}
	t.Logf("group %s: records consumed %v; kwire %v", g.Group, wantGroup, gotGroup)
}

// readExchange is an exchange line of kwire read --json.
type readExchange struct {
	Type     string    `json:"type"`
	TS       time.Time `json:"ts"`
	API      string    `json:"api"`
	ClientID string    `json:"client_id"`
	Conn     struct {
		ID     uint64 `json:"id"`
		Client string `json:"client"`
		Broker string `json:"broker"`
	} `json:"conn"`
}

// groupRequest: the APIs of a consumer's group traffic.
var groupRequest = []string{"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch", "LeaveGroup", "Fetch"}

// checkFCClosed checks that the capture shows field report 1's mechanism,
// and kwire keeps the group through it: each member's client asked
// FindCoordinator (kwire read) on a connection to a broker that is not
// the group's coordinator, which carried none of its group requests and
// closed (a FIN or RST in the capture) before the client's last commit;
// the commits it made after are the group's in kwire (checkCommits holds
// them to __consumer_offsets), and kwire's binding of the client to the
// group says it was learned from that FindCoordinator, on that
// connection: it outlived it.
func checkFCClosed(t *testing.T, kwire string, truth Truth, g *correlate.Group, s *correlate.Snapshot) {
	t.Helper()
	capture := filepath.Join(realDir, truth.Capture)
	var xs []readExchange
	sc := bufio.NewScanner(bytes.NewReader(runKwire(t, kwire, "read", capture, truth.Ports, truth.KwireArgs...)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var x readExchange
		if json.Unmarshal(sc.Bytes(), &x) == nil && x.Type == "exchange" {
			xs = append(xs, x)
		}
	}
	ends := connEnds(t, capture)
	coord := fmt.Sprintf("%s:%d", g.Coordinator.Host, g.Coordinator.Port)
	clients := map[string]bool{}
	for _, m := range g.Members {
		clients[m.ClientID] = true
	}
	for _, client := range slices.Sorted(maps.Keys(clients)) {
		fc := map[uint64]readExchange{}
		var lastCommit time.Time
		for _, x := range xs {
			switch {
			case x.ClientID != client:
			case x.API == "FindCoordinator":
				fc[x.Conn.ID] = x
			case x.API == "OffsetCommit":
				lastCommit = x.TS
			}
		}
		if len(fc) == 0 {
			t.Errorf("group %s: client %s sent no FindCoordinator", g.Group, client)
		}
		var closed time.Time
		for id, x := range fc {
			end, ok := ends[x.Conn.Client+">"+x.Conn.Broker]
			switch {
			case x.Conn.Broker == coord:
				t.Errorf("group %s: %s asked FindCoordinator of the coordinator %s (connection %d)", g.Group, client, coord, id)
			case !ok:
				t.Errorf("group %s: %s's FindCoordinator connection %d (%s) does not close in the capture", g.Group, client, id, x.Conn.Client)
			case !end.Before(lastCommit):
				t.Errorf("group %s: %s's FindCoordinator connection %d closed at %s, not before its last commit at %s", g.Group, client, id, end, lastCommit)
			}
			if end.After(closed) {
				closed = end
			}
			for _, y := range xs {
				if y.Conn.ID == id && slices.Contains(groupRequest, y.API) {
					t.Errorf("group %s: %s's FindCoordinator connection %d carried %s too", g.Group, client, id, y.API)
				}
			}
		}
		bound := false
		for _, cl := range s.Clients {
			for _, b := range cl.Bindings {
				if _, ok := fc[b.LearnedOnConn]; ok && cl.ClientID == client && b.Group == g.Group && b.LearnedFrom == "FindCoordinator" {
					bound = true
				}
			}
		}
		if !bound {
			t.Errorf("group %s: kwire's binding of %s to the group is not the one its FindCoordinator taught", g.Group, client)
		}
		after := 0
		for _, p := range g.Partitions {
			for _, c := range p.Commits {
				if c.ClientID == client && c.ErrorCode == 0 && c.TS.After(closed) {
					after++
				}
			}
		}
		if after == 0 {
			t.Errorf("group %s: kwire has no commit of %s's after its FindCoordinator connection closed at %s", g.Group, client, closed)
		}
		t.Logf("group %s: %s's FindCoordinator connections closed by %s; kwire: %d of its commits after that", g.Group, client, closed.Format("15:04:05.000"), after)
	}
}

// connEnds reads a capture (pcapng, Ethernet) and returns the time of
// each TCP connection's first FIN or RST, by "client>broker" (ip:port,
// the client being the SYN's sender).
func connEnds(t *testing.T, path string) map[string]time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	client := map[string]string{} // either direction's "a>b" -> the connection's "client>broker"
	ends := map[string]time.Time{}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			return ends
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		p := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		ip, _ := p.NetworkLayer().(*layers.IPv4)
		tcp, _ := p.TransportLayer().(*layers.TCP)
		if ip == nil || tcp == nil {
			continue
		}
		src, dst := fmt.Sprintf("%s:%d", ip.SrcIP, tcp.SrcPort), fmt.Sprintf("%s:%d", ip.DstIP, tcp.DstPort)
		if tcp.SYN && !tcp.ACK {
			client[src+">"+dst], client[dst+">"+src] = src+">"+dst, src+">"+dst
		}
		k, ok := client[src+">"+dst]
		if !ok || !(tcp.FIN || tcp.RST) {
			continue
		}
		if _, seen := ends[k]; !seen {
			ends[k] = ci.Timestamp
		}
	}
}

// regression is a commit below the one accepted before it.
type regression struct {
	Partition        string
	Offset, Previous int64
}

// checkRegressions compares kwire's commit_regression hazards with the
// offset commit records: in log order, per partition, a commit below the
// previous one opens an episode (kwire tells its first commit, with the
// one before), which ends once a commit reaches the highest offset
// committed before it went back; regressions inside an open episode are
// the same hazard. Each scenario's regressions are commits of the group's
// members (none by an admin tool, which is another hazard).
func checkRegressions(t *testing.T, gt GroupTruth, s *correlate.Snapshot) {
	t.Helper()
	type state struct {
		prev, high int64
		known      bool
	}
	parts := map[string]*state{}
	var want []regression
	for _, c := range gt.Commits {
		if c.Offset < 0 {
			continue
		}
		p := fmt.Sprintf("%s/%d", c.Topic, c.Partition)
		st := parts[p]
		if st == nil {
			st = &state{high: -1}
			parts[p] = st
		}
		switch {
		case st.known && c.Offset < st.prev:
			if st.high < 0 {
				want = append(want, regression{p, c.Offset, st.prev})
			}
			st.high = max(st.high, st.prev)
		case st.high >= 0 && c.Offset >= st.high:
			st.high = -1
		}
		st.prev, st.known = c.Offset, true
	}
	var got []regression
	for _, h := range s.Hazards {
		if h.Kind == correlate.HazardCommitRegression && h.Group == gt.Group && h.Partition != nil && h.Offset != nil && h.PreviousOffset != nil {
			got = append(got, regression{fmt.Sprintf("%s/%d", h.Topic, *h.Partition), *h.Offset, *h.PreviousOffset})
		}
	}
	order := func(a, b regression) int {
		if a.Partition != b.Partition {
			return strings.Compare(a.Partition, b.Partition)
		}
		return cmp.Compare(a.Previous, b.Previous)
	}
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if !slices.Equal(want, got) {
		t.Errorf("group %s: commits that moved the committed offset back (partition, offset, previous), offset commit records %v, kwire's commit_regression %v",
			gt.Group, want, got)
	}
	if len(want) > 0 {
		t.Logf("group %s: %d regressions of the committed offset: %v", gt.Group, len(want), want)
	}
}

// checkReplayed compares what kwire says a worker group (field report 4:
// reports of records processed) processes again with the clients'
// reports: the records two processings (a worker's processed reports; a
// plain consumer processes what it consumed) name. kwire's count is the
// verdict's: the warn and critical hazards' replayed records, counted once
// where their ranges overlap; its ranges must name those records.
func checkReplayed(t *testing.T, truth Truth, gt GroupTruth, s *correlate.Snapshot) {
	t.Helper()
	times := processings(groupReports(truth, gt.Group))
	if times == nil {
		return
	}
	want := map[string][]int64{}
	var wantN int64
	for p, os := range times {
		for o, n := range os {
			if n > 1 {
				want[p] = append(want[p], o)
				wantN++
			}
		}
		slices.Sort(want[p])
	}
	spans := map[string]*correlate.Spans{}
	var unranged int64
	for i := range s.Hazards {
		h := &s.Hazards[i]
		im, ok := h.Impact()
		if h.Group != gt.Group || !ok || im.What != correlate.ImpactReplayed || correlate.SeverityRank(h.Severity) < 2 {
			continue
		}
		if !im.Ranged {
			unranged += im.N
			continue
		}
		p := fmt.Sprintf("%s/%d", im.Topic, im.Partition)
		if spans[p] == nil {
			spans[p] = &correlate.Spans{}
		}
		spans[p].Add(correlate.Span{First: im.First, Last: im.Last})
	}
	got := map[string][]int64{}
	gotN := unranged
	for p, ss := range spans {
		gotN += ss.Count()
		for _, sp := range *ss {
			for o := sp.First; o <= sp.Last; o++ {
				got[p] = append(got[p], o)
			}
		}
	}
	if d := realkafka.DiffMaps(want, got); d != "" || gotN != wantN {
		t.Errorf("group %s: records processed twice, the clients' reports (%d) vs kwire's replayed records (%d, %d of them unranged) (-want +got):\n%s",
			gt.Group, wantN, gotN, unranged, d)
	}
	t.Logf("group %s: processed again %v; kwire %d records", gt.Group, want, gotN)
}

// processings counts, by "topic/partition" and offset, how many times the
// group's clients processed each record: a worker's processed reports,
// and what a plain consumer consumed. nil when no client of rs is a
// worker (the checks that read it are for worker scenarios).
func processings(rs []Report) map[string]map[int64]int {
	workers := map[string]bool{}
	for _, r := range rs {
		if r.Kind == "processed" || r.Kind == "held" {
			workers[r.ClientID] = true
		}
	}
	if len(workers) == 0 {
		return nil
	}
	times := map[string]map[int64]int{}
	mark := func(p string, o int64) {
		if times[p] == nil {
			times[p] = map[int64]int{}
		}
		times[p][o]++
	}
	for _, r := range rs {
		p := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		switch {
		case r.Kind == "processed":
			mark(p, r.Offset)
		case r.Kind == "consumed" && !workers[r.ClientID]:
			for o := r.FirstOffset; o <= r.LastOffset; o++ {
				mark(p, o)
			}
		}
	}
	return times
}
