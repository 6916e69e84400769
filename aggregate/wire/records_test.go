package wire

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// v2Batch is a record batch as a broker sends it: header fields set,
// records standing for themselves (never read).
func v2Batch(base int64, attrs int16, lastDelta, n int32, records string) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Length: int32(49 + len(records)), Magic: 2, CRC: 0x1234567,
		Attributes: attrs, LastOffsetDelta: lastDelta, FirstTimestamp: 1, MaxTimestamp: 2,
		ProducerID: 77, ProducerEpoch: 1, FirstSequence: 5, NumRecords: n, Records: []byte(records)}
	return b.AppendTo(nil)
}

// v1Message is a v0/v1 message (a compressed wrapper when attrs says so).
func v1Message(offset int64, attrs int8, key, value string) []byte {
	m := kmsg.MessageV1{Offset: offset, MessageSize: int32(22 + len(key) + len(value)), CRC: 0x7654321, Magic: 1,
		Attributes: attrs, Timestamp: 3, Key: []byte(key), Value: []byte(value)}
	return m.AppendTo(nil)
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// TestRecordSegments: a Fetch response's record bytes of every shape the
// batch readers meet come back from the wire such that decode.ScanBatches
// and the header fields the correlator's spans read (offset, length,
// magic, attributes, last offset delta, record count) are those of the
// original, and no record byte is published. The committed captures do
// not hold them all (v0/v1 messages, compacted batches, a cut v0/v1
// message, bytes that are no batch).
func TestRecordSegments(t *testing.T) {
	full := v2Batch(100, 0x0003, 4, 5, "record-bytes-v2-a")
	tests := []struct {
		name string
		b    []byte
	}{
		{"v2 batches in a row", cat(full, v2Batch(105, 0, 0, 1, "record-bytes-v2-b"))},
		{"gap and compacted batch", cat(full, v2Batch(200, 0, 9, 3, "record-bytes-v2-c"))},
		{"control and transactional", cat(v2Batch(10, 0x30, 0, 1, "record-bytes-ctl"), v2Batch(11, 0x10, 1, 2, "record-bytes-txn"))},
		{"cut last v2 batch", cat(full, full[:40])},
		{"cut after the v2 header", cat(full, full[:len(full)-3])},
		{"v1 messages", cat(v1Message(7, 0, "key-one", "value-one"), v1Message(8, 2, "", "compressed-wrapper"))},
		{"cut v1 message", cat(v1Message(7, 0, "key-one", "value-one"), v1Message(8, 0, "key-two", "value-two")[:25])},
		{"short tail", cat(full, []byte{0, 0, 0})},
		{"no batch", []byte("not a record batch at all, only bytes")},
		{"empty", []byte{}},
		{"negative offsets", v2Batch(-5, 0, -1, 0, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(12)
			p := kmsg.NewFetchResponseTopicPartition()
			p.RecordBatches = tt.b
			resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{p}}}
			enc := NewEncoder(Agent{Host: "h", Run: 1})
			enc.Reset(1)
			at := time.Unix(1, 0)
			conn := &capture.Conn{ID: 1, Client: netip.MustParseAddrPort("10.0.0.2:40000"), Server: netip.MustParseAddrPort("10.0.0.1:9092")}
			enc.Exchange(at, &decode.Exchange{Conn: conn, Key: 1, Version: 12, Resp: resp, RespTime: at, RespSize: 100 + len(tt.b)})
			for _, secret := range []string{"record-bytes", "key-", "value-", "wrapper"} {
				if bytes.Contains(enc.Bytes(), []byte(secret)) {
					t.Errorf("%q published", secret)
				}
			}
			for _, opts := range []*Options{nil, {DeferRecords: true}} {
				b, err := Decode(bytes.Clone(enc.Bytes()), opts)
				if err != nil {
					t.Fatal(err)
				}
				it := &b.Items[0]
				it.ExpandRecords(nil)
				got := it.Exchange.Resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
				if (got == nil) != (tt.b == nil) || len(got) != len(tt.b) {
					t.Fatalf("defer %v: %d bytes back, want %d", opts != nil, len(got), len(tt.b))
				}
				if want, got := decode.ScanBatches(tt.b), decode.ScanBatches(got); want != got {
					t.Errorf("defer %v: ScanBatches %+v, want %+v", opts != nil, got, want)
				}
				if want, got := headerFields(tt.b), headerFields(got); !bytes.Equal(want, got) {
					t.Errorf("defer %v: header fields\n got %x\nwant %x", opts != nil, got, want)
				}
			}
		})
	}
}

// headerFields are the bytes of b the batch readers read, walking it as
// they do (decode.ScanBatches, correlate's spans): of a complete batch its
// offset, length, magic, and attributes, last offset delta and record
// count (v2) or attributes (v0/v1); of where they stop, its first bytes.
func headerFields(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		if len(b) < 17 {
			return append(out, b...)
		}
		size := int64(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if size < legacyHeaderLen || size > int64(len(b)) {
			return append(out, b[:17]...)
		}
		seg := b[:size]
		b = b[size:]
		switch magic := seg[16]; {
		case magic == 2 && size >= v2HeaderLen:
			out = append(out, seg[:12]...) // offset, length
			out = append(out, seg[16])     // magic
			out = append(out, seg[21:27]...)
			out = append(out, seg[57:61]...)
		case magic < 2:
			out = append(out, seg[:12]...)
			out = append(out, seg[16:18]...) // magic, attributes
		default:
			return append(out, seg[:17]...)
		}
		out = append(out, '|')
	}
	return out
}
