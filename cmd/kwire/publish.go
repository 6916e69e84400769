package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwire/kwire/aggregate/wire"
	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// publishFlags are kwire live's --publish flags.
type publishFlags struct {
	kafka    kafkaFlags
	bufferMB int
	create   bool
	name     string
	compress string
	keyFile  string
	// key signs the batches (agentKey; nil: unsigned), agentName is the
	// agent's name: both set by check.
	key       *wire.Key
	agentName string
}

func (f *publishFlags) register(fs *flag.FlagSet) {
	f.kafka = kafkaFlags{prefix: "publish-", envPass: "KWIRE_PUBLISH_PASSWORD"}
	f.kafka.register(fs, "publish", "also publish what kwire aggregate needs (exchanges without record data, anomalies, counters) to "+
		"`kafka://HOST:PORT[,HOST:PORT...]/TOPIC` (docs/aggregate.md)")
	fs.IntVar(&f.bufferMB, "publish-buffer-mb", 64, "with --publish, most `MiB` waiting for the transport; beyond it whole batches are dropped and counted, the capture never waits")
	fs.StringVar(&f.name, "publish-agent", "", "with --publish, the agent's `NAME` (default: the host name): the aggregator tells agents, and an agent's restarts, by it, so agents on one host need names of their own, and a restarted agent its old one")
	fs.StringVar(&f.compress, "publish-compression", "none", "with --publish, how batches are compressed for the transport: none (the batches are compact already: "+
		"about 2.7% of the Kafka traffic's bytes), snappy (half the bytes for about 2% more CPU), lz4 (half, about 5%) or zstd (a third, about 10%)")
	fs.StringVar(&f.keyFile, "publish-key-file", "", "with --publish, sign the batches with the agent's key in `FILE` (a line NAME HEXKEY; else from $"+publishKeyEnv+"): "+
		"the agent's name is then the key's, and an aggregator with the agents' keys drops what is not signed by the agent it names (docs/aggregate.md)")
	fs.BoolVar(&f.create, "publish-create-topic", false, "with --publish, let the brokers create the topic if it does not exist (auto-creation must be enabled on them); without it, a topic that does not exist stops kwire live at start-up")
}

// check asks the cluster of f for the topic at start-up, before anything
// is captured: a topic that does not exist (or a cluster that cannot be
// reached) is an error naming both, instead of records that time out
// after the capture (kgo retries an unknown topic until its delivery
// timeout). With --publish-create-topic the brokers may create it here.
func (f *publishFlags) check(ctx context.Context) error {
	opts, topic, err := f.kafka.options()
	if err != nil {
		return fmt.Errorf("--publish: %w", err)
	}
	fix := "create it, or pass --publish-create-topic to let the brokers create it"
	if f.create {
		fix = "the brokers did not create it (auto.create.topics.enable is off on them?): create it"
	}
	if f.key, f.agentName, err = f.agentKey(); err != nil {
		return err
	}
	if err := f.kafka.checkTopic(ctx, opts, topic, f.create); err != nil {
		return fmt.Errorf("--publish: %w", missingTopicFix(err, fix))
	}
	return nil
}

// runAgent is the agent on any source: it runs src through p, publishing
// through pub, until src ends or ctx is done; then it publishes the
// final counters and writes p's final stats (no summary). Live capture
// publishes through liveRun instead, which ticks.
func runAgent(ctx context.Context, src capture.Source, p *pipeline, pub *publisher) error {
	clock := &lastTime{next: p.dec}
	pub.clock, p.agent = clock, pub
	pub.stats = func() (capture.Stats, decode.Stats) { return src.Stats(), p.dec.Stats() }
	runErr := src.Run(ctx, clock)
	outErr := p.finish(clock.t, clock.t, src.Stats(), false)
	return errors.Join(runErr, outErr, pub.close(clock.t, 30*time.Second))
}

// Batching: a batch goes when it holds publishBatchBytes, or when it is
// publishBatchAge old (wall clock, checked on every item and tick); at
// most publishOpenKeys batches are open at once (one per client).
const (
	publishBatchBytes = 64 << 10
	publishBatchAge   = 100 * time.Millisecond
	publishOpenKeys   = 256
	publishConnKeys   = 4096
	// A batch's buffer: room for the item that takes it past
	// publishBatchBytes without growing. publishSpare buffers of
	// delivered batches are kept for the next ones.
	publishBufBytes = publishBatchBytes + publishBatchBytes/4
	publishSpare    = 16
)

