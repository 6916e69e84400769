package wire

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// DefaultMaxExpand is Options.MaxExpand's default: decode's default
// --max-frame (100 MiB), the largest frame an agent decodes.
const DefaultMaxExpand = 100 << 20

// Options tune Decode. A nil *Options means the defaults.
type Options struct {
	// MaxExpand caps the record bytes one exchange is rebuilt into (a
	// Fetch response's batches come back at their size, zeros after each
	// header): the aggregator's --max-frame. An exchange's record bytes
	// are also bounded by the size of the response frame they came in
	// (its RespSize): an agent decodes no frame above --max-frame, and a
	// frame holds its records. An exchange claiming more is rejected
	// (ErrCorrupt), and so is its batch. Without DeferRecords, the record
	// bytes of a whole batch are bounded by MaxExpand too: they are
	// rebuilt at once.
	MaxExpand int
	// DeferRecords leaves a Fetch response's record batches out of its
	// Item (RecordBatches nil) until Item.ExpandRecords rebuilds them into
	// a buffer the caller reuses: an aggregator holding items in its merge
	// would otherwise hold every batch at full size (header and zeros).
	DeferRecords bool
}

// Decode reads one batch, of format 2 to 7 (3, 5 and 7 signed: Decode does
// not check the tag; Keyring.Verify does). A batch of a format it does not
// know is refused with a *VersionError (ErrVersion), which names the agent
// and its kwire when the batch is of a newer format. Its items, their connections and messages are
// new, and may point into value: keep value unchanged while they are used.
// Connections are new per batch; their ID is the agent's.
func Decode(value []byte, opts *Options) (*Batch, error) {
	if len(value) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	v := value[0]
	switch {
	case !knownFormat(v):
		return nil, newerFormat(value)
	case signedFormat(v): // its tag is Keyring.Verify's: not checked here
		if len(value) < 1+TagSize {
			return nil, fmt.Errorf("%w: signed batch shorter than its tag", ErrCorrupt)
		}
		value = value[:len(value)-TagSize]
	}
	d := batchDecoder{r: reader{b: value[1:]}, maxExpand: DefaultMaxExpand, times: v >= versionV4}
	if opts != nil && opts.MaxExpand > 0 {
		d.maxExpand = opts.MaxExpand
	}
	d.total = d.maxExpand
	if opts != nil {
		d.deferRecords = opts.DeferRecords
	}
	b := &Batch{Agent: Agent{Host: d.r.string(), Run: d.r.uvarint()}, Seq: d.r.uvarint()}
	if v >= Version {
		b.Kwire = d.r.build()
	}
	for len(d.r.b) > 0 && d.r.err == nil {
		switch k := Kind(d.r.byte()); k {
		case kindConn:
			d.conn()
		case KindExchange:
			at := d.r.itemAt()
			x := d.exchange()
			b.Items = append(b.Items, Item{Kind: k, At: at, Exchange: x, records: d.deferred})
			d.deferred = nil
		case KindAnomaly:
			at := d.r.itemAt()
			b.Items = append(b.Items, Item{Kind: k, At: at, Anomaly: d.anomaly()})
		case KindCounters:
			at := d.r.itemAt()
			b.Items = append(b.Items, Item{Kind: k, At: at, Counters: d.counters()})
		default:
			d.r.fail(fmt.Sprintf("unknown item kind %d", k))
		}
	}
	if d.r.err != nil {
		return nil, d.r.err
	}
	return b, nil
}

type batchDecoder struct {
	r     reader
	conns []*capture.Conn
	// budget is what the record bytes of the exchange being read may
	// still be rebuilt into: the least of MaxExpand, its response frame's
	// size and (records not deferred) total, the batch's.
	budget, maxExpand, total int
	deferRecords             bool
	times                    bool           // format 4 on: Produce partitions carry a batch header
	deferred                 []partSegments // the exchange's, with deferRecords
}

func (d *batchDecoder) conn() {
	r := &d.r
	c := &capture.Conn{ID: r.uvarint()}
	c.Client = d.addrPort()
	c.Server = d.addrPort()
	c.Role = capture.Role(r.byte())
	c.Start = r.time()
	flags := r.byte()
	c.Handshake = flags&1 != 0
	if flags&2 != 0 {
		pid := r.uvarint()
		c.Process = &capture.Process{PID: uint32(pid), Comm: r.string(), CgroupID: r.uvarint()}
	}
	if r.err == nil {
		d.conns = append(d.conns, c)
	}
}

func (d *batchDecoder) addrPort() netip.AddrPort {
	var ap netip.AddrPort
	if err := ap.UnmarshalBinary(d.r.bytes()); err != nil {
		d.r.fail("bad address")
	}
	return ap
}

