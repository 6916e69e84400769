package tui

import (
	"math/bits"
	"net/netip"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// histBuckets is the size of a latency histogram: microseconds in
// log-linear buckets, four per power of two (±12.5%), from 0 to about 2^29µs
// (9 minutes); longer latencies go in the last bucket.
const histBuckets = 4 + 27*4

// Hist is a latency histogram (see histBuckets).
type Hist [histBuckets]uint32

func histIndex(d time.Duration) int {
	us := uint64(max(d.Microseconds(), 0))
	if us < 4 {
		return int(us)
	}
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1)), e >= 2
	i := 4 + (e-2)*4 + int((us>>(e-2))&3)
	return min(i, histBuckets-1)
}

// histUpper is the upper bound of bucket i.
func histUpper(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) * time.Microsecond
	}
	e := (i-4)/4 + 2
	sub := uint64((i - 4) % 4)
	us := (uint64(1) << e) + (sub+1)<<(e-2)
	return time.Duration(us) * time.Microsecond
}

// Quantile returns the latency below which the fraction q of h's
// observations fall (the bucket's upper bound), and false when h is empty.
func (h *Hist) Quantile(q float64) (time.Duration, bool) {
	var n uint64
	for _, v := range h {
		n += uint64(v)
	}
	if n == 0 {
		return 0, false
	}
	rank := uint64(q*float64(n) + 0.5)
	rank = min(max(rank, 1), n)
	var seen uint64
	for i, v := range h {
		seen += uint64(v)
		if seen >= rank {
			return histUpper(i), true
		}
	}
	return histUpper(histBuckets - 1), true
}

// sub returns h minus o (o is an earlier copy of the same histogram).
func (h *Hist) sub(o *Hist) Hist {
	var r Hist
	for i := range h {
		r[i] = h[i] - o[i]
	}
	return r
}

// APIStats counts one API key's exchanges since the start.
type APIStats struct {
	Key int16
	// Requests counts exchanges; Errors those whose response carries a
	// non-zero error code (decode.ErrorCode); Unanswered those without a
	// response seen (acks=0 produce included).
	Requests, Errors, Unanswered int64
	// Latency is the histogram of request-to-response times; of a Fetch
	// or ShareFetch answered without error, the part not in Wait.
	Latency Hist
	// Wait is, of Fetches and ShareFetches answered without error, the
	// histogram of their long-poll waits: the time the broker held them
	// until records came or their MaxWaitMillis ran out (fetchWait), which
	// is the wait, not the broker's speed; MaxWaitMillis is the largest
	// they asked for.
	Wait          Hist
	MaxWaitMillis int32
}

// ClientStats counts a client's (host + client id) exchanges.
type ClientStats struct {
	Host     netip.Addr
	ClientID string
	// Other is set on the entry that sums the clients beyond the cap.
	Other                   bool
	Requests, Errors, Bytes int64
	// First and Last are the capture times of its first and latest
	// request; Conns counts its connections (up to maxConnsTracked).
	First, Last time.Time
	Conns       int64
	// PID and Comm are the process on the client side, when the source
	// knows it (eBPF): the latest seen.
	PID  uint32
	Comm string
}

// BrokerStats counts a broker's (server address) exchanges.
type BrokerStats struct {
	Addr                    netip.AddrPort
	Other                   bool
	Requests, Errors, Bytes int64
	// Conns counts the connections seen (up to maxConnsTracked).
	Conns int64
}

// Traffic is a copy of the traffic counters at one moment.
type Traffic struct {
	// First and Last are the capture times of the first and latest
	// request seen.
	First, Last time.Time
	APIs        []APIStats    // by key
	Clients     []ClientStats // by host, then client id; Other last
	Brokers     []BrokerStats // by address; Other last
}

// caps on what the accumulator remembers: beyond them clients and
// brokers are summed into one "other" entry, and connections are no longer
// told apart.
const (
	maxClients      = 10000
	maxBrokers      = 1000
	maxConnsTracked = 100000
)

type clientKey struct {
	host netip.Addr
	id   string
}