// publisher is the agent: it batches the exchanges and anomalies of a
// pipeline (and its counters) per client and produces them to a Kafka
// topic without ever blocking the capture: when the transport is slower
// than the capture and the buffer is full, whole batches are dropped and
// counted. Exchange, Anomaly, tick and close are called on the capture
// goroutine; produce callbacks touch only the atomics and spare.
type publisher struct {
	cl    *kgo.Client
	topic string
	agent wire.Agent
	clock *lastTime // the pipeline's capture clock: an item's At
	stats func() (capture.Stats, decode.Stats)
	open  map[string]*openBatch
	free  []*wire.Encoder // encoders of batches sent, for the next ones
	sign  *wire.Signer    // nil: batches go unsigned
	// spare are buffers of delivered batches (a record's value is the
	// transport's until its produce callback), for the next batches:
	// a 64 KiB allocation per batch, the buffers' garbage, is the
	// garbage collector's work on the capture's CPU.
	spare   chan []byte
	connKey map[uint64]connKey // a connection's latest client key
	// last is the latest exchange's connection, client id, key and open
	// batch: exchanges come in runs on one connection, which skip both
	// maps (a string hash each) this way. b is nil once sent.
	last struct {
		conn     uint64
		clientID string
		key      string
		b        *openBatch
	}
	seq uint64
	// wall is the wall clock read when the capture clock was wallAt.
	wall, wallAt time.Time
	limit        int64
	maxAge       time.Duration // publishBatchAge
	skew         time.Duration // added to every published time: tests of --max-skew only
	inflight     atomic.Int64
	n            struct{ batches, items, bytes, dropped, droppedItems, errors atomic.Uint64 }
	// end, once set, is when the capture stopped: the items the decoder
	// gives from then on (requests never answered, at EOF) are published
	// at it, as analyze gives them after every file's last packet.
	end time.Time
}

type openBatch struct {
	enc     *wire.Encoder
	started time.Time
}

// connKey is the record key of a connection's exchanges with a client id.
type connKey struct{ clientID, key string }

// newAgent returns the agent's identity: name (the host name when empty)
// and a random run.
func newAgent(name string) wire.Agent {
	host := name
	if host == "" {
		host, _ = os.Hostname()
	}
	var b [8]byte
	rand.Read(b[:])
	return wire.Agent{Host: host, Run: binary.BigEndian.Uint64(b[:])}
}

