package correlate

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// Fuzz input: a sequence of exchanges, each
//
//	key int16, version int16, client uint8, server uint8, advance uint16 (ms),
//	request length uint32, request body, response length uint32, response body
//
// (lengths 0xffffffff: no response). Client and server pick among a few
// addresses and client ids so that bindings and groups collide. The high
// bits of server add loss: 0x80 an anomaly on the connection before the
// exchange (its kind from bits 0x30), 0x40 a missing response lost in a
// gap, 0x08 packets dropped by the source.
const fuzzHeader = 2 + 2 + 1 + 1 + 2

// Seeds are kept small: the fuzzing engine minimizes every input that
// finds new coverage for up to -fuzzminimizetime (60s by default), one
// byte at a time, and counts none of those executions. With seeds of
// 150 exchanges (40 KB) a worker spent its time minimizing and -fuzz
// showed about 10 executions; a few exchanges of each key (a few KB) are
// as good a start.
const (
	fuzzSeedPerKey = 3
	fuzzSeedMax    = 40
)

// fuzzRecorder encodes decoded exchanges as fuzz input (seeds).
type fuzzRecorder struct {
	out   []byte
	n     int
	byKey map[int16]int
	last  time.Time
	hosts map[string]uint8
	// txn, when set, keeps only the exchanges of transactional producers
	// (FindCoordinator, transactional Produce with their batch headers
	// only, InitProducerID, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
	// TxnOffsetCommit), up to fuzzSeedTxnPerKey of each: enough for a
	// zombie's fenced Produce after a second instance's transactions.
	txn bool
	// produced: transactional Produce kept, by transactional id, producer
	// id and epoch and first partition: only the first of each is kept.
	produced map[string]bool
	// fetchAt is the last Fetch kept (txn): incremental Fetches that ask
	// and get nothing (a consumer waiting) are kept fuzzTxnFetchEvery
	// apart, so that a few span a stuck last stable offset (LSOStuck).
	fetchAt time.Time
	// share, when set, keeps only the exchanges of share groups
	// (FindCoordinator, Metadata for the topic names, ShareGroupHeartbeat,
	// ShareFetch without its records, ShareAcknowledge), up to
	// fuzzSeedSharePerKey of each: a poison record's five deliveries, or
	// an acquisition whose lock runs out and its redelivery.
	share bool
}

const fuzzTxnFetchEvery = 1500 * time.Millisecond

// fuzzProduceKey names a transactional Produce by its transactional id,
// its first batch's producer id and epoch, and its first partition.
func fuzzProduceKey(p *kmsg.ProduceRequest) string {
	k := strVal(p.TransactionID)
	for _, t := range p.Topics {
		for _, pt := range t.Partitions {
			id, ep, _ := decode.BatchProducer(pt.Records)
			return fmt.Sprint(k, "/", id, "/", ep, "/", t.Topic, t.TopicID, "/", pt.Partition)
		}
	}
	return k
}

// fuzzTxnKeys are the keys of transactional producers, and Fetch: the
// last stable offset and the markers read_committed consumers see.
var fuzzTxnKeys = map[int16]bool{0: true, 1: true, 10: true, 22: true, 24: true, 25: true, 26: true, 28: true}

const fuzzSeedTxnPerKey = 12

// fuzzShareKeys are the keys of share group members (KIP-932).
var fuzzShareKeys = map[int16]bool{3: true, 10: true, 76: true, 78: true, 79: true}

const fuzzSeedSharePerKey = 12

