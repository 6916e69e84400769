package jsonout

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
	"github.com/kwire/kwire/internal/captest"
)

// twoWays formats every exchange both ways, and both ways again from
// batch summaries taken before its Produce records are dropped
// (AppendScanned), failing the test on the first line that differs.
type twoWays struct {
	t                   testing.TB
	fast, reference     *Lines
	scanned, scannedRef *Lines
	fastN, n            int // lines, lines written fast
	a, b, c, d          []byte
}

func newTwoWays(t testing.TB) *twoWays {
	return &twoWays{t: t, fast: NewLines(nil), reference: NewLines(&Options{Reference: true}),
		scanned: NewLines(nil), scannedRef: NewLines(&Options{Reference: true})}
}

// recordsGone calls f with the records of e's Produce request dropped, and
// their batch summaries taken before (kwire read's handoff), then puts them
// back.
func recordsGone(e *decode.Exchange, f func(produce []decode.Batches)) {
	r, ok := e.Req.(*kmsg.ProduceRequest)
	if !ok {
		f(nil)
		return
	}
	pre := decode.ScanProduce(r, nil)
	var kept [][]byte
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			p := &r.Topics[i].Partitions[j]
			kept = append(kept, p.Records)
			p.Records = nil
		}
	}
	f(pre)
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			r.Topics[i].Partitions[j].Records, kept = kept[0], kept[1:]
		}
	}
}

func (w *twoWays) Exchange(e *decode.Exchange) {
	w.t.Helper()
	w.n++
	if _, ok := appendExchange(nil, e, &decode.Topics{}, &exchangeCache{}, nil); ok {
		w.fastN++
	}
	w.a = w.fast.Append(w.a[:0], e)
	w.b = w.reference.Append(w.b[:0], e)
	if !bytes.Equal(w.a, w.b) {
		w.t.Fatalf("exchange line %d differs:\n fast      %s reference %s", w.n, w.a, w.b)
	}
	recordsGone(e, func(produce []decode.Batches) {
		w.c = w.scanned.AppendScanned(w.c[:0], e, produce)
		w.d = w.scannedRef.AppendScanned(w.d[:0], e, produce)
	})
	if !bytes.Equal(w.a, w.c) || !bytes.Equal(w.a, w.d) {
		w.t.Fatalf("exchange line %d differs with records scanned before:\n with records      %s fast, scanned   %s reference, scanned %s", w.n, w.a, w.c, w.d)
	}
}

func (w *twoWays) Anomaly(*decode.Anomaly) {}

// TestFastExchangeCaptures writes every exchange of every committed
// capture, and of damaged and lossy copies of them, both ways.
func TestFastExchangeCaptures(t *testing.T) {
	files, err := filepath.Glob("../testdata/*.pcapng")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in ../testdata (%v)", err)
	}
	fast, all := 0, 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		variants := map[string][]byte{"clean": src, "flipped": captest.FlipBytes(src, 0.002, 1)}
		if d, err := captest.DropData(src, 0.05, 1); err == nil {
			variants["dropped"] = d
		}
		for name, b := range variants {
			t.Run(filepath.Base(f)+"/"+name, func(t *testing.T) {
				w := newTwoWays(t)
				runCapture(t, b, decode.New(w, nil))
				fast, all = fast+w.fastN, all+w.n
			})
		}
	}
	t.Logf("%d exchange lines, %d of them written the fast way", all, fast)
	if fast == 0 || fast == all {
		t.Errorf("%d of %d lines fast: both ways must be exercised", fast, all)
	}
}

// runCapture reads the capture file b through sink.
func runCapture(t testing.TB, b []byte, sink capture.Sink) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.pcapng")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := capture.OpenFiles([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(context.Background(), sink); err != nil {
		t.Logf("run: %v", err) // damaged copies may end in an error: what came before counts
	}
}

// fastKeys are the APIs appendExchange writes, for the fuzzer to choose
// from.
var fastKeys = []int16{0, 1, 2, 8, 12}