// traffic accumulates Traffic on the pipeline goroutine: counters and
// histograms only, nothing of an exchange is kept.
type traffic struct {
	first, last time.Time
	apis        [128]*APIStats
	unknown     APIStats // keys outside 0..127
	clients     map[clientKey]*ClientStats
	clientOther *ClientStats
	brokers     map[netip.AddrPort]*BrokerStats
	brokerOther *BrokerStats
	// conns remembers each connection's client and broker entries: one
	// lookup per exchange, and connections counted once. Beyond
	// maxConnsTracked new connections are looked up every time and no
	// longer counted.
	conns map[uint64]connRef
}

// connRef is what a connection's exchanges are counted in.
type connRef struct {
	clientID string
	server   netip.AddrPort
	client   *ClientStats
	broker   *BrokerStats
}

func (t *traffic) exchange(e *decode.Exchange) {
	if t.first.IsZero() || e.ReqTime.Before(t.first) {
		t.first = e.ReqTime
	}
	if e.ReqTime.After(t.last) {
		t.last = e.ReqTime
	}
	a := &t.unknown
	if e.Key >= 0 && int(e.Key) < len(t.apis) {
		if a = t.apis[e.Key]; a == nil {
			a = &APIStats{Key: e.Key}
			t.apis[e.Key] = a
		}
	}
	a.Requests++
	isErr := false
	if e.Response == decode.ResponseSeen && !e.RespTime.IsZero() {
		if e.Resp != nil && decode.ErrorCode(e.Resp) != 0 {
			a.Errors++
			isErr = true
		}
		if wait, service, maxWait, ok := fetchWait(e); ok && !isErr {
			a.Wait[histIndex(wait)]++
			if service >= 0 {
				a.Latency[histIndex(service)]++
			}
			a.MaxWaitMillis = max(a.MaxWaitMillis, maxWait)
		} else {
			a.Latency[histIndex(e.Latency())]++
		}
	} else {
		a.Unanswered++
	}
	if e.Conn == nil {
		return
	}
	ref := t.conn(e)
	size := int64(e.ReqSize + e.RespSize)
	cl, br := ref.client, ref.broker
	cl.Requests++
	cl.Bytes += size
	br.Requests++
	br.Bytes += size
	if isErr {
		cl.Errors++
		br.Errors++
	}
	if cl.First.IsZero() {
		cl.First = e.ReqTime
	}
	cl.Last = e.ReqTime
	if pr := e.Conn.Process; pr != nil {
		cl.PID, cl.Comm = pr.PID, pr.Comm
	}
}

// fetchWait splits a Fetch's or ShareFetch's time in the broker into the
// long-poll wait (held until records came, or its MaxWaitMillis ran out)
// and the rest (service). A response without records waited all its
// time. One with records waited until the newest of them was made, by
// their batches' timestamps, when that falls within the Fetch's time; a
// timestamp outside it (records there before the request; a producer
// whose clock is off from the capture's) says nothing, and all its time
// is service. service is -1 for a response without records: nothing
// was served. ok is false for other APIs, and for responses not decoded
// or whose records were not copied (eBPF --snap).
func fetchWait(e *decode.Exchange) (wait, service time.Duration, maxWaitMillis int32, ok bool) {
	if len(e.RecordsNotCopied) > 0 {
		return 0, 0, 0, false
	}
	var records [][]byte
	switch req := e.Req.(type) {
	case *kmsg.FetchRequest:
		resp, _ := e.Resp.(*kmsg.FetchResponse)
		if resp == nil {
			return 0, 0, 0, false
		}
		maxWaitMillis = req.MaxWaitMillis
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				records = append(records, resp.Topics[i].Partitions[j].RecordBatches)
			}
		}
	case *kmsg.ShareFetchRequest:
		resp, _ := e.Resp.(*kmsg.ShareFetchResponse)
		if resp == nil {
			return 0, 0, 0, false
		}
		maxWaitMillis = req.MaxWaitMillis
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				records = append(records, resp.Topics[i].Partitions[j].Records)
			}
		}
	default:
		return 0, 0, 0, false
	}
	total := e.Latency()
	any, newest := false, int64(-1)
	for _, b := range records {
		any = any || len(b) > 0
		decode.ScanHeaders(b, func(h *decode.BatchHeader) {
			if !h.Control {
				newest = max(newest, h.MaxTimestamp)
			}
		})
	}
	if !any {
		return total, -1, maxWaitMillis, true
	}
	made := time.UnixMilli(newest)
	if newest < 0 || !made.After(e.ReqTime) || made.After(e.RespTime) {
		return 0, total, maxWaitMillis, true
	}
	return made.Sub(e.ReqTime), e.RespTime.Sub(made), maxWaitMillis, true
}

