package gen

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LoopbackMSS is the TCP payload of a full segment on Linux lo: its
// 65536-byte MTU minus the IPv4 and TCP headers and the timestamp option.
const LoopbackMSS = 65483

// DefaultBulkSize is what bulk aims for when no size is given.
const DefaultBulkSize = 1 << 30

// BulkPorts are bulk's fixed broker ports, so that benchmark commands
// (kwire --port, tshark -d tcp.port==) can name them.
var BulkPorts = []int{29092, 29093, 29094}

var bulkTopics = []string{"bulk-lz4", "bulk-zstd", "bulk-snappy"}

const bulkDoc = "benchmark traffic, only when named: six kgo producers (two each for lz4, zstd, snappy; one topic of 6 " +
	"partitions per codec, bulk-lz4...) write JSON events of 100 B to 20 KiB in small synchronous batches while a 2-member kgo group " +
	"bulk-group reads all three topics and commits after every poll, until the capture reaches -size " +
	"(default 1 GiB); brokers on 29092-29094, 64 KiB segments like lo (-mss 1448 for Ethernet); " +
	"the capture is written while the traffic runs and the truth holds only counts"

var bulkScenario = Scenario{
	Name: "bulk",
	Doc:  bulkDoc,
	Options: Options{
		Link:  LinkEthernet,
		MSS:   LoopbackMSS,
		Chunk: 256 << 10,
		Ports: BulkPorts,
		Kfake: []kfake.Opt{
			kfake.SeedTopics(6, bulkTopics...),
			// Keep kfake's memory flat, as retention does on a broker:
			// ApplyRetention (below) drops whole 512 KiB segments beyond
			// 4 MiB per partition; the consumers are far less behind.
			kfake.BrokerConfigs(map[string]string{
				"log.retention.bytes": fmt.Sprint(4 << 20),
				"log.segment.bytes":   fmt.Sprint(512 << 10),
			}),
		},
	},
	Timeout:  2 * time.Hour,
	Explicit: true,
	Stream:   streamBulk,
}

const bulkGroupsDoc = "bulk with three consumer groups instead of one: bulk-lz4-group, bulk-zstd-group and bulk-snappy-group, " +
	"2 kgo members each, each reading its own codec's topic (what --shards can split between correlators; docs/sharding.md)"

func init() {
	Register(bulkScenario)
	g := bulkScenario
	g.Name, g.Doc = "bulkgroups", bulkGroupsDoc
	g.Stream = func(ctx context.Context, c *Cluster, dir string, size int64) (*Truth, error) {
		return streamBulkAs(ctx, c, dir, size, "bulkgroups", bulkGroupsDoc, true)
	}
	Register(g)
}

// streamBulk runs bulk's traffic until the capture holds size bytes.
func streamBulk(ctx context.Context, c *Cluster, dir string, size int64) (*Truth, error) {
	return streamBulkAs(ctx, c, dir, size, "bulk", bulkDoc, false)
}

// streamBulkAs is streamBulk writing name.pcapng, with one group per topic
// when perTopic (bulkgroups), else one group reading all three.
func streamBulkAs(ctx context.Context, c *Cluster, dir string, size int64, name, doc string, perTopic bool) (*Truth, error) {
	if size <= 0 {
		size = DefaultBulkSize
	}
	sw, err := c.newStreamWriter(filepath.Join(dir, name+".pcapng"))
	if err != nil {
		return nil, err
	}
	defer sw.f.Close()
	start := time.Now()

	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	var consumed atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2*len(bulkTopics))
	groups := map[string][]string{"bulk-group": bulkTopics}
	if perTopic {
		groups = map[string][]string{}
		for _, t := range bulkTopics {
			groups[t+"-group"] = []string{t}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		for i := range 2 {
			cl, err := c.Kgo(groupOpts(fmt.Sprintf("%s-member-%d", strings.TrimSuffix(g, "-group"), i+1), g, groups[g]...)...)
			if err != nil {
				return nil, err
			}
			wg.Go(func() { bulkConsume(trafficCtx, cl, &consumed) })
		}
	}
	codecs := []kgo.CompressionCodec{kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.SnappyCompression()}
	var producers []*kgo.Client
	for i := range 2 * len(bulkTopics) {
		topic := bulkTopics[i%len(bulkTopics)]
		cl, err := c.Kgo(kgo.ClientID(fmt.Sprintf("bulk-producer-%d", i+1)),
			kgo.ProducerBatchCompression(codecs[i%len(codecs)]), kgo.ProducerLinger(0))
		if err != nil {
			return nil, err
		}
		producers = append(producers, cl)
		wg.Go(func() { errc <- bulkProduce(trafficCtx, cl, topic, uint64(i)) })
	}

	// Write what the taps recorded as it comes, and stop at size.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for sw.n.Load() < size && err == nil {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("bulk: %d of %d bytes written: %w", sw.n.Load(), size, ctx.Err())
		case err = <-errc:
			if err == nil {
				err = errors.New("bulk: a producer stopped early")
			}
		case <-tick.C:
			c.Kfake().ApplyRetention()
			err = sw.write(c.takePackets())
		}
	}
	stopTraffic()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	for _, p := range producers {
		p.Close()
	}
	// Stopping the members left the group; the final commits are in
	// the capture, and this OffsetFetch is too.
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		if err := c.RecordCommitted(ctx, g); err != nil {
			return nil, err
		}
	}
	c.Close()
	if err := sw.write(c.takePackets()); err != nil {
		return nil, err
	}
	if err := sw.close(); err != nil {
		return nil, err
	}

	t := c.baseTruth(name, doc)
	t.Captures = []CaptureFile{{File: name + ".pcapng", Link: c.opts.Link.String(), MSS: c.opts.MSS, Nodes: []int32{0, 1, 2}, Packets: sw.packets}}
	t.Notes = append(t.Notes,
		fmt.Sprintf("bulk: %d bytes, %d packets in %.1fs; consumers read %d records", sw.n.Load(), sw.packets, time.Since(start).Seconds(), consumed.Load()),
		"bulk: frames are not listed (the capture is written while the traffic runs); only counts are kept")
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".truth.json"), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write truth: %w", err)
	}
	return t, nil
}

