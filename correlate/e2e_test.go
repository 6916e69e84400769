package correlate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// pipeline feeds the decoder's exchanges to a Correlator and remembers the
// latest capture time, for Close.
type pipeline struct {
	c    *Correlator
	dec  *decode.Decoder
	last time.Time
	tap  func(*decode.Exchange) // sees every exchange first, if set
	atap func(*decode.Anomaly)  // sees every anomaly first, if set
}

func (p *pipeline) Exchange(e *decode.Exchange) {
	if p.tap != nil {
		p.tap(e)
	}
	p.c.Exchange(e)
}
func (p *pipeline) Anomaly(a *decode.Anomaly) {
	if p.atap != nil {
		p.atap(a)
	}
	p.c.Anomaly(a)
}
func (p *pipeline) ConnClosed(c *capture.Conn, at time.Time, reason capture.CloseReason) {
	p.c.ConnClosed(c, at, reason)
}
func (p *pipeline) Chunk(ch *capture.Chunk) {
	if ch.Time.After(p.last) {
		p.last = ch.Time
	}
	p.dec.Chunk(ch)
}

// analyze runs capture files through capture, decode and a Correlator.
func analyze(t *testing.T, files ...string) (*Correlator, *recorder) {
	t.Helper()
	return analyzeTap(t, nil, files...)
}

// analyzeTap is analyze with tap called on every decoded exchange.
func analyzeTap(t *testing.T, tap func(*decode.Exchange), files ...string) (*Correlator, *recorder) {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join("..", "testdata", f)
	}
	return analyzePaths(t, tap, paths...)
}

// analyzePaths is analyzeTap of files anywhere.
func analyzePaths(t *testing.T, tap func(*decode.Exchange), paths ...string) (*Correlator, *recorder) {
	t.Helper()
	return analyzeTaps(t, &pipeline{tap: tap}, paths...)
}

// analyzeTaps is analyzePaths with p's taps.
func analyzeTaps(t *testing.T, p *pipeline, paths ...string) (*Correlator, *recorder) {
	t.Helper()
	src, err := capture.OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rec := &recorder{}
	p.c = New(nil, rec)
	p.dec = decode.New(p, nil)
	if err := src.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	p.c.Close(p.last)
	return p.c, rec
}

// truth is the part of a generator truth file (internal/gen) these tests
// use: facts recorded from the clients and the broker, not from kwire.
type truth struct {
	Case     string `json:"case"`
	Captures []struct {
		File  string  `json:"file"`
		Nodes []int32 `json:"nodes"`
	} `json:"captures"`
	// FetchBatches: topic -> partition -> what kgo consumers read.
	FetchBatches map[string]map[string]struct {
		Batches int64 `json:"batches"`
		Records int64 `json:"records"`
	} `json:"fetch_batches"`
	// Committed: group -> topic -> partition -> offset (OffsetFetch at the end).
	Committed  map[string]map[string]map[string]int64 `json:"committed"`
	EndOffsets map[string]map[string]int64            `json:"end_offsets"`
	Edit       *struct {
		Kind string `json:"kind"`
	} `json:"edit"`
}

func loadTruth(t *testing.T, path string) *truth {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr truth
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &tr
}

// TestCaptures analyses every generated capture and compares groups,
// commits and consumption with the truth recorded from the clients.
func TestCaptures(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	if len(paths) == 0 {
		t.Skip("no generated captures in testdata (go run ./cmd/kwire-gen)")
	}
	for _, path := range paths {
		tr := loadTruth(t, path)
		gt := loadGroupsTruth(t, path)
		t.Run(tr.Case, func(t *testing.T) {
			// Every file of the capture: a combined one, or the files
			// taken per broker when there is none (g_xbroker), not
			// just the first (one broker's share of the traffic).
			cut := cutShort{}
			c, rec := analyzeTap(t, cut.add, gt.captureFiles()...)
			s := c.Snapshot()
			checkCommitted(t, tr, s)
			checkConsumption(t, tr, gt, s)
			checkGroups(t, tr, gt, s, rec, cut)
		})
	}
}

// checkCommitted: each group's committed offsets, rebuilt from its
// OffsetCommits, are the broker's at the end; and lag is end offset minus
// committed offset everywhere, 0 where the group has consumed to the end
// (issue 41).
func checkCommitted(t *testing.T, tr *truth, s *Snapshot) {
	for _, g := range s.Groups {
		for _, p := range g.Partitions {
			if p.Committed == nil || p.EndOffset == nil {
				if p.Lag != nil {
					t.Errorf("group %s %s/%d: lag %d without a committed and an end offset", g.Group, p.Topic, p.Partition, *p.Lag)
				}
				continue
			}
			if p.Lag == nil || *p.Lag != *p.EndOffset-*p.Committed {
				t.Errorf("group %s %s/%d: lag %v, end %d - committed %d", g.Group, p.Topic, p.Partition, p.Lag, *p.EndOffset, *p.Committed)
			}
		}
	}
	for group, topics := range tr.Committed {
		got := map[string]map[string]int64{}
		for _, p := range findGroup(s, group).Partitions {
			if p.Committed == nil || p.CommittedSource != "commit" {
				continue
			}
			if got[p.Topic] == nil {
				got[p.Topic] = map[string]int64{}
			}
			got[p.Topic][strconv.Itoa(int(p.Partition))] = *p.Committed
		}
		if d := diff(topics, got); d != "" {
			t.Errorf("group %s committed offsets from commits (-want +got):\n%s", group, d)
		}
	}
}

