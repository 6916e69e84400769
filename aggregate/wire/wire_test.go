package wire

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/gen"
	"github.com/kwire/kwire/jsonout"
)

// analysis is a correlator writing its events, anomalies and summary as
// kwire analyze --json does.
type analysis struct {
	buf  bytes.Buffer
	out  *jsonout.Writer
	corr *correlate.Correlator
}

func newAnalysis() *analysis {
	a := &analysis{}
	a.out = jsonout.New(&a.buf, nil)
	a.corr = correlate.New(&correlate.Options{ConsumerSessionTimeout: 45 * time.Second}, correlate.SinkFunc(a.out.Event))
	return a
}

func (a *analysis) Exchange(e *decode.Exchange) { a.corr.Exchange(e) }
func (a *analysis) Anomaly(x *decode.Anomaly)   { a.out.Anomaly(x); a.corr.Anomaly(x) }

func (a *analysis) finish(t testing.TB, end time.Time) []byte {
	a.corr.Close(end)
	a.out.Summary(a.corr.Snapshot())
	if err := a.out.Flush(); err != nil {
		t.Fatal(err)
	}
	return a.buf.Bytes()
}

// roundTrip feeds a decoder's output to direct, and through batches of
// about limit bytes (Encoder, Decode) to viaWire.
type roundTrip struct {
	t               testing.TB
	clock           time.Time
	direct, viaWire *analysis
	// deferred gets the batches decoded with DeferRecords, the record
	// batches expanded into one reused buffer, as the aggregator does.
	deferred       *analysis
	buf            []byte
	enc            *Encoder
	seq            uint64
	limit          int
	batches, bytes int
	published      bytes.Buffer // every batch, for TestNothingSecretPublished
	values         [][]byte     // every batch, one by one (fuzz seeds)
}

func (r *roundTrip) Chunk(c *capture.Chunk) {}

func (r *roundTrip) Exchange(e *decode.Exchange) {
	r.enc.Exchange(r.clock, e)
	r.direct.Exchange(e)
	r.maybeFlush()
}

func (r *roundTrip) Anomaly(a *decode.Anomaly) {
	r.enc.Anomaly(r.clock, a)
	r.direct.Anomaly(a)
	r.maybeFlush()
}

func (r *roundTrip) maybeFlush() {
	if r.enc.Len() >= r.limit {
		r.flush()
	}
}

func (r *roundTrip) flush() {
	if r.enc.Items() > 0 {
		b, err := Decode(bytes.Clone(r.enc.Bytes()), nil)
		if err != nil {
			r.t.Fatalf("batch %d: %v", r.seq, err)
		}
		if b.Seq != r.seq || len(b.Items) != r.enc.Items() {
			r.t.Fatalf("batch %d: got seq %d with %d items, want %d", r.seq, b.Seq, len(b.Items), r.enc.Items())
		}
		r.batches++
		r.bytes += r.enc.Len()
		r.published.Write(r.enc.Bytes())
		r.values = append(r.values, bytes.Clone(r.enc.Bytes()))
		for _, it := range b.Items {
			switch it.Kind {
			case KindExchange:
				r.viaWire.Exchange(it.Exchange)
			case KindAnomaly:
				r.viaWire.Anomaly(it.Anomaly)
			}
		}
		d, err := Decode(bytes.Clone(r.enc.Bytes()), &Options{DeferRecords: true})
		if err != nil {
			r.t.Fatalf("batch %d, records deferred: %v", r.seq, err)
		}
		for i := range d.Items {
			it := &d.Items[i]
			switch it.Kind {
			case KindExchange:
				r.buf = it.ExpandRecords(r.buf)
				r.deferred.Exchange(it.Exchange)
			case KindAnomaly:
				r.deferred.Anomaly(it.Anomaly)
			}
		}
	}
	r.seq++
	r.enc.Reset(r.seq)
}

// clockSink notes each chunk's time before the decoder sees it.
type clockSink struct {
	r   *roundTrip
	dec *decode.Decoder
}

func (s clockSink) Chunk(c *capture.Chunk) {
	if c.Time.After(s.r.clock) {
		s.r.clock = c.Time
	}
	s.dec.Chunk(c)
}

