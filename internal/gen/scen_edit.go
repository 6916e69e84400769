package gen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var midstreamScenario = Scenario{
	Name: "midstream",
	Doc: "a kgo producer writes 200 records to one of 300 long-named topics and a kgo consumer reads them; a kgo " +
		"monitoring client sends broker 0 three rounds of 8 concurrent Metadata requests naming all 300 topics " +
		"(pipelined on one connection; relaying paced at 20 MiB/s); the file starts at a cut time where, on that " +
		"connection, a request and a response are both partway through: no SYN, both directions begin mid-frame",
	Options: Options{
		Link:           LinkNull,
		MSS:            EthernetMSS,
		Chunk:          8 << 10,
		BytesPerSecond: 20 << 20,
		Kfake:          []kfake.Opt{kfake.SeedTopics(2, midTopics...)},
	},
	Attempts: 3,
	Run:      runMidstream,
	Edit: func(c *Cluster) (*Edit, error) {
		t, conn, err := midFrameCut(c, 0.2)
		if err != nil {
			return nil, err
		}
		return CutBefore(t, conn, fmt.Sprintf("every packet before cut_ns is left out; on connection %d both "+
			"directions resume in the middle of a frame", conn.ID)), nil
	},
}

var lossyScenario = Scenario{
	Name: "lossy",
	Doc: "a kgo producer writes 600 uncompressed 1 KiB records in 64 KiB batches to bulk (3 partitions) while a " +
		"kgo consumer reads them; MSS 1448; every 37th data segment (both directions) is left out of the file",
	Options: Options{
		Link:  LinkEthernet,
		MSS:   EthernetMSS,
		Kfake: []kfake.Opt{kfake.SeedTopics(3, "bulk")},
	},
	Run:  runLossy,
	Edit: func(*Cluster) (*Edit, error) { return DropEveryNthData(37), nil },
}

// midTopics are many topics with long names, so that a Metadata request
// naming them all, and its response, both span many segments.
var midTopics = func() []string {
	var ts []string
	for i := range 300 {
		ts = append(ts, fmt.Sprintf("inventory.warehouse-%03d.stock-level-changes", i))
	}
	return ts
}()

func runMidstream(ctx context.Context, c *Cluster) error {
	const n = 200
	prod, err := c.Kgo(kgo.ClientID("mid-producer"))
	if err != nil {
		return err
	}
	if err := produce(ctx, prod, midTopics[0], 0, n, 200, 50); err != nil {
		return err
	}
	prod.Close()

	// A monitoring client asks broker 0 for the metadata of every topic,
	// eight requests at a time: kgo pipelines them on one connection, and
	// kfake reads the next request while it writes the previous answer.
	mon, err := c.Kgo(kgo.ClientID("mid-monitor"))
	if err != nil {
		return err
	}
	defer mon.Close()
	b := mon.Broker(0)
	for range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				req := kmsg.NewPtrMetadataRequest()
				for _, t := range midTopics {
					rt := kmsg.NewMetadataRequestTopic()
					rt.Topic = kmsg.StringPtr(t)
					req.Topics = append(req.Topics, rt)
				}
				_, errs[i] = b.Request(ctx, req)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
	}
	return consumeAll(ctx, c, "mid-reader", n, nil, midTopics[0])
}

func runLossy(ctx context.Context, c *Cluster) error {
	const topic, n = "bulk", 600
	prod, err := c.Kgo(kgo.ClientID("bulk-producer"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(20*time.Millisecond))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- produce(ctx, prod, topic, 0, n, 1024, 200) }()
	err = consumeAll(ctx, c, "bulk-reader", n, []kgo.Opt{kgo.FetchMaxBytes(256 << 10)}, topic)
	if perr := <-done; err == nil {
		err = perr
	}
	prod.Close()
	if err != nil {
		return err
	}
	return c.RecordEndOffsets(ctx, topic)
}

// midFrameCut finds the first packet time t, after at least minFrac of the
// packets, such that on some connection the last bytes sent before t in
// each direction end strictly inside a frame (past its length prefix): a
// capture starting at t begins mid-frame both ways on that connection.
func midFrameCut(c *Cluster, minFrac float64) (time.Time, *Conn, error) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	packets := c.rec.packets
	ends := map[*Conn]*[2]int64{}
	from := int(float64(len(packets)) * minFrac)
	for i, p := range packets {
		e := ends[p.Conn]
		if e == nil {
			e = new([2]int64)
			ends[p.Conn] = e
		}
		if i >= from && len(p.Payload) > 0 &&
			insideFrame(p.Conn.framers[ToServer].frames, e[ToServer]) &&
			insideFrame(p.Conn.framers[ToClient].frames, e[ToClient]) {
			return p.Time, p.Conn, nil
		}
		if n := int64(len(p.Payload)); n > 0 {
			e[p.Dir] = p.Off + n
		}
	}
	return time.Time{}, nil, fmt.Errorf("midstream: no time where both directions of a connection are mid-frame: %w", ErrRetry)
}

// insideFrame reports whether stream offset off falls strictly inside a
// complete frame's body.
func insideFrame(frames []Frame, off int64) bool {
	i := sort.Search(len(frames), func(i int) bool { return frames[i].End() > off })
	return i < len(frames) && frames[i].Complete && off > frames[i].Offset+4 && off < frames[i].End()
}
