package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate"
	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
)

// publishFiles runs one agent per capture file (agent host bN, run 1),
// through the agent's own code fed by capture.OpenFiles, to url.
func publishFiles(t *testing.T, url string, files []string) (batches int) {
	t.Helper()
	var specs []agentSpec
	for i, f := range files {
		specs = append(specs, agentSpec{host: fmt.Sprintf("b%d", i), files: []string{f}})
	}
	return publishAgents(t, url, specs)
}

// agentSpec is one file-fed agent: its host and run (0: 1), its capture
// files, a clock skew added to every time it publishes (a host whose
// clock is off), and the capture times before and after which it sees
// nothing (zero: none).
type agentSpec struct {
	host       string
	run        uint64
	files      []string
	skew       time.Duration
	since, cut time.Time
	// keyFile signs its batches as kwire live --publish-key-file does
	// (the key must be the host's); forgeWith, a forger's, with that key
	// whatever its agent (nil: unsigned).
	keyFile   string
	forgeWith *wire.Key
	// tls are the TLS flags of its --publish (nil: plaintext).
	tls *tlsFlags
}

// publishAgents runs each agent (run 1) through the agent's own code, fed
// by capture.OpenFiles, to url, and returns how many batches they
// published.
func publishAgents(t *testing.T, url string, specs []agentSpec) (batches int) {
	t.Helper()
	for _, a := range specs {
		var cf commonFlags
		cf.register(flag.NewFlagSet("agent", flag.ContinueOnError))
		p := newPipeline(&cf, io.Discard, false)
		files, err := capture.OpenFiles(a.files, &capture.Options{Ports: cf.ports, MaxConns: cf.limits.conns})
		if err != nil {
			t.Fatal(err)
		}
		src := capture.Source(files)
		if !a.cut.IsZero() || !a.since.IsZero() {
			src = cutSource{files, a.since, a.cut}
		}
		pf := &publishFlags{kafka: kafkaFlags{url: url}, bufferMB: 64, keyFile: a.keyFile, name: a.host}
		if a.tls != nil {
			pf.kafka.tlsFiles = *a.tls
		}
		if a.keyFile != "" {
			if pf.key, pf.agentName, err = pf.agentKey(); err != nil || pf.agentName != a.host {
				t.Fatalf("agent %s: key of %q: %v", a.host, pf.agentName, err)
			}
		}
		if a.forgeWith != nil {
			pf.key = a.forgeWith
		}
		pub, err := newPublisher(pf, wire.Agent{Host: a.host, Run: max(a.run, 1)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		pub.maxAge = time.Hour // batches by size only: the same batches every run
		pub.skew = a.skew
		if err := runAgent(context.Background(), src, p, pub); err != nil {
			t.Fatal(err)
		}
		files.Close()
		s := pub.Stats()
		if s.BatchesDropped > 0 || s.Batches == 0 {
			t.Fatalf("agent %s: %+v", a.host, s)
		}
		batches += int(s.Batches)
	}
	return batches
}

// cutSource is a source that sees nothing before since and after cut, as
// an agent started or stopped (or cut off) then would.
type cutSource struct {
	capture.Source
	since, cut time.Time
}

func (s cutSource) Run(ctx context.Context, sink capture.Sink) error {
	return s.Source.Run(ctx, capture.SinkFunc(func(c *capture.Chunk) {
		if !c.Time.Before(s.since) && (s.cut.IsZero() || !c.Time.After(s.cut)) {
			sink.Chunk(c)
		}
	}))
}

// compared are the output lines the aggregator must give as analyze does.
var compared = map[string]bool{"generation": true, "member": true, "commit": true, "hazard": true, "coordinator": true, "summary": true, "anomaly": true}

// normalize returns the compared lines of an NDJSON output, sorted by
// timestamp then text (the order of lines with the same timestamp may
// differ: agents' packets with the same time have no order), and the
// aggregate line. Connection ids are left out: each run numbers its
// connections (analyze in order of first packet, including connections
// that never carried Kafka; the aggregator in order of arrival); the
// connection's endpoints, which stay, identify it.
func normalize(t *testing.T, out []byte) (lines []string, agg *aggregate.Line) {
	t.Helper()
	type keyed struct{ ts, line string }
	var ks []keyed
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if v["type"] == "aggregate" {
			agg = new(aggregate.Line)
			json.Unmarshal([]byte(l), agg)
		}
		if !compared[fmt.Sprint(v["type"])] {
			continue
		}
		aggregate.WithoutConnIDs(v)
		b, _ := json.Marshal(v)
		ks = append(ks, keyed{fmt.Sprint(v["ts"]), string(b)})
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return strings.Compare(a.ts+a.line, b.ts+b.line) })
	for _, k := range ks {
		lines = append(lines, k.line)
	}
	return lines, agg
}