// checkConsumption: what the Fetches delivered, over every group and the
// unattributed clients, is what the consumers read; with a group per
// consumer, every Fetch is attributed.
//
// fetch_batches counts only the in-process kgo clients (a SIGKILLed child
// never reports its counts), while groups.<g>.fetched counts the batches
// every member read, children included, as they read them: where the truth
// has groups, their fetched records are the complete count to compare, and
// the batches of fetch_batches are compared for the partitions it covers
// completely (its records equal the groups').
func checkConsumption(t *testing.T, tr *truth, gt *groupsTruth, s *Snapshot) {
	if s.Stats.FetchesAmbiguous != 0 {
		t.Errorf("%d ambiguous fetches, want 0", s.Stats.FetchesAmbiguous)
	}
	if len(tr.Committed) > 0 && s.Stats.FetchesUnknown != 0 {
		t.Errorf("%d unattributed fetches in a capture whose consumers are all group members", s.Stats.FetchesUnknown)
	}
	if tr.Edit != nil {
		return // frames left out of the file
	}
	type count struct{ Batches, Records int64 }
	got := map[string]map[string]count{}
	add := func(topic string, p int32, f Fetch) {
		if f.Batches == 0 {
			return // the consumers' hook sees batches only
		}
		if got[topic] == nil {
			got[topic] = map[string]count{}
		}
		k := strconv.Itoa(int(p))
		c := got[topic][k]
		c.Batches += f.Batches
		c.Records += f.Records
		got[topic][k] = c
	}
	for _, g := range s.Groups {
		for _, p := range g.Partitions {
			add(p.Topic, p.Partition, p.Fetch)
		}
	}
	for _, u := range s.Unattributed {
		for _, p := range u.Partitions {
			add(p.Topic, p.Partition, p.Fetch)
		}
	}
	groupRecords := map[string]map[string]int64{}
	for _, g := range gt.Groups {
		for topic, ps := range g.Fetched {
			if groupRecords[topic] == nil {
				groupRecords[topic] = map[string]int64{}
			}
			for p, n := range ps {
				groupRecords[topic][p] += n
			}
		}
	}
	if len(groupRecords) == 0 {
		if tr.FetchBatches == nil {
			return // no kgo consumer
		}
		want := map[string]map[string]count{}
		for topic, ps := range tr.FetchBatches {
			want[topic] = map[string]count{}
			for p, b := range ps {
				want[topic][p] = count{b.Batches, b.Records}
			}
		}
		if d := diff(want, got); d != "" {
			t.Errorf("batches and records fetched (-want +got):\n%s", d)
		}
		return
	}
	gotRecords := map[string]map[string]int64{}
	for topic, ps := range got {
		gotRecords[topic] = map[string]int64{}
		for p, c := range ps {
			gotRecords[topic][p] = c.Records
		}
	}
	if d := diff(groupRecords, gotRecords); d != "" {
		t.Errorf("records fetched, groups.*.fetched (-want +got):\n%s", d)
	}
	for topic, ps := range tr.FetchBatches {
		for p, b := range ps {
			if b.Records != groupRecords[topic][p] {
				continue // some of its readers were not counted there
			}
			if c := got[topic][p]; c.Batches != b.Batches {
				t.Errorf("%s/%s: %d batches fetched, want %d (fetch_batches)", topic, p, c.Batches, b.Batches)
			}
		}
	}
}

// TestPerBrokerFiles: captures taken per broker and analysed together give
// the groups, members and consumption of the combined capture. Only a
// capture set with a combined file (one capture whose nodes are all the
// brokers) can be compared so; a set taken only per broker (g_xbroker:
// "one capture file per broker, no combined file") is judged against the
// truth by TestCaptures and TestGroupsTruth, and here must at least not
// depend on the order the files are given in.
func TestPerBrokerFiles(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.truth.json"))
	ran := false
	for _, path := range paths {
		tr := loadTruth(t, path)
		if len(tr.Captures) < 2 {
			continue
		}
		ran = true
		t.Run(tr.Case, func(t *testing.T) {
			var combined string
			var split []string
			for _, cp := range tr.Captures {
				if len(cp.Nodes) > 1 {
					combined = cp.File
				} else {
					split = append(split, cp.File)
				}
			}
			if combined != "" {
				want := splitInvariant(analyze(t, combined))
				got := splitInvariant(analyze(t, split...))
				if d := diff(want, got); d != "" {
					t.Errorf("per-broker files vs combined file (-want +got):\n%s", d)
				}
				return
			}
			reversed := slices.Clone(split)
			slices.Reverse(reversed)
			want := splitInvariant(analyze(t, split...))
			got := splitInvariant(analyze(t, reversed...))
			if d := diff(want, got); d != "" {
				t.Errorf("per-broker files %v vs %v (-want +got):\n%s", split, reversed, d)
			}
		})
	}
	if !ran {
		t.Skip("no capture split per broker in testdata")
	}
}

// splitInvariant is what must not depend on how the capture was split:
// everything but connection ids.
func splitInvariant(c *Correlator, rec *recorder) any {
	s := c.Snapshot()
	for i := range s.Clients {
		for j := range s.Clients[i].Bindings {
			s.Clients[i].Bindings[j].LearnedOnConn = 0
		}
	}
	for i := range s.Groups {
		for j := range s.Groups[i].Partitions {
			for k := range s.Groups[i].Partitions[j].Commits {
				s.Groups[i].Partitions[j].Commits[k].Conn.ID = 0
			}
		}
	}
	var events []Event
	for _, ev := range rec.events {
		if ce, ok := ev.(*CommitEvent); ok {
			cp := *ce
			cp.Conn.ID = 0
			ev = &cp
		}
		events = append(events, ev)
	}
	return struct {
		Events   []Event
		Snapshot *Snapshot
	}{events, s}
}
