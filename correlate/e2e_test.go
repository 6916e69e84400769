package correlate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
}

func (p *pipeline) Exchange(e *decode.Exchange) { p.c.Exchange(e) }
func (p *pipeline) Anomaly(*decode.Anomaly)     {}
func (p *pipeline) Chunk(ch *capture.Chunk) {
	if ch.Time.After(p.last) {
		p.last = ch.Time
	}
	p.dec.Chunk(ch)
}

// analyze runs capture files through capture, decode and a Correlator.
func analyze(t *testing.T, files ...string) (*Correlator, *recorder) {
	t.Helper()
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join("..", "testdata", f)
	}
	src, err := capture.OpenFiles(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rec := &recorder{}
	p := &pipeline{c: New(nil, rec)}
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
		t.Run(tr.Case, func(t *testing.T) {
			c, rec := analyze(t, tr.Captures[0].File)
			s := c.Snapshot()
			checkCommitted(t, tr, s)
			checkConsumption(t, tr, s)
			checkGroups(t, tr, s, rec)
		})
	}
}

// checkCommitted: each group's committed offsets, rebuilt from its
// OffsetCommits, are the broker's at the end.
func checkCommitted(t *testing.T, tr *truth, s *Snapshot) {
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
func checkConsumption(t *testing.T, tr *truth, s *Snapshot) {
	if s.Stats.FetchesAmbiguous != 0 {
		t.Errorf("%d ambiguous fetches, want 0", s.Stats.FetchesAmbiguous)
	}
	if len(tr.Committed) > 0 && s.Stats.FetchesUnknown != 0 {
		t.Errorf("%d unattributed fetches in a capture whose consumers are all group members", s.Stats.FetchesUnknown)
	}
	if tr.FetchBatches == nil || tr.Edit != nil {
		return // no kgo consumer, or frames left out of the file
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
}

// TestPerBrokerFiles: captures taken per broker and analysed together give
// the groups, members and consumption of the combined capture.
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
			var split []string
			for _, cp := range tr.Captures[1:] {
				split = append(split, cp.File)
			}
			want := splitInvariant(analyze(t, tr.Captures[0].File))
			got := splitInvariant(analyze(t, split...))
			if d := diff(want, got); d != "" {
				t.Errorf("per-broker files vs combined file (-want +got):\n%s", d)
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
