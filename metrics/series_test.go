package metrics

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/gen"
)

// restarts is a consumer restarted n times: one kgo consumer after
// another in group restart-group, each with the same client id, joining,
// reading the record produced for it, committing and leaving, as a
// service's consumer does at every deploy. Each is a new member id.
func restarts(n int) gen.Scenario {
	const topic, group = "restart-orders", "restart-group"
	return gen.Scenario{
		Name:    "restarts",
		Options: gen.Options{Brokers: 1, Kfake: []kfake.Opt{kfake.SeedTopics(3, topic)}},
		Timeout: 5 * time.Minute,
		Run: func(ctx context.Context, c *gen.Cluster) error {
			prod, err := c.Kgo(kgo.ClientID("restart-producer"), kgo.DefaultProduceTopic(topic))
			if err != nil {
				return err
			}
			for i := range n {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "order %d", i)}).FirstErr(); err != nil {
					return err
				}
				cl, err := c.Kgo(kgo.ClientID("restart-consumer"), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
					kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					return err
				}
				got := 0
				for got == 0 && ctx.Err() == nil {
					fs := cl.PollFetches(ctx)
					got += fs.NumRecords()
				}
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					return fmt.Errorf("consumer %d: commit: %w", i, err)
				}
				cl.Close() // leaves the group
			}
			return ctx.Err()
		},
	}
}

// seriesHandler feeds an exporter and a correlator and, after each
// exchange that made a member join, gives the exporter a snapshot and
// scrapes it: what Prometheus would store over the run is the union of
// the series of every scrape.
type seriesHandler struct {
	t     *testing.T
	x     *Exporter
	corr  *correlate.Correlator
	joins int
	// union holds every series seen; at[i] is its size after join i+1.
	union map[string]bool
	at    []int
}

func (h *seriesHandler) Exchange(e *decode.Exchange) {
	h.x.Exchange(e)
	joins := h.joins
	h.corr.Exchange(e)
	if h.joins == joins {
		return
	}
	h.x.Snapshot(h.corr.Snapshot())
	for series := range scrape(h.t, h.x) {
		if name, _, _ := strings.Cut(series, "{"); !clientFamily(name) {
			h.union[series] = true
		}
	}
	h.at = append(h.at, len(h.union))
}

func (h *seriesHandler) Anomaly(*decode.Anomaly) {}

// TestSeriesBoundedAcrossRestarts: over 100 restarts of a consumer (a new
// member id each, kgo against kfake, captured by the generator's tap) the
// series exported stay the same once the group is known: the union of
// every scrape, which is what Prometheus keeps, does not grow with the
// restarts. With --metrics-member-info, it grows by one series a restart,
// which is why that is opt-in.
func TestSeriesBoundedAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 100 consumer restarts against kfake")
	}
	const n = 100
	dir := t.TempDir()
	start := time.Now()
	if _, err := gen.Run(context.Background(), restarts(n), dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d restarts captured in %v", n, time.Since(start).Round(time.Millisecond))
	for _, memberInfo := range []bool{false, true} {
		h := &seriesHandler{t: t, x: New(&Options{MemberInfo: memberInfo}), union: map[string]bool{}}
		h.corr = correlate.New(nil, correlate.SinkFunc(func(ev correlate.Event) {
			h.x.Event(ev)
			if m, ok := ev.(*correlate.MemberEvent); ok && m.Action == "joined" {
				h.joins++
			}
		}))
		src, err := capture.OpenFiles([]string{filepath.Join(dir, "restarts.pcapng")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Run(context.Background(), decode.New(h, nil)); err != nil {
			t.Fatal(err)
		}
		if len(h.at) != n {
			t.Fatalf("member info %v: %d members joined, want %d", memberInfo, len(h.at), n)
		}
		after10, after100 := h.at[9], h.at[n-1]
		t.Logf("member info %v: %d series after 1 member, %d after 10, %d after %d", memberInfo, h.at[0], after10, after100, n)
		switch grew := after100 - after10; {
		case !memberInfo && grew > 5:
			t.Errorf("the series grew by %d from the 10th to the %dth restart: a label takes a value per restart", grew, n)
		case memberInfo && grew < n-10-5:
			t.Errorf("with member info the series grew by only %d over %d restarts: the test does not see a member_id label", grew, n-10)
		}
	}
}