func (r *fuzzRecorder) Exchange(e *decode.Exchange) {
	perKey := fuzzSeedPerKey
	if r.txn {
		if !fuzzTxnKeys[e.Key] {
			return
		}
		perKey = fuzzSeedTxnPerKey
	}
	if r.share {
		if !fuzzShareKeys[e.Key] {
			return
		}
		perKey = fuzzSeedSharePerKey
	}
	switch e.Key {
	case 18, 71, 72:
		return // ApiVersions, telemetry: not the correlator's
	case 0:
		// Produce: large, and only transactional ones are the
		// correlator's; their batch headers are all it reads.
		p, ok := e.Req.(*kmsg.ProduceRequest)
		if !ok || p.TransactionID == nil {
			return
		}
		if r.txn {
			if r.produced[fuzzProduceKey(p)] {
				return
			}
			perKey = fuzzSeedMax
		}
		cp := *p
		cp.Topics = make([]kmsg.ProduceRequestTopic, len(p.Topics))
		for i, t := range p.Topics {
			cp.Topics[i] = t
			cp.Topics[i].Partitions = slices.Clone(t.Partitions)
		}
		decode.DropRecords(&cp)
		defer func(req kmsg.Request) { e.Req = req }(e.Req)
		e.Req = &cp
	}
	if e.Req == nil || r.n >= fuzzSeedMax || r.byKey[e.Key] >= perKey {
		return
	}
	if r.txn && e.Key == 1 {
		req, _ := e.Req.(*kmsg.FetchRequest)
		resp, _ := e.Resp.(*kmsg.FetchResponse)
		idle := req != nil && len(req.Topics) == 0 && (resp == nil || len(resp.Topics) == 0)
		if idle && e.ReqTime.Sub(r.fetchAt) < fuzzTxnFetchEvery {
			return
		}
		r.fetchAt = e.ReqTime
	}
	if p, ok := e.Req.(*kmsg.ProduceRequest); ok && r.txn {
		r.produced[fuzzProduceKey(p)] = true
	}
	r.n++
	r.byKey[e.Key]++
	id := func(s string) uint8 {
		if v, ok := r.hosts[s]; ok {
			return v
		}
		r.hosts[s] = uint8(len(r.hosts))
		return r.hosts[s]
	}
	var dt uint16
	if !r.last.IsZero() && e.ReqTime.After(r.last) {
		dt = uint16(min(e.ReqTime.Sub(r.last).Milliseconds(), 65535))
	}
	r.last = e.ReqTime
	r.out = binary.BigEndian.AppendUint16(r.out, uint16(e.Key))
	r.out = binary.BigEndian.AppendUint16(r.out, uint16(e.Version))
	r.out = append(r.out, id(e.Conn.Client.String()+"/"+e.ClientID), id(e.Conn.Server.String()))
	r.out = binary.BigEndian.AppendUint16(r.out, dt)
	req := e.Req.AppendTo(nil)
	r.out = binary.BigEndian.AppendUint32(r.out, uint32(len(req)))
	r.out = append(r.out, req...)
	if e.Resp == nil {
		r.out = binary.BigEndian.AppendUint32(r.out, 0xffffffff)
		return
	}
	limit := 100
	if r.txn {
		limit = 600 // whole batches: the markers follow the data
	}
	resp := trimmed(e.Resp, limit).AppendTo(nil)
	r.out = binary.BigEndian.AppendUint32(r.out, uint32(len(resp)))
	r.out = append(r.out, resp...)
}

func (r *fuzzRecorder) Anomaly(*decode.Anomaly) {}

// trimmed returns resp with Fetch record batches cut to their first limit
// bytes (100: a partial batch; more: the whole batches that fit), and
// without ShareFetch records (the correlator reads only the acquired
// ranges), to keep seeds small; resp is not modified.
func trimmed(resp kmsg.Response, limit int) kmsg.Response {
	if sr, ok := resp.(*kmsg.ShareFetchResponse); ok {
		cp := *sr
		cp.Topics = slices.Clone(sr.Topics)
		for i := range cp.Topics {
			cp.Topics[i].Partitions = slices.Clone(cp.Topics[i].Partitions)
			for j := range cp.Topics[i].Partitions {
				cp.Topics[i].Partitions[j].Records = nil
			}
		}
		return &cp
	}
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return resp
	}
	cp := *fr
	cp.Topics = make([]kmsg.FetchResponseTopic, len(fr.Topics))
	for i, t := range fr.Topics {
		cp.Topics[i] = t
		cp.Topics[i].Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			p.RecordBatches = p.RecordBatches[:cut(p.RecordBatches, limit)]
			cp.Topics[i].Partitions[j] = p
		}
	}
	return &cp
}

// cut returns where to cut batches b: limit 100 cuts inside the first
// batch, a larger limit after the last whole batch within it.
func cut(b []byte, limit int) int {
	if limit <= 100 {
		return min(len(b), limit)
	}
	n := 0
	for n+12 <= len(b) {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[n+8:])))
		if size < 12 || n+size > len(b) || n+size > limit {
			break
		}
		n += size
	}
	return n
}

// fuzzSeed returns the first exchanges of a generated capture as fuzz
// input (txn: only its transactional producers', see fuzzRecorder).
func fuzzSeed(f testing.TB, file string, txn bool) []byte {
	return fuzzSeedOf(f, file, &fuzzRecorder{txn: txn})
}