// bulkProduce writes small synchronous batches to topic until ctx is
// done: a busy service producing as events come, so requests stay a few
// kilobytes (about 500k Kafka frames per GiB of capture, as on a real
// busy broker) rather than the megabyte requests of a bulk loader.
func bulkProduce(ctx context.Context, cl *kgo.Client, topic string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x6b77697265))
	var rs []*kgo.Record
	for i := 0; ; {
		rs = rs[:0]
		for range 1 + rng.IntN(12) {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "user-%d", rng.IntN(5000)), Value: bulkValue(rng, i)})
			i++
		}
		err := cl.ProduceSync(ctx, rs...).FirstErr()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("produce to %s: %w", topic, err)
		}
	}
}

// bulkValue makes a JSON event of realistic size and compressibility
// (codecs shrink it 2-4 times): mostly a few hundred bytes, some
// kilobytes, a few up to 16 KiB; text from a small vocabulary plus a
// random token.
func bulkValue(rng *rand.Rand, i int) []byte {
	var words int
	switch p := rng.IntN(100); {
	case p < 60:
		words = 10 + rng.IntN(40)
	case p < 95:
		words = 100 + rng.IntN(300)
	default:
		words = 1000 + rng.IntN(1500)
	}
	token := make([]byte, 24+words/8)
	for j := range token {
		token[j] = byte(rng.Uint32())
	}
	var note []byte
	for range words {
		note = append(note, bulkWords[rng.IntN(len(bulkWords))]...)
		note = append(note, ' ')
	}
	events := [...]string{"page_view", "add_to_cart", "checkout", "search", "login"}
	return fmt.Appendf(nil, `{"id":%d,"ts":"2026-03-01T12:%02d:%02d.%06dZ","user":"user-%d","event":%q,`+
		`"path":"/products/%d","ua":"Mozilla/5.0 (X11; Linux x86_64) kgo/1.22","amount":%d.%02d,"token":%q,"note":%q}`,
		i, rng.IntN(60), rng.IntN(60), rng.IntN(1e6), rng.IntN(5000), events[rng.IntN(len(events))],
		rng.IntN(20000), rng.IntN(500), rng.IntN(100), base64.StdEncoding.EncodeToString(token), note)
}

var bulkWords = []string{
	"order", "shipped", "customer", "warehouse", "payment", "declined", "accepted", "retry", "latency",
	"session", "basket", "discount", "coupon", "refund", "invoice", "delivery", "address", "priority",
	"express", "standard", "tracking", "carrier", "region", "eu-west-1", "us-east-2", "inventory", "sku",
	"quantity", "price", "currency", "EUR", "USD", "status", "pending", "complete", "cancelled",
}

// bulkConsume polls and commits after every poll until ctx is done, then
// closes cl (which leaves the group).
func bulkConsume(ctx context.Context, cl *kgo.Client, n *atomic.Int64) {
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		if k := fs.NumRecords(); k > 0 {
			n.Add(int64(k))
			_ = cl.CommitUncommittedOffsets(ctx) // a failed commit is covered by the next
		}
	}
	commit, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = cl.CommitUncommittedOffsets(commit)
}

// takePackets hands over the packets recorded so far and forgets them,
// together with the frames the framers listed (bulk keeps no frame list),
// so memory stays flat however long the traffic runs.
func (c *Cluster) takePackets() []*Packet {
	r := c.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.packets
	r.packets = nil
	for _, conn := range r.conns {
		for _, f := range conn.framers {
			f.frames = nil
		}
	}
	return ps
}

// streamWriter writes packets to a pcapng file as they are taken, with
// the same interface block as Cluster.Write.
type streamWriter struct {
	f       *os.File
	n       atomic.Int64 // bytes written to f
	w       *pcapgo.NgWriter
	buf     gopacket.SerializeBuffer
	link    Link
	mss     int
	packets int
}

func (c *Cluster) newStreamWriter(path string) (*streamWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create capture: %w", err)
	}
	sw := &streamWriter{f: f, buf: gopacket.NewSerializeBuffer(), link: c.opts.Link, mss: c.opts.MSS}
	intf := pcapgo.DefaultNgInterface
	intf.Name = "lo"
	intf.LinkType = c.opts.Link.LinkType()
	intf.SnapLength = 262144
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo.Application = "kwire-gen"
	if sw.w, err = pcapgo.NewNgWriterInterface(countWriter{f, &sw.n}, intf, opts); err != nil {
		f.Close()
		return nil, err
	}
	return sw, nil
}

func (sw *streamWriter) write(ps []*Packet) error {
	for _, p := range ps {
		if err := serialize(sw.buf, sw.link, p, sw.mss); err != nil {
			return fmt.Errorf("serialize packet %d: %w", sw.packets, err)
		}
		data := sw.buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(data), Length: len(data)}
		if err := sw.w.WritePacket(ci, data); err != nil {
			return fmt.Errorf("write capture: %w", err)
		}
		sw.packets++
	}
	return nil
}

func (sw *streamWriter) close() error {
	if err := sw.w.Flush(); err != nil {
		return fmt.Errorf("write capture: %w", err)
	}
	return sw.f.Close()
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