// TestRoundTripCorrelates checks that every exchange and anomaly of every
// committed capture survives Encoder -> Decode such that the correlator's
// events, anomalies and summary are byte for byte those it gives from the
// decoder's own exchanges.
func TestRoundTripCorrelates(t *testing.T) {
	for _, f := range testCaptures(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".pcapng")
		t.Run(name, func(t *testing.T) {
			r := runRoundTrip(t, f)
			want, got := r.direct.finish(t, r.clock), r.viaWire.finish(t, r.clock)
			if !bytes.Equal(want, got) {
				t.Errorf("correlator output differs after the round trip (-direct +wire):\n%s", firstDiff(want, got))
			}
			if got := r.deferred.finish(t, r.clock); !bytes.Equal(want, got) {
				t.Errorf("correlator output differs after the round trip, records deferred (-direct +wire):\n%s", firstDiff(want, got))
			}
			t.Logf("%d batches, %d bytes, %d output bytes", r.batches, r.bytes, len(want))
		})
	}
}

func testCaptures(t testing.TB) []string {
	files, err := filepath.Glob("../../testdata/*.pcapng")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in testdata (%v)", err)
	}
	return files
}

// runRoundTrip reads capture file f through a roundTrip, in batches of
// limit bytes (64 KiB if 0).
func runRoundTrip(t testing.TB, f string, limit ...int) *roundTrip {
	r := &roundTrip{t: t, direct: newAnalysis(), viaWire: newAnalysis(), deferred: newAnalysis(), enc: NewEncoder(Agent{Host: "h", Run: 7}), limit: 64 << 10}
	if len(limit) > 0 {
		r.limit = limit[0]
	}
	r.enc.Reset(0)
	src, err := capture.OpenFiles([]string{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dec := decode.New(r, &decode.Options{DropProduceRecords: true})
	if err := src.Run(context.Background(), clockSink{r, dec}); err != nil {
		t.Fatal(err)
	}
	r.flush()
	return r
}

// TestNothingSecretPublished checks that no record value and no SASL
// password of the committed captures reaches a batch, while the captures
// themselves hold them.
func TestNothingSecretPublished(t *testing.T) {
	// SCRAM (gen.SASLPasswords[1]) never sends its password; PLAIN does.
	secrets := []string{"lorem ipsum dolor", `"kind":"order"`, gen.SASLPasswords[0], gen.SASLPasswords[2]}
	inCaptures := map[string]bool{}
	for _, f := range testCaptures(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := runRoundTrip(t, f)
		for _, s := range secrets {
			inCaptures[s] = inCaptures[s] || bytes.Contains(raw, []byte(s))
			if bytes.Contains(r.published.Bytes(), []byte(s)) {
				t.Errorf("%s: %q was published", filepath.Base(f), s)
			}
		}
	}
	for _, s := range secrets {
		if !inCaptures[s] {
			t.Errorf("no capture holds %q: the test proves nothing for it", s)
		}
	}
}

// firstDiff shows the first differing lines.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "-" + w + "\n+" + g
		}
	}
	return ""
}

// TestEncodeLeavesExchange: encoding a Produce request with records and a
// Fetch response with record batches leaves the exchange as it was (the
// correlator reads it next), and the batch holds no record bytes.
func TestEncodeLeavesExchange(t *testing.T) {
	records := []byte("the records of a produce request, never published")
	batches := []byte("the record batches of a fetch response, published as headers only")
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}, {Partition: 1}}}}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, RecordBatches: batches}}}}
	enc := NewEncoder(Agent{Host: "h", Run: 1})
	enc.Reset(1)
	at := time.Unix(1, 0)
	enc.Exchange(at, &decode.Exchange{Key: 0, Version: 9, Req: req, ReqTime: at})
	enc.Exchange(at, &decode.Exchange{Key: 1, Version: 12, Resp: resp, RespTime: at})
	if got := req.Topics[0].Partitions[0].Records; &got[0] != &records[0] || len(got) != len(records) || req.Topics[0].Partitions[1].Records != nil {
		t.Errorf("produce request records after encoding: %q", got)
	}
	if got := resp.Topics[0].Partitions[0].RecordBatches; &got[0] != &batches[0] || len(got) != len(batches) {
		t.Errorf("fetch response record batches after encoding: %q", got)
	}
	// Bytes that are no batch are cut to their first 18 (tailKeep).
	if b := enc.Bytes(); bytes.Contains(b, records[:16]) || bytes.Contains(b, batches[tailKeep:tailKeep+16]) {
		t.Errorf("record bytes in the batch: %q", b)
	}
}