// FuzzFastExchange decodes a request and a response body of one of the
// APIs exchange_fast.go writes, at any version, and requires its line to
// be the reference's, byte for byte. The topic id 01000000... is named
// (awkwardly) by a Metadata response learned first, so that lines name
// topics by id both found and not.
func FuzzFastExchange(f *testing.F) {
	for _, s := range fastSeeds() {
		f.Add(s.sel, s.version, s.flags, s.req, s.resp)
	}
	f.Fuzz(func(t *testing.T, sel, version, flags uint8, reqBody, respBody []byte) {
		key := fastKeys[int(sel)%len(fastKeys)]
		req := kmsg.RequestForKey(key)
		req.SetVersion(int16(version) % (req.MaxVersion() + 1))
		e := &decode.Exchange{Key: key, Version: req.GetVersion(), CorrelationID: int32(flags) - 3,
			ClientID: string(respBody[:min(len(respBody), int(flags&7))]),
			ReqTime:  time.Unix(1700000000, int64(flags)*1001).UTC(), ReqSize: len(reqBody) + 10, RespSize: len(respBody)}
		e.Conn = fuzzConn(flags)
		if req.ReadFrom(reqBody) == nil {
			e.Req = req
		} else {
			e.ReqErr = decode.ErrLost
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		switch {
		case flags&0x10 != 0:
			e.Response = decode.ResponseMissing
		case resp.ReadFrom(respBody) == nil:
			e.Resp, e.Response = resp, decode.ResponseSeen
			e.RespTime = e.ReqTime.Add(time.Duration(len(respBody)) * time.Microsecond)
		default:
			e.Response, e.RespErr = decode.ResponseSeen, decode.ErrUnsupportedVersion
		}
		w := newTwoWays(t)
		named := namingExchange()
		for _, l := range []*Lines{w.fast, w.reference, w.scanned, w.scannedRef} {
			l.Append(nil, named)
		}
		w.Exchange(e)
		if w.fastN == 0 {
			t.Fatalf("key %d: not written the fast way", key)
		}
	})
}

// fuzzConn is a connection, with a process (awkward comm) or without.
func fuzzConn(flags uint8) *capture.Conn {
	c := &capture.Conn{ID: uint64(flags), Client: netip.MustParseAddrPort("10.0.0.1:50000"),
		Server: netip.MustParseAddrPort("[fe80::1]:9092")}
	if flags&0x20 != 0 {
		c.Process = &capture.Process{PID: uint32(flags), Comm: "a<b>&\"c\u2028"}
	}
	return c
}

// namedID is the topic id namingExchange names.
var namedID = [16]byte{1}

// namingExchange is a Metadata exchange naming namedID.
func namingExchange() *decode.Exchange {
	name := "named <&> \u2029 \xff"
	m := kmsg.NewPtrMetadataResponse()
	m.SetVersion(12)
	m.Topics = []kmsg.MetadataResponseTopic{{Topic: &name, TopicID: namedID}}
	return &decode.Exchange{Key: 3, Version: 12, Resp: m, Conn: fuzzConn(0)}
}

type fastSeed struct {
	sel, version, flags uint8
	req, resp           []byte
}

// fastSeeds are messages of each fast API with awkward strings, topic ids
// known and not, record batches whole and cut, and errors.
func fastSeeds() []fastSeed {
	batch := recordBatch(2)
	weird := "t<&>\"\\\u2028é\x01"
	inst := "inst&"
	var seeds []fastSeed
	add := func(key int16, flags uint8, req kmsg.Request, resp kmsg.Response) {
		sel := uint8(0)
		for i, k := range fastKeys {
			if k == key {
				sel = uint8(i)
			}
		}
		for _, v := range []int16{0, 3, 5, req.MaxVersion()} {
			if v > req.MaxVersion() {
				continue
			}
			req.SetVersion(v)
			resp.SetVersion(v)
			seeds = append(seeds, fastSeed{sel, uint8(v), flags, req.AppendTo(nil), resp.AppendTo(nil)})
		}
	}

	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = -1
	pr.Topics = []kmsg.ProduceRequestTopic{
		{Topic: weird, TopicID: namedID, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 3, Records: batch}, {Partition: 4, Records: batch[:30]}}},
		{Topic: "", TopicID: [16]byte{9}},
	}
	ps := kmsg.NewPtrProduceResponse()
	ps.Topics = []kmsg.ProduceResponseTopic{{Topic: weird, Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 3, BaseOffset: 77, ErrorCode: 6}}}}
	add(0, 0x21, pr, ps)

	fr := kmsg.NewPtrFetchRequest()
	fr.Topics = []kmsg.FetchRequestTopic{{Topic: "a", TopicID: namedID, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 1, FetchOffset: 12}}}, {TopicID: [16]byte{7}}}
	fs := kmsg.NewPtrFetchResponse()
	fs.Topics = []kmsg.FetchResponseTopic{{Topic: "a", TopicID: namedID, Partitions: []kmsg.FetchResponseTopicPartition{
		{Partition: 1, HighWatermark: 100, LastStableOffset: 90, LogStartOffset: 3, RecordBatches: batch},
		{Partition: 2, ErrorCode: 1, HighWatermark: -1}}}}
	add(1, 0x02, fr, fs)
	add(1, 0x10, kmsg.NewPtrFetchRequest(), kmsg.NewPtrFetchResponse())

	lr := kmsg.NewPtrListOffsetsRequest()
	lr.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: weird, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -2}}}, {Topic: "e"}}
	ls := kmsg.NewPtrListOffsetsResponse()
	ls.Topics = []kmsg.ListOffsetsResponseTopic{{Topic: weird, Partitions: []kmsg.ListOffsetsResponseTopicPartition{{Partition: 0, Offset: 5, OldStyleOffsets: []int64{8, 9}, ErrorCode: 3}}}}
	add(2, 0x03, lr, ls)

	cr := kmsg.NewPtrOffsetCommitRequest()
	cr.Group, cr.MemberID, cr.InstanceID, cr.Generation = weird, "m-1", &inst, 4
	cr.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: namedID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 2, Offset: 40}}}, {Topic: "u"}}
	cs := kmsg.NewPtrOffsetCommitResponse()
	cs.Topics = []kmsg.OffsetCommitResponseTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{Partition: 2, ErrorCode: 25}, {Partition: 3}}}}
	add(8, 0x04, cr, cs)
	add(8, 0x05, kmsg.NewPtrOffsetCommitRequest(), kmsg.NewPtrOffsetCommitResponse())

	hr := kmsg.NewPtrHeartbeatRequest()
	hr.Group, hr.MemberID, hr.Generation = "g", weird, -1
	hs := kmsg.NewPtrHeartbeatResponse()
	hs.ErrorCode = 27
	add(12, 0x26, hr, hs)
	return seeds
}