// TestAggregateEqualsAnalyze: three agents, one per broker capture of a
// 3-broker kfake cluster whose consumers' coordinator, partition leaders
// and FindCoordinator targets are different brokers, publish to a fourth
// kfake cluster; kwire aggregate over that topic gives the events and the
// summary kwire analyze gives of the three files. Then the same batches
// delivered twice change nothing but a counter, and a batch missing is
// counted.
func TestAggregateEqualsAnalyze(t *testing.T) {
	for _, set := range []string{"g_xbroker", "altport"} {
		t.Run(set, func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(testdataDir(), set+".b?.pcapng"))
			if len(files) != 3 {
				t.Fatalf("want 3 per-broker captures of %s, have %v", set, files)
			}
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "kwire", "kwire-dup", "kwire-gap"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			from := func(topic string) string { return "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/" + topic }
			publishFiles(t, from("kwire"), files)
			want, _ := normalize(t, runKwire(t, append([]string{"analyze", "--json"}, files...)...))

			got, agg := normalize(t, runKwire(t, "aggregate", "--json", "--from", from("kwire"), "--exit-idle", "1s"))
			compareLines(t, want, got)
			if agg == nil || len(agg.Agents) != 3 || agg.Missing != 0 || agg.Duplicates != 0 || agg.Late != 0 {
				t.Fatalf("aggregate line: %+v", agg)
			}
			t.Logf("%d lines compared; %+v", len(want), agg)
			batches := 0
			for _, a := range agg.Agents {
				batches += int(a.Batches)
				if a.State != "stopped" {
					t.Errorf("agent %s: state %s, want stopped", a.Agent, a.State)
				}
			}

			// Every batch twice (producer retries): only the counter moves.
			// One batch of agent b1 gone: counted missing.
			copyTopic(t, c.ListenAddrs(), "kwire", batches, map[string]func(*wire.Batch) int{
				"kwire-dup": func(*wire.Batch) int { return 2 },
				"kwire-gap": func(b *wire.Batch) int {
					if b.Agent.Host == "b1" && b.Seq == 2 {
						return 0
					}
					return 1
				},
			})
			got, agg = normalize(t, runKwire(t, "aggregate", "--json", "--from", from("kwire-dup"), "--exit-idle", "1s"))
			compareLines(t, want, got)
			if agg == nil || agg.Duplicates != int64(batches) || agg.Missing != 0 {
				t.Errorf("duplicates: aggregate line %+v, want %d duplicate batches", agg, batches)
			}
			_, agg = normalize(t, runKwire(t, "aggregate", "--json", "--from", from("kwire-gap"), "--exit-idle", "1s"))
			if agg == nil || agg.Missing != 1 || agg.Duplicates != 0 {
				t.Errorf("gap: aggregate line %+v, want 1 record missing", agg)
			}
		})
	}
}

func compareLines(t *testing.T, want, got []string) {
	t.Helper()
	if slices.Equal(want, got) {
		return
	}
	var b strings.Builder
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i, w, g)
			if b.Len() > 4000 {
				break
			}
		}
	}
	t.Errorf("aggregate differs from analyze (-analyze +aggregate), %d vs %d lines:\n%s", len(want), len(got), b.String())
}

// copyTopic reads n records of topic from and produces each batch to
// every topic of to as many times as its function says.
func copyTopic(t *testing.T, brokers []string, from string, n int, to map[string]func(*wire.Batch) int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(from), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if len(recs) != n {
		t.Fatalf("read %d records of %s, want %d", len(recs), from, n)
	}
	for topic, times := range to {
		for _, r := range recs {
			b, err := wire.Decode(bytes.Clone(r.Value), nil)
			if err != nil {
				t.Fatal(err)
			}
			for range times(b) {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