// newPublisher connects to the cluster of f. stats gives the counters
// published with every tick.
func newPublisher(f *publishFlags, agent wire.Agent, stats func() (capture.Stats, decode.Stats)) (*publisher, error) {
	opts, topic, err := f.kafka.options()
	if err != nil {
		return nil, fmt.Errorf("--publish: %w", err)
	}
	limit := int64(max(f.bufferMB, 1)) << 20
	// No KIP-714 client metrics: the agent's producer would time every
	// request for them and push them to the transport's brokers, which
	// nobody reads there; their setup alone (zeroing an lz4
	// compressor's blocks) took 10 ms of CPU per client.
	opts = append(opts, kgo.DefaultProduceTopic(topic), kgo.MaxBufferedBytes(int(limit)+publishBatchBytes),
		kgo.MaxBufferedRecords(1<<20), kgo.RecordDeliveryTimeout(30*time.Second), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.DisableClientMetrics())
	if f.create {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	codec, ok := map[string]kgo.CompressionCodec{"lz4": kgo.Lz4Compression(), "snappy": kgo.SnappyCompression(),
		"zstd": kgo.ZstdCompression(), "none": kgo.NoCompression(), "": kgo.NoCompression()}[f.compress]
	if !ok {
		return nil, fmt.Errorf("--publish-compression %q: want none, snappy, lz4 or zstd", f.compress)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec, kgo.NoCompression()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("--publish: %w", err)
	}
	p := &publisher{cl: cl, topic: topic, agent: agent, stats: stats, open: make(map[string]*openBatch),
		connKey: make(map[uint64]connKey), limit: limit, maxAge: publishBatchAge, spare: make(chan []byte, publishSpare)}
	if f.key != nil {
		p.sign = wire.NewSigner(*f.key)
	}
	return p, nil
}

func (p *publisher) now() time.Time {
	if p.clock == nil {
		return p.end
	}
	return maxTime(p.clock.t, p.end)
}

// stopping says that the live capture stopped at wall time t: what the
// decoder gives from now on was still waiting when it did (an exchange
// unanswered then could have been answered until then).
func (p *publisher) stopping(t time.Time) {
	if p.end.IsZero() {
		p.end = t
	}
}

// key is the record key of e: its client (host and client id), so that a
// client's exchanges with every broker land in one partition.
func (p *publisher) key(c *capture.Conn, clientID string) string {
	if c == nil {
		return clientID
	}
	if k, ok := p.connKey[c.ID]; ok && k.clientID == clientID {
		return k.key
	}
	k := c.Client.Addr().Unmap().String() + "\x00" + clientID
	if len(p.connKey) >= publishConnKeys {
		clear(p.connKey)
	}
	p.connKey[c.ID] = connKey{clientID, k}
	return k
}

// batch returns the open batch for key.
func (p *publisher) batch(key string) *openBatch {
	b := p.open[key]
	if b == nil {
		if len(p.open) >= publishOpenKeys {
			p.flushAll()
		}
		b = &openBatch{started: time.Now()}
		if n := len(p.free); n > 0 {
			b.enc, p.free = p.free[n-1], p.free[:n-1]
		} else {
			b.enc = wire.NewEncoder(p.agent)
			b.enc.SetSkew(p.skew)
		}
		p.seq++
		b.enc.Reset(p.seq)
		p.open[key] = b
	}
	return b
}

// Exchange publishes e (only read during the call).
func (p *publisher) Exchange(e *decode.Exchange) {
	l := &p.last
	if l.b == nil || e.Conn == nil || l.conn != e.Conn.ID || l.clientID != e.ClientID {
		l.key = p.key(e.Conn, e.ClientID)
		l.b = p.batch(l.key)
		l.clientID, l.conn = e.ClientID, 0
		if e.Conn != nil {
			l.conn = e.Conn.ID
		}
	}
	at := p.now()
	l.b.enc.Exchange(at, e)
	p.sent(l.key, l.b, at)
}

// Anomaly publishes a, keyed as its connection's latest exchange.
func (p *publisher) Anomaly(a *decode.Anomaly) {
	k := ""
	if a.Conn != nil {
		if k = p.connKey[a.Conn.ID].key; k == "" {
			k = p.key(a.Conn, "")
		}
	}
	b := p.batch(k)
	at := p.now()
	b.enc.Anomaly(at, a)
	p.sent(k, b, at)
}

// sent flushes b if it is full or old. The wall clock is read again only
// once the capture clock (at) moved on by a millisecond: reading it for
// every item was a tenth of the agent's publishing CPU on a VM, and a
// live capture's clock is the wall clock.
func (p *publisher) sent(key string, b *openBatch, at time.Time) {
	if d := at.Sub(p.wallAt); d >= time.Millisecond || d < 0 {
		p.wall, p.wallAt = time.Now(), at
	}
	if b.enc.Len() >= publishBatchBytes || p.wall.Sub(b.started) >= p.maxAge {
		p.flush(key, b)
	}
}

// tick publishes the counters at clock at and sends batches that are old
// enough. final marks the agent's last counters.
func (p *publisher) tick(at time.Time, final bool) {
	c := &wire.Counters{Publish: p.Stats(), Final: final}
	if p.stats != nil {
		c.Capture, c.Decode = p.stats()
	}
	b := p.batch("")
	b.enc.Counters(at, c)
	p.flush("", b)
	for _, k := range sortedKeysOf(p.open) {
		if b := p.open[k]; time.Since(b.started) >= p.maxAge {
			p.flush(k, b)
		}
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (p *publisher) flushAll() {
	for _, k := range sortedKeysOf(p.open) {
		p.flush(k, p.open[k])
	}
}

// flush produces b, or drops it when the buffer is full: never waits.
func (p *publisher) flush(key string, b *openBatch) {
	delete(p.open, key)
	if p.last.b == b {
		p.last.b = nil
	}
	items := uint64(b.enc.Items())
	size := int64(b.enc.Len())
	if p.sign != nil {
		size += wire.TagSize
	}
	if p.inflight.Load()+size > p.limit {
		p.n.dropped.Add(1)
		p.n.droppedItems.Add(items)
		p.free = append(p.free, b.enc)
		return
	}
	p.inflight.Add(size)
	var next []byte
	select {
	case next = <-p.spare:
	default:
		next = make([]byte, 0, publishBufBytes)
	}
	rec := &kgo.Record{Key: []byte(key), Value: b.enc.TakeFor(next)}
	if p.sign != nil {
		rec.Value = p.sign.Sign(rec.Value)
	}
	p.free = append(p.free, b.enc)
	p.cl.TryProduce(context.Background(), rec, func(rec *kgo.Record, err error) {
		p.inflight.Add(-size)
		select {
		case p.spare <- rec.Value: // the client is done with it
		default:
		}
		if err != nil {
			p.n.errors.Add(1)
			p.n.dropped.Add(1)
			p.n.droppedItems.Add(items)
			return
		}
		p.n.batches.Add(1)
		p.n.items.Add(items)
		p.n.bytes.Add(uint64(size))
	})
}

// Stats returns the publishing counters; safe from any goroutine.
func (p *publisher) Stats() wire.PublishStats {
	return wire.PublishStats{Batches: p.n.batches.Load(), Items: p.n.items.Load(), Bytes: p.n.bytes.Load(),
		BatchesDropped: p.n.dropped.Load(), ItemsDropped: p.n.droppedItems.Load(), ProduceErrors: p.n.errors.Load()}
}

// close publishes the final counters at at, sends what is open, waits up
// to wait for the transport to take it, and disconnects.
func (p *publisher) close(at time.Time, wait time.Duration) error {
	p.flushAll()
	p.tick(at, true)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := p.cl.Flush(ctx)
	p.cl.Close()
	if err != nil {
		return fmt.Errorf("--publish: %d bytes not delivered: %w", p.inflight.Load(), err)
	}
	return nil
}

// publishEvery is how often a live agent publishes its counters: they
// also tell the aggregator how far its clock has gone without traffic.
const publishEvery = time.Second

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// startPublish connects kwire live's agent (--publish) and says so in
// status.
func (r *liveRun) startPublish(f *liveFlags, status *string) error {
	r.own = newOwnConns()
	f.publish.kafka.own = r.own
	pub, err := newPublisher(&f.publish, newAgent(f.publish.agentName), func() (capture.Stats, decode.Stats) { return r.src.Stats(), r.p.dec.Stats() })
	if err != nil {
		return err
	}
	if f.publish.key == nil {
		fmt.Fprint(r.stderr, noKeyWarning("publishing", "publish-key-file", publishKeyEnv, pub.topic))
	} else {
		*status += ", batches signed"
	}
	pub.clock, r.p.agent, r.pub = &r.clock, pub, pub
	*status += fmt.Sprintf(", publishing to %s as agent %s (its own connections left out of the capture)", f.publish.kafka.url, pub.agent)
	return nil
}

// publishStats writes the agent's publishing counters next to a stats
// line (on stderr: stdout keeps the NDJSON schema of docs/schema.md).
func (r *liveRun) publishStats() {
	if r.pub == nil {
		return
	}
	s := r.pub.Stats()
	fmt.Fprintf(r.stderr, "kwire: publish: %d batches (%d items, %d bytes) delivered, %d batches (%d items) dropped, %d transport errors, %d bytes waiting, %d own connections not analysed\n",
		s.Batches, s.Items, s.Bytes, s.BatchesDropped, s.ItemsDropped, s.ProduceErrors, r.pub.inflight.Load(), r.own.n.Load())
}

// stopPublish sends the agent's last batches and final counters.
func (r *liveRun) stopPublish() error {
	if r.pub == nil {
		return nil
	}
	err := r.pub.close(maxTime(r.clock.t, time.Now()), 10*time.Second)
	r.publishStats()
	return err
}