// recordBatch is a v2 record batch header claiming n records, lz4, with
// no records after it (ScanBatches reads headers only).
func recordBatch(n int32) []byte {
	b := make([]byte, 61)
	b[7] = 10              // base offset
	b[11] = 49             // batch length: the header after it
	b[16] = 2              // magic
	b[22] = 3              // attributes: lz4
	b[26] = byte(n - 1)    // last offset delta
	b[60] = byte(n)        // records
	return append(b, b...) // two batches
}

// TestUndefinedErrorCode writes an exchange whose response carries an
// error code Kafka does not define: both ways name it UNKNOWN_<code>, as
// correlate does, never UNKNOWN_SERVER_ERROR (kerr's answer, -1's name).
func TestUndefinedErrorCode(t *testing.T) {
	for _, c := range []struct {
		code int16
		want string
	}{{5120, `"error_code":5120,"error":"UNKNOWN_5120"`}, {-1, `"error":"UNKNOWN_SERVER_ERROR"`}, {27, `"error":"REBALANCE_IN_PROGRESS"`}} {
		req, resp := kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrHeartbeatResponse()
		req.Group, req.MemberID, req.Generation = "g", "m", 3
		resp.ErrorCode = c.code
		e := &decode.Exchange{Key: 12, Version: 4, CorrelationID: 9, ClientID: "c", Req: req, Resp: resp,
			ReqTime: time.Unix(1700000000, 0).UTC(), ReqSize: 40, RespSize: 12, Conn: fuzzConn(0)}
		w := newTwoWays(t)
		w.Exchange(e) // fails on lines that differ
		if !bytes.Contains(w.a, []byte(c.want)) {
			t.Errorf("error code %d: %s, want %s", c.code, w.a, c.want)
		}
	}
	if got := ErrorName(5120); got != "UNKNOWN_5120" {
		t.Errorf("ErrorName(5120) = %s", got)
	}
}
