package gen

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Truth is what <case>.truth.json holds: facts about a capture recorded
// without any kwire code, for kwire's tests to compare against. Maps are
// keyed by kmsg API name (kmsg.NameForKey), topic, partition (decimal).
type Truth struct {
	Case     string        `json:"case"`
	Doc      string        `json:"doc"`
	Captures []CaptureFile `json:"captures"`
	Brokers  []Broker      `json:"brokers"`

	// RequestsBroker counts the requests kfake handled, per API, from a
	// kfake Control function; RequestsBrokerByNode splits them by broker.
	RequestsBroker       map[string]int            `json:"requests_broker"`
	RequestsBrokerByNode map[string]map[string]int `json:"requests_broker_by_node"`
	// RequestsClient and ResponsesClient count what kgo clients wrote and
	// read (HookBrokerWrite, HookBrokerRead); sarama clients and children
	// that did not exit cleanly are not in them (see Notes).
	RequestsClient  map[string]int `json:"requests_client"`
	ResponsesClient map[string]int `json:"responses_client"`
	// NoResponse counts Produce requests with acks=0 (never answered).
	NoResponse int `json:"no_response"`

	// Produced counts records producers had acknowledged, topic ->
	// partition -> records (acks=0: records written).
	Produced map[string]map[string]int64 `json:"produced,omitempty"`
	// FetchBatches counts batches and records kgo consumers read.
	FetchBatches map[string]map[string]BatchCount `json:"fetch_batches,omitempty"`
	// Committed is each group's committed offset per topic/partition
	// from an OffsetFetch at the end (that request is in the capture).
	Committed map[string]map[string]map[string]int64 `json:"committed,omitempty"`
	// EndOffsets is each partition's high watermark from a ListOffsets
	// at the end (also in the capture).
	EndOffsets map[string]map[string]int64 `json:"end_offsets,omitempty"`

	// Groups is each consumer group's life as its members and the broker
	// saw it (see GroupTruth); Hazards the misuses scenarios drove on
	// purpose.
	Groups  map[string]*GroupTruth `json:"groups,omitempty"`
	Hazards []Hazard               `json:"hazards,omitempty"`
	// Share is each share group's records (KIP-932) as the broker's
	// answers on the tap show them (see ShareTruth).
	Share map[string]*ShareTruth `json:"share,omitempty"`
	// Transactions is each transactional id's EndTxn and InitProducerID
	// answers on the tap (see TxnTruth).
	Transactions map[string]*TxnTruth `json:"transactions,omitempty"`

	// Lag is, per group, the consumer health the scenario drove and when
	// the record at each committed offset was made (see LagTruth).
	Lag map[string]*LagTruth `json:"lag,omitempty"`

	// Edit says which packets were left out of the files, if any.
	Edit *EditInfo `json:"edit,omitempty"`
	// Frames lists every connection with the frames the tap relayed in
	// each direction.
	Frames []ConnFrames `json:"frames"`
	Notes  []string     `json:"notes"`
}

// CaptureFile describes one written pcapng file.
type CaptureFile struct {
	File    string  `json:"file"`
	Link    string  `json:"link"`
	MSS     int     `json:"mss"`
	Nodes   []int32 `json:"nodes"` // brokers whose connections it holds
	Packets int     `json:"packets"`
}

// Broker is one kfake broker.
type Broker struct {
	Node int32  `json:"node"`
	Addr string `json:"addr"`
}

// ConnFrames is one tapped connection and its frames.
type ConnFrames struct {
	ID     int    `json:"id"`
	Node   int32  `json:"node"`
	Client string `json:"client"`
	Server string `json:"server"`
	// ClosedBy is "client", "server", "reset by client" or "reset by
	// server": who ended the connection first.
	ClosedBy string `json:"closed_by"`
	// Packets is how many of its packets are in the combined file;
	// HasSYN says whether its handshake is.
	Packets       int   `json:"packets"`
	HasSYN        bool  `json:"has_syn"`
	BytesToServer int64 `json:"bytes_to_server"`
	BytesToClient int64 `json:"bytes_to_client"`
	// DroppedToServer / DroppedToClient are the payload bytes left out
	// of the files.
	DroppedToServer int64   `json:"dropped_to_server"`
	DroppedToClient int64   `json:"dropped_to_client"`
	ToServer        []Frame `json:"to_server"`
	ToClient        []Frame `json:"to_client"`
}

// truthExtra is what scenarios record through the cluster.
type truthExtra struct {
	committed  map[string]map[string]map[string]int64
	endOffsets map[string]map[string]int64
	lag        map[string]*LagTruth
}

// LagTruth is one group's health as a scenario drove it: State is what
// its consumer was made to do (ok, lagging, stalled, stopped), Evidence
// what the wire shows of it; RecordTimes, topic -> partition -> the
// timestamp (Unix milliseconds, CreateTime, the producer's) of the record
// at the group's committed offset, for partitions where one was produced
// (a group caught up has none).
type LagTruth struct {
	State       string                      `json:"state"`
	Evidence    string                      `json:"evidence,omitempty"`
	RecordTimes map[string]map[string]int64 `json:"record_times"`
}