// fuzzShareSeed returns a generated capture's share group exchanges as
// fuzz input (see fuzzRecorder.share).
func fuzzShareSeed(f testing.TB, file string) []byte {
	return fuzzSeedOf(f, file, &fuzzRecorder{share: true})
}

func fuzzSeedOf(f testing.TB, file string, r *fuzzRecorder) []byte {
	src, err := capture.OpenFiles([]string{filepath.Join("..", "testdata", file)}, nil)
	if err != nil {
		return nil
	}
	defer src.Close()
	r.hosts, r.byKey, r.produced = map[string]uint8{}, map[int16]int{}, map[string]bool{}
	if err := src.Run(context.Background(), decode.New(r, nil)); err != nil {
		f.Fatal(err)
	}
	return r.out
}

// FuzzCorrelator feeds arbitrary exchanges and loss to a Correlator,
// through Detach as kwire analyze does. Invariants: it never panics,
// whatever the order, versions or contents of the messages; every event
// and the snapshot marshal to JSON; Close may follow anything; a hazard
// whose evidence may be incomplete is info and says what was lost; the
// group table keeps its bounds and books (checkGroupTable).
func FuzzCorrelator(f *testing.F) {
	for _, file := range fuzzSeedFiles {
		if seed := fuzzSeed(f, file, false); seed != nil {
			f.Add(seed)
		}
	}
	for _, file := range fuzzTxnSeedFiles {
		if seed := fuzzSeed(f, file, true); seed != nil {
			f.Add(seed)
		}
	}
	for _, file := range fuzzShareSeedFiles {
		if seed := fuzzShareSeed(f, file); seed != nil {
			f.Add(seed)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var events []Event
		c := New(&Options{MaxGroups: 8, MaxMembersPerGroup: 8, MaxClients: 8, MaxCommitHistory: 4, MaxFetchSessions: 4},
			SinkFunc(func(ev Event) { events = append(events, ev) }))
		now := base
		var arena []byte
		for len(in) >= fuzzHeader {
			e, rest, ok := fuzzExchange(in, &now)
			if !ok {
				break
			}
			in = rest
			fuzzLoss(c, e)
			arena = Detach(e, arena[:0]) // as kwire analyze hands exchanges over
			c.Exchange(e)
			if err := c.checkGroupTable(); err != nil {
				t.Fatal(err)
			}
		}
		c.Close(now.Add(time.Hour))
		for _, ev := range events {
			switch ev.Type() {
			case "generation", "member", "commit", "coordinator", "hazard", "transaction", "share_group":
			default:
				t.Fatalf("event type %q", ev.Type())
			}
			// An ended transaction has its begin and duration, but for an
			// EndTxn whose begin the input did not show first: neither.
			if te, ok := ev.(*TransactionEvent); ok && te.EndedBy != "" && te.ErrorCode == 0 &&
				((te.Began == nil) != (te.DurationMillis == nil) || te.Began == nil && te.EndedBy != TxnEndedByEndTxn ||
					te.DurationMillis != nil && *te.DurationMillis < 0) {
				t.Fatalf("transaction %s %s of %q: began %v, duration %v", te.Action, te.EndedBy, te.TransactionalID, te.Began, te.DurationMillis)
			}
			if se, ok := ev.(*ShareGroupEvent); ok && (se.Records < 0 || se.Redelivered > se.Records || se.Accepted < 0 ||
				se.Released < 0 || se.Rejected < 0 || len(se.Acquired) > maxShareRanges || len(se.Acks) > maxShareRanges) {
				t.Fatalf("share_group %s of %q: %+v", se.Action, se.Group, se)
			}
			if h, ok := ev.(*HazardEvent); ok && (h.EvidenceComplete != nil) != (h.Loss != nil) ||
				ok && h.EvidenceComplete != nil && (*h.EvidenceComplete || h.Severity != SeverityInfo || !h.Loss.any()) {
				t.Fatalf("hazard %s %s: evidence_complete %v, loss %+v", h.Kind, h.Severity, h.EvidenceComplete, h.Loss)
			}
		}
		s := c.Snapshot()
		for _, g := range s.Groups {
			if g.Share == nil {
				continue
			}
			for _, p := range g.Share.Partitions {
				if p.Held < 0 || p.LockExpired < 0 || p.Redelivered > p.Acquired {
					t.Fatalf("share group %q %s[%d]: %+v", g.Group, p.Topic, p.Partition, p)
				}
			}
		}
		if _, err := json.Marshal(struct {
			E []Event
			S *Snapshot
		}{events, s}); err != nil {
			t.Fatal(err)
		}
	})
}