// connRef reads a connection reference: one declared before. A decoder
// gives every exchange and anomaly its connection, and what reads them
// (the correlator, the output) relies on it: a reference to none is
// corrupt.
func (d *batchDecoder) connRef() *capture.Conn {
	ref := d.r.uvarint()
	if ref == 0 {
		d.r.fail("item without a connection")
		return nil
	}
	if ref > uint64(len(d.conns)) {
		d.r.fail("undeclared connection")
		return nil
	}
	return d.conns[ref-1]
}

func (d *batchDecoder) exchange() *decode.Exchange {
	r := &d.r
	x := &decode.Exchange{Conn: d.connRef(), Key: r.int16(), Version: r.int16(), CorrelationID: r.int32(), ClientID: r.str()}
	x.ReqTime, x.RespTime = r.near(), r.near()
	x.ReqSize, x.RespSize = int(r.int32()), int(r.int32())
	x.Response = decode.ResponseState(r.byte())
	if x.Response > decode.ResponseLost {
		r.fail("bad response state")
	}
	// The record bytes a response's segments stand for are in its frame:
	// no more than its size, nor than MaxExpand.
	d.budget = max(0, min(d.maxExpand, x.RespSize))
	if !d.deferRecords {
		d.budget = min(d.budget, d.total)
	}
	x.ReqErr, x.RespErr = r.errText(), r.errText()
	if m := d.body(x.Key, x.Version, true); m != nil {
		x.Req = m.(kmsg.Request)
	}
	if m := d.body(x.Key, x.Version, false); m != nil {
		x.Resp = m.(kmsg.Response)
	}
	if n := r.count(2); n > 0 {
		x.RecordsNotCopied = make([]decode.PartitionIndex, n)
		for i := range x.RecordsNotCopied {
			x.RecordsNotCopied[i] = decode.PartitionIndex{Topic: r.index(), Partition: r.index()}
		}
	}
	return x
}

// body reads a request's or a response's body marker and message.
func (d *batchDecoder) body(key, version int16, req bool) message {
	r := &d.r
	marker := r.byte()
	if marker == bodyNone || r.err != nil {
		return nil
	}
	var m message
	if req {
		if q := kmsg.RequestForKey(key); q != nil {
			m = q
		}
	} else if p := kmsg.ResponseForKey(key); p != nil {
		m = p
	}
	if m == nil || version < 0 || version > m.MaxVersion() {
		r.fail("unknown key or version")
		return nil
	}
	m.SetVersion(version)
	switch marker {
	case bodyWithheld:
		return m
	case bodyKmsg:
		if err := m.ReadFrom(r.bytes()); err != nil {
			r.fail("kmsg: " + err.Error())
			return nil
		}
		return m
	case bodyCompact:
		switch m := m.(type) {
		case *kmsg.ProduceRequest:
			d.produceRequest(m)
		case *kmsg.ProduceResponse:
			d.produceResponse(m)
		case *kmsg.FetchRequest:
			d.fetchRequest(m)
		case *kmsg.FetchResponse:
			d.fetchResponse(m)
		case *kmsg.OffsetCommitRequest:
			d.offsetCommitRequest(m)
		case *kmsg.OffsetCommitResponse:
			d.offsetCommitResponse(m)
		default:
			r.fail("compact body of another API")
			return nil
		}
		if r.err != nil {
			return nil
		}
		return m
	}
	r.fail("bad body marker")
	return nil
}

// partSegments are a Fetch response partition's record batches, as
// encoded (segments, read before), for Item.ExpandRecords.
type partSegments struct {
	p    *kmsg.FetchResponseTopicPartition
	enc  []byte
	size int
}

// ExpandRecords rebuilds the record batches of a Fetch response decoded
// with Options.DeferRecords into buf (reused, grown as needed) and points
// the response's partitions at them; it returns buf. They are valid until
// buf is reused: the next call with it. Other items are left as they are.
func (it *Item) ExpandRecords(buf []byte) []byte {
	if len(it.records) == 0 {
		return buf
	}
	total := 0
	for _, ps := range it.records {
		total += ps.size
	}
	if cap(buf) < total || buf == nil {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	clear(buf)
	at := 0
	for _, ps := range it.records {
		out := buf[at : at+ps.size : at+ps.size]
		readSegments(&reader{b: ps.enc}, out, ps.size) // read once already: cannot fail
		ps.p.RecordBatches = out
		at += ps.size
	}
	return buf
}

func (d *batchDecoder) anomaly() *decode.Anomaly {
	r := &d.r
	a := &decode.Anomaly{Conn: d.connRef(), Kind: decode.AnomalyKind(r.str()), Dir: capture.Dir(r.byte()), Time: r.near(), Bytes: r.varint()}
	a.Key, a.Version, a.CorrelationID, a.Detail = r.int16(), r.int16(), r.int32(), r.string()
	return a
}

func (d *batchDecoder) counters() *Counters {
	c := new(Counters)
	if err := json.Unmarshal(d.r.bytes(), c); err != nil && d.r.err == nil {
		d.r.fail("counters: " + err.Error())
		return nil
	}
	copy(c.Decode.ByKey[:], c.ByKey)
	return c
}