// truthClient returns a kgo client for end-of-scenario queries.
func (c *Cluster) truthClient() (*kgo.Client, error) {
	return c.Kgo(kgo.ClientID("kwire-gen-truth"))
}

// RecordCommitted records each group's committed offsets with an
// OffsetFetch (sent through a kgo client, so it is in the capture).
func (c *Cluster) RecordCommitted(ctx context.Context, groups ...string) error {
	cl, err := c.truthClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, g := range groups {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = g
		kresp, err := cl.Request(ctx, req)
		if err != nil {
			return fmt.Errorf("offset fetch %s: %w", g, err)
		}
		resp := kresp.(*kmsg.OffsetFetchResponse)
		out := map[string]map[string]int64{}
		add := func(topic string, id [16]byte, p int32, off int64, code int16) error {
			if err := kerr.ErrorForCode(code); err != nil {
				return fmt.Errorf("offset fetch %s %s/%d: %w", g, topic, p, err)
			}
			if topic == "" {
				topic = hex.EncodeToString(id[:])
			}
			if off >= 0 {
				sub(out, topic)[strconv.Itoa(int(p))] = off
			}
			return nil
		}
		for _, rg := range resp.Groups {
			if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
				return fmt.Errorf("offset fetch %s: %w", g, err)
			}
			for _, t := range rg.Topics {
				for _, p := range t.Partitions {
					if err := add(t.Topic, t.TopicID, p.Partition, p.Offset, p.ErrorCode); err != nil {
						return err
					}
				}
			}
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := add(t.Topic, [16]byte{}, p.Partition, p.Offset, p.ErrorCode); err != nil {
					return err
				}
			}
		}
		c.mu.Lock()
		if c.truth.committed == nil {
			c.truth.committed = map[string]map[string]map[string]int64{}
		}
		c.truth.committed[g] = out
		c.mu.Unlock()
	}
	return nil
}

// RecordEndOffsets records each partition's high watermark with Metadata
// and ListOffsets requests (in the capture).
func (c *Cluster) RecordEndOffsets(ctx context.Context, topics ...string) error {
	cl, err := c.truthClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, rt)
	}
	kresp, err := cl.Request(ctx, meta)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	for _, t := range kresp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("metadata %s: %w", *t.Topic, err)
		}
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = *t.Topic
		for _, p := range t.Partitions {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = p.Partition
			lp.CurrentLeaderEpoch = -1
			lp.Timestamp = -1 // latest
			lt.Partitions = append(lt.Partitions, lp)
		}
		lo.Topics = append(lo.Topics, lt)
	}
	kresp, err = cl.Request(ctx, lo)
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	out := map[string]map[string]int64{}
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("list offsets %s/%d: %w", t.Topic, p.Partition, err)
			}
			sub(out, t.Topic)[strconv.Itoa(int(p.Partition))] = p.Offset
		}
	}
	c.mu.Lock()
	if c.truth.endOffsets == nil {
		c.truth.endOffsets = map[string]map[string]int64{}
	}
	maps.Copy(c.truth.endOffsets, out)
	c.mu.Unlock()
	return nil
}

// BrokerRequests returns the per-API counts kfake has handled so far.
func (c *Cluster) BrokerRequests() map[string]int {
	c.broker.mu.Lock()
	defer c.broker.mu.Unlock()
	out := map[string]int{}
	for _, m := range c.broker.byNode {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// baseTruth fills the parts of Truth that do not depend on an edit.
func (c *Cluster) baseTruth(name, doc string) *Truth {
	t := &Truth{Case: name, Doc: doc, RequestsBrokerByNode: map[string]map[string]int{}}
	for i, a := range c.addrs {
		t.Brokers = append(t.Brokers, Broker{Node: int32(i), Addr: a})
	}
	t.RequestsBroker = c.BrokerRequests()
	c.broker.mu.Lock()
	for n, m := range c.broker.byNode {
		t.RequestsBrokerByNode[strconv.Itoa(int(n))] = maps.Clone(m)
	}
	t.NoResponse = c.broker.noResponse
	c.broker.mu.Unlock()

	counts := c.hooks.snapshot()
	c.mu.Lock()
	counts.merge(c.produced)
	t.Committed = c.truth.committed
	t.EndOffsets = c.truth.endOffsets
	t.Lag = c.truth.lag
	t.Notes = slices.Clone(c.notes)
	c.mu.Unlock()
	var gnotes []string
	t.Groups, t.Hazards, gnotes = c.groups.build(t.Committed)
	t.Share = c.shareTruth()
	t.Transactions = c.txnTruth()
	t.Notes = append(t.Notes, gnotes...)
	t.RequestsClient, t.ResponsesClient = counts.Writes, counts.Reads
	if len(counts.Produced) > 0 {
		t.Produced = counts.Produced
	}
	if len(counts.Batches) > 0 {
		t.FetchBatches = counts.Batches
	}
	t.Notes = append(t.Notes,
		"requests_broker comes from a kfake Control function, which sees every request kfake parsed and queued, "+
			"ApiVersions and SASL included; it misses requests kfake could not parse and requests still unread when a connection or the cluster closed",
		"requests_client counts only in-process kgo clients and children that exited cleanly; sarama has no per-request hooks")
	return t
}