var fuzzSeedFiles = []string{"group.pcapng", "newest.pcapng", "sarama.pcapng", "g_848.pcapng",
	"g_static.pcapng", "h_commit_gap.pcapng", "h_member_expired.pcapng", "h_non_owner_fetch.pcapng"}

// fuzzTxnSeedFiles seed the transactional paths (see fuzzRecorder.txn).
var fuzzTxnSeedFiles = []string{"txn_clean.pcapng", "h_zombie_producer.pcapng", "h_hanging_transaction.pcapng", "newest.pcapng",
	"h_txn_offsets_aborted.pcapng", "h_hanging_lso.pcapng", "txn_read_committed.pcapng"}

// fuzzShareSeedFiles seed the share group paths (see fuzzRecorder.share).
var fuzzShareSeedFiles = []string{"share_clean.pcapng", "h_share_redelivery.pcapng", "h_share_ack_lost.pcapng", "h_share_expired.pcapng"}

var fuzzAddrs = []string{"10.0.0.1:5000", "10.0.0.1:5001", "10.0.0.2:5000", "10.0.0.9:9092", "10.0.0.8:9092"}
var fuzzClientIDs = []string{"a", "a", "b", ""}

// fuzzLossKinds are the anomalies fuzzLoss reports.
var fuzzLossKinds = []decode.AnomalyKind{decode.AnomalyGap, decode.AnomalyResync, decode.AnomalyUnmatchedResponse, decode.AnomalyTLS}

// fuzzLoss reports the loss the server byte of e's input asked for
// (fuzzExchange keeps it in the connection's ID).
func fuzzLoss(c *Correlator, e *decode.Exchange) {
	server := int(e.Conn.ID & 0xff)
	if server&0x80 != 0 {
		c.Anomaly(&decode.Anomaly{Kind: fuzzLossKinds[(server>>4)&3], Conn: e.Conn, Time: e.ReqTime, Bytes: int64(server) - 200})
	}
	if server&0x40 != 0 && e.Resp == nil {
		e.Response = decode.ResponseLost
	}
	if server&0x08 != 0 {
		c.SourceLoss(e.ReqTime, int64(server&7))
	}
}

// fuzzExchange decodes one exchange of fuzz input.
func fuzzExchange(in []byte, now *time.Time) (*decode.Exchange, []byte, bool) {
	key, version := int16(binary.BigEndian.Uint16(in)), int16(binary.BigEndian.Uint16(in[2:]))
	client, server := int(in[4]), int(in[5])
	*now = now.Add(time.Duration(binary.BigEndian.Uint16(in[6:])) * time.Millisecond)
	in = in[fuzzHeader:]
	body := func() ([]byte, bool) {
		if len(in) < 4 {
			return nil, false
		}
		n := binary.BigEndian.Uint32(in)
		in = in[4:]
		if n == 0xffffffff {
			return nil, true
		}
		if uint64(n) > uint64(len(in)) {
			return nil, false
		}
		b := in[:n]
		in = in[n:]
		return b, true
	}
	reqBytes, ok := body()
	if !ok {
		return nil, nil, false
	}
	respBytes, ok := body()
	if !ok {
		return nil, nil, false
	}
	conn := &capture.Conn{
		ID:     uint64(client)<<8 | uint64(server),
		Client: netip.MustParseAddrPort(fuzzAddrs[client%3]),
		Server: netip.MustParseAddrPort(fuzzAddrs[3+server%2]),
	}
	e := &decode.Exchange{Conn: conn, Key: key, Version: version, ClientID: fuzzClientIDs[client%4],
		ReqTime: *now, Response: decode.ResponseMissing}
	req := kmsg.RequestForKey(key)
	if req == nil || version < 0 || version > req.MaxVersion() {
		return e, in, true
	}
	req.SetVersion(version)
	if req.ReadFrom(reqBytes) != nil {
		return e, in, true
	}
	e.Req = req
	if respBytes != nil {
		resp := req.ResponseKind()
		resp.SetVersion(version)
		if resp.ReadFrom(respBytes) == nil {
			e.Resp, e.Response, e.RespTime = resp, decode.ResponseSeen, now.Add(time.Millisecond)
		}
	}
	if f, ok := e.Resp.(*kmsg.FetchResponse); ok && client&0x80 != 0 {
		// Records not copied by an eBPF source, as decode reports them.
		for ti := range f.Topics {
			for pi := range f.Topics[ti].Partitions {
				if (ti+pi)%2 == 0 {
					f.Topics[ti].Partitions[pi].RecordBatches = nil
					e.RecordsNotCopied = append(e.RecordsNotCopied, decode.PartitionIndex{Topic: ti, Partition: pi})
				}
			}
		}
	}
	if client&0x40 != 0 { // the process behind the connection (eBPF)
		conn.Process = &capture.Process{PID: uint32(client), Comm: "fuzz"}
	}
	return e, in, true
}