// conn returns the entries e's connection is counted in, counting the
// connection in them the first time.
func (t *traffic) conn(e *decode.Exchange) connRef {
	ref, ok := t.conns[e.Conn.ID]
	// A client may change its client id on a connection; a connection's
	// sides may be swapped once the decoder sees which one is the broker.
	if ok && ref.clientID == e.ClientID && ref.server == e.Conn.Server {
		return ref
	}
	ref = connRef{clientID: e.ClientID, server: e.Conn.Server,
		client: t.client(clientKey{e.Conn.Client.Addr(), e.ClientID}), broker: t.broker(e.Conn.Server)}
	if t.conns == nil {
		t.conns = make(map[uint64]connRef)
	}
	if ok || len(t.conns) < maxConnsTracked {
		t.conns[e.Conn.ID] = ref
		ref.client.Conns++
		if !ok {
			ref.broker.Conns++
		}
	}
	return ref
}

func (t *traffic) client(k clientKey) *ClientStats {
	if cl := t.clients[k]; cl != nil {
		return cl
	}
	if t.clients == nil {
		t.clients = make(map[clientKey]*ClientStats)
	}
	if len(t.clients) >= maxClients {
		if t.clientOther == nil {
			t.clientOther = &ClientStats{Other: true}
		}
		return t.clientOther
	}
	cl := &ClientStats{Host: k.host, ClientID: k.id}
	t.clients[k] = cl
	return cl
}

func (t *traffic) broker(a netip.AddrPort) *BrokerStats {
	if br := t.brokers[a]; br != nil {
		return br
	}
	if t.brokers == nil {
		t.brokers = make(map[netip.AddrPort]*BrokerStats)
	}
	if len(t.brokers) >= maxBrokers {
		if t.brokerOther == nil {
			t.brokerOther = &BrokerStats{Other: true}
		}
		return t.brokerOther
	}
	br := &BrokerStats{Addr: a}
	t.brokers[a] = br
	return br
}

// copy returns the counters now; it shares nothing with t.
func (t *traffic) copy() Traffic {
	out := Traffic{First: t.first, Last: t.last}
	for _, a := range t.apis {
		if a != nil {
			out.APIs = append(out.APIs, *a)
		}
	}
	if t.unknown.Requests > 0 {
		u := t.unknown
		u.Key = -1
		out.APIs = append(out.APIs, u)
	}
	out.Clients = make([]ClientStats, 0, len(t.clients)+1)
	for _, cl := range t.clients {
		out.Clients = append(out.Clients, *cl)
	}
	sort.Slice(out.Clients, func(i, j int) bool {
		a, b := &out.Clients[i], &out.Clients[j]
		if c := a.Host.Compare(b.Host); c != 0 {
			return c < 0
		}
		return a.ClientID < b.ClientID
	})
	if t.clientOther != nil {
		out.Clients = append(out.Clients, *t.clientOther)
	}
	out.Brokers = make([]BrokerStats, 0, len(t.brokers)+1)
	for _, br := range t.brokers {
		out.Brokers = append(out.Brokers, *br)
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].Addr.Compare(out.Brokers[j].Addr) < 0 })
	if t.brokerOther != nil {
		out.Brokers = append(out.Brokers, *t.brokerOther)
	}
	return out
}
