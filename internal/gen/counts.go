package gen

import (
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BatchCount counts record batches and records a consumer read for one
// partition (kgo's HookFetchBatchRead: every batch kgo decoded, including
// records before the fetch offset that it then skipped).
type BatchCount struct {
	Batches int `json:"batches"`
	Records int `json:"records"`
}

// ClientCounts is what kgo hooks saw in one process. A child process sends
// its ClientCounts to the parent when it exits cleanly.
type ClientCounts struct {
	// Writes and Reads count successful request writes and response
	// reads per kmsg API name (HookBrokerWrite, HookBrokerRead).
	Writes map[string]int `json:"writes"`
	Reads  map[string]int `json:"reads"`
	// Produced counts records acknowledged to producers (for acks=0:
	// written), topic -> partition -> records.
	Produced map[string]map[string]int64 `json:"produced"`
	// Batches are the record batches consumers read.
	Batches map[string]map[string]BatchCount `json:"batches"`
}

func newClientCounts() ClientCounts {
	return ClientCounts{
		Writes:   map[string]int{},
		Reads:    map[string]int{},
		Produced: map[string]map[string]int64{},
		Batches:  map[string]map[string]BatchCount{},
	}
}

func (c *ClientCounts) merge(o ClientCounts) {
	for k, v := range o.Writes {
		c.Writes[k] += v
	}
	for k, v := range o.Reads {
		c.Reads[k] += v
	}
	for t, ps := range o.Produced {
		for p, n := range ps {
			c.addProduced(t, p, n)
		}
	}
	for t, ps := range o.Batches {
		for p, b := range ps {
			m := sub(c.Batches, t)
			cur := m[p]
			cur.Batches += b.Batches
			cur.Records += b.Records
			m[p] = cur
		}
	}
}

func (c *ClientCounts) addProduced(topic, partition string, n int64) {
	sub(c.Produced, topic)[partition] += n
}

func sub[V any](m map[string]map[string]V, k string) map[string]V {
	s := m[k]
	if s == nil {
		s = map[string]V{}
		m[k] = s
	}
	return s
}

// hooks counts what kgo clients do. One hooks value serves every client of
// a process.
type hooks struct {
	mu     sync.Mutex
	counts ClientCounts
	closed map[*kgo.Client]bool
}

func newHooks() *hooks {
	return &hooks{counts: newClientCounts(), closed: map[*kgo.Client]bool{}}
}

var (
	_ kgo.HookBrokerWrite             = (*hooks)(nil)
	_ kgo.HookBrokerRead              = (*hooks)(nil)
	_ kgo.HookFetchBatchRead          = (*hooks)(nil)
	_ kgo.HookProduceRecordUnbuffered = (*hooks)(nil)
	_ kgo.HookClientClosed            = (*hooks)(nil)
)

func (h *hooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	h.counts.Writes[kmsg.NameForKey(key)]++
	h.mu.Unlock()
}

func (h *hooks) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	h.counts.Reads[kmsg.NameForKey(key)]++
	h.mu.Unlock()
}

func (h *hooks) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, partition int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := sub(h.counts.Batches, topic)
	p := strconv.Itoa(int(partition))
	b := ps[p]
	b.Batches++
	b.Records += m.NumRecords
	ps[p] = b
}

func (h *hooks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	h.mu.Lock()
	h.counts.addProduced(r.Topic, strconv.Itoa(int(r.Partition)), 1)
	h.mu.Unlock()
}

func (h *hooks) OnClientClosed(cl *kgo.Client) {
	h.mu.Lock()
	h.closed[cl] = true
	h.mu.Unlock()
}

func (h *hooks) isClosed(cl *kgo.Client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed[cl]
}

func (h *hooks) snapshot() ClientCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := newClientCounts()
	out.merge(h.counts)
	return out
}

func (h *hooks) merge(o ClientCounts) {
	h.mu.Lock()
	h.counts.merge(o)
	h.mu.Unlock()
}

// brokerCounts counts the requests kfake handled, from a Control function
// that observes every request and handles none.
type brokerCounts struct {
	mu         sync.Mutex
	byNode     map[int32]map[string]int
	noResponse int
}

func (b *brokerCounts) observe(node int32, req kmsg.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byNode == nil {
		b.byNode = map[int32]map[string]int{}
	}
	m := b.byNode[node]
	if m == nil {
		m = map[string]int{}
		b.byNode[node] = m
	}
	m[kmsg.NameForKey(req.Key())]++
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		b.noResponse++ // acks=0: the broker sends no response at all
	}
}