// TestFuzzTxnSeeds: the transactional seeds, replayed as FuzzCorrelator
// replays its input, reach the paths they are there for: transactions
// that begin and end, and the zombie's fenced epoch.
func TestFuzzTxnSeeds(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string // event types, actions and hazard kinds that must appear
	}{
		{"clean", "txn_clean.pcapng", []string{TxnInit, TxnBegin, TxnPartitionsAdded, TxnOffsetsAdded, TxnCommit, TxnAbort}},
		{"zombie", "h_zombie_producer.pcapng", []string{TxnInit, TxnCommit, HazardZombieProducer}},
		{"hanging", "h_hanging_transaction.pcapng", []string{TxnInit, TxnBegin, TxnAbort, HazardHangingTransaction}},
		{"offsets aborted", "h_txn_offsets_aborted.pcapng", []string{TxnOffsetsAdded, TxnAbort, HazardTxnOffsetsAborted}},
		{"stuck last stable offset", "h_hanging_lso.pcapng", []string{TxnBegin, HazardHangingTransaction, "lso"}},
		{"read_committed", "txn_read_committed.pcapng", []string{TxnCommit, TxnAbort, "markers", "aborted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fuzzSeed(t, tt.file, true)
			seen := map[string]bool{}
			c := New(nil, SinkFunc(func(ev Event) {
				switch ev := ev.(type) {
				case *TransactionEvent:
					seen[ev.Action] = true
				case *HazardEvent:
					seen[ev.Kind] = true
					if ev.LastStableOffset != nil {
						seen["lso"] = true
					}
				}
			}))
			now := base
			for len(in) >= fuzzHeader {
				e, rest, ok := fuzzExchange(in, &now)
				if !ok {
					break
				}
				in = rest
				c.Exchange(e)
			}
			c.Close(now.Add(time.Hour)) // as FuzzCorrelator closes
			for _, sp := range c.Snapshot().StablePartitions {
				seen["markers"] = seen["markers"] || sp.TransactionMarkers > 0
				seen["aborted"] = seen["aborted"] || sp.AbortedTransactions > 0
			}
			for _, w := range tt.want {
				if !seen[w] {
					t.Errorf("%s not reached by the seed of %s (reached: %v)", w, tt.file, sortedKeys(seen))
				}
			}
		})
	}
}

// TestFuzzShareSeeds: the share group seeds, replayed as FuzzCorrelator
// replays its input, reach the paths they are there for: members joining
// a share group, records acquired and acknowledged, a poison record's
// redeliveries and an acquisition lock running out.
func TestFuzzShareSeeds(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string // share actions, member actions and hazard kinds that must appear
	}{
		{"clean", "share_clean.pcapng", []string{MemberJoined, ShareAcquired, ShareAcknowledged}},
		{"redelivery", "h_share_redelivery.pcapng", []string{ShareAcquired, ShareAcknowledged, HazardShareRedelivery}},
		{"ack lost", "h_share_ack_lost.pcapng", []string{ShareAcquired, HazardShareAckLost}},
		{"expired", "h_share_expired.pcapng", []string{MemberJoined, ShareAcquired, MemberExpired}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fuzzShareSeed(t, tt.file)
			if len(in) == 0 {
				t.Skip("no " + tt.file + " in testdata")
			}
			seen := map[string]bool{}
			c := New(nil, SinkFunc(func(ev Event) {
				switch ev := ev.(type) {
				case *ShareGroupEvent:
					seen[ev.Action] = true
				case *MemberEvent:
					seen[ev.Action] = true
				case *HazardEvent:
					seen[ev.Kind] = true
				}
			}))
			now := base
			for len(in) >= fuzzHeader {
				e, rest, ok := fuzzExchange(in, &now)
				if !ok {
					break
				}
				in = rest
				c.Exchange(e)
			}
			c.Close(now.Add(time.Hour)) // as FuzzCorrelator closes
			for _, w := range tt.want {
				if !seen[w] {
					t.Errorf("%s not reached by the seed of %s (reached: %v)", w, tt.file, sortedKeys(seen))
				}
			}
		})
	}
}
