package jsonout

import (
	"encoding/hex"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// The "req" and "resp" objects of the exchanges exchange_fast.go writes,
// as summarizeRequest and summarizeResponse fill a Summary and
// encoding/json writes it (Summary's field order and omitempty rules; a
// summary with no field set is left out, as nilIfEmpty does).

// object writes the keys of a JSON object, the commas between them.
type object struct{ more bool }

func (o *object) key(b []byte, k string) []byte {
	if o.more {
		b = append(b, ',')
	}
	o.more = true
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

// appendRequest appends `,"req":{...}` for req (fastRequest), or nothing.
func appendRequest(b []byte, req kmsg.Request, names *decode.Topics, pre *scanned) []byte {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return appendProduceRequest(b, r, names, pre)
	case *kmsg.FetchRequest:
		return appendFetchRequest(b, r, names)
	case *kmsg.ListOffsetsRequest:
		return appendListOffsetsRequest(b, r)
	case *kmsg.OffsetCommitRequest:
		return appendOffsetCommitRequest(b, r, names)
	case *kmsg.HeartbeatRequest:
		b = append(b, `,"req":{`...)
		b = groupMember(b, r.Group, r.MemberID, r.InstanceID, r.Generation)
		return append(b, '}')
	}
	return b
}

func appendProduceRequest(b []byte, r *kmsg.ProduceRequest, names *decode.Topics, pre *scanned) []byte {
	b = append(b, `,"req":{"acks":`...)
	b = strconv.AppendInt(b, int64(r.Acks), 10)
	if len(r.Topics) > 0 {
		b = append(b, `,"topics":[`...)
		for i := range r.Topics {
			t := &r.Topics[i]
			b = topicHead(b, i, t.Topic, t.TopicID, names)
			if len(t.Partitions) == 0 {
				b = append(b, "null}"...)
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				b = partHead(b, j, p.Partition)
				b = appendBatches(b, pre.next(p.Records))
				b = append(b, '}')
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendFetchRequest(b []byte, r *kmsg.FetchRequest, names *decode.Topics) []byte {
	if len(r.Topics) == 0 {
		return b // an empty summary is left out
	}
	b = append(b, `,"req":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, t.TopicID, names)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = partHead(b, j, p.Partition)
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, p.FetchOffset, 10)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendListOffsetsRequest(b []byte, r *kmsg.ListOffsetsRequest) []byte {
	if len(r.Topics) == 0 {
		return b
	}
	b = append(b, `,"req":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, [16]byte{}, nil)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = partHead(b, j, p.Partition)
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, p.Timestamp, 10)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendOffsetCommitRequest(b []byte, r *kmsg.OffsetCommitRequest, names *decode.Topics) []byte {
	b = append(b, `,"req":{`...)
	b = groupMember(b, r.Group, r.MemberID, r.InstanceID, r.Generation)
	if len(r.Topics) > 0 {
		b = append(b, `,"topics":[`...)
		for i := range r.Topics {
			t := &r.Topics[i]
			b = topicHead(b, i, t.Topic, t.TopicID, names)
			if len(t.Partitions) == 0 {
				b = append(b, "null}"...)
				continue
			}
			for j := range t.Partitions {
				p := &t.Partitions[j]
				b = partHead(b, j, p.Partition)
				b = append(b, `,"offset":`...)
				b = strconv.AppendInt(b, p.Offset, 10)
				b = append(b, '}')
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// groupMember appends the group, member_id, instance_id and generation
// fields, the first ones of the object.
func groupMember(b []byte, group, member string, instance *string, generation int32) []byte {
	var o object
	if group != "" {
		b = o.key(b, "group")
		b = appendStringNoHTML(b, group)
	}
	if member != "" {
		b = o.key(b, "member_id")
		b = appendStringNoHTML(b, member)
	}
	if instance != nil {
		b = o.key(b, "instance_id")
		b = appendStringNoHTML(b, *instance)
	}
	b = o.key(b, "generation")
	return strconv.AppendInt(b, int64(generation), 10)
}

// appendResponse appends `,"resp":{...}` for resp (fastResponse), or
// nothing.
func appendResponse(b []byte, resp kmsg.Response, names *decode.Topics) []byte {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		return appendProduceResponse(b, r, names)
	case *kmsg.FetchResponse:
		return appendFetchResponse(b, r, names)
	case *kmsg.ListOffsetsResponse:
		return appendListOffsetsResponse(b, r)
	case *kmsg.OffsetCommitResponse:
		return appendOffsetCommitResponse(b, r, names)
	}
	// HeartbeatResponse: nothing of it is summarized.
	return b
}

func appendProduceResponse(b []byte, r *kmsg.ProduceResponse, names *decode.Topics) []byte {
	if len(r.Topics) == 0 {
		return b
	}
	b = append(b, `,"resp":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, t.TopicID, names)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = partHead(b, j, p.Partition)
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, p.BaseOffset, 10)
			b = errorCodeField(b, p.ErrorCode)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendFetchResponse(b []byte, r *kmsg.FetchResponse, names *decode.Topics) []byte {
	if len(r.Topics) == 0 {
		return b
	}
	b = append(b, `,"resp":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, t.TopicID, names)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = partHead(b, j, p.Partition)
			b = errorCodeField(b, p.ErrorCode)
			b = append(b, `,"high_watermark":`...)
			b = strconv.AppendInt(b, p.HighWatermark, 10)
			if r.Version >= 4 {
				b = append(b, `,"last_stable_offset":`...)
				b = strconv.AppendInt(b, p.LastStableOffset, 10)
			}
			if r.Version >= 5 {
				b = append(b, `,"log_start_offset":`...)
				b = strconv.AppendInt(b, p.LogStartOffset, 10)
			}
			b = appendBatches(b, decode.ScanBatches(p.RecordBatches))
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendListOffsetsResponse(b []byte, r *kmsg.ListOffsetsResponse) []byte {
	if len(r.Topics) == 0 {
		return b
	}
	b = append(b, `,"resp":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, [16]byte{}, nil)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			off := p.Offset
			if r.Version == 0 && len(p.OldStyleOffsets) > 0 {
				off = p.OldStyleOffsets[0]
			}
			b = partHead(b, j, p.Partition)
			b = append(b, `,"offset":`...)
			b = strconv.AppendInt(b, off, 10)
			b = errorCodeField(b, p.ErrorCode)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

func appendOffsetCommitResponse(b []byte, r *kmsg.OffsetCommitResponse, names *decode.Topics) []byte {
	if len(r.Topics) == 0 {
		return b
	}
	b = append(b, `,"resp":{"topics":[`...)
	for i := range r.Topics {
		t := &r.Topics[i]
		b = topicHead(b, i, t.Topic, t.TopicID, names)
		if len(t.Partitions) == 0 {
			b = append(b, "null}"...)
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			b = partHead(b, j, p.Partition)
			b = errorCodeField(b, p.ErrorCode)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// topicHead appends the start of the i'th topic object of a summary, up
// to `"partitions":`, followed by '[' unless the caller writes null. The
// name comes from names when the message names the topic by id only (see
// topic).
func topicHead(b []byte, i int, name string, id [16]byte, names *decode.Topics) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '{')
	hasID := id != [16]byte{}
	if name == "" && hasID {
		name, _ = names.Name(id)
	}
	if name != "" {
		b = append(b, `"topic":`...)
		b = appendStringNoHTML(b, name)
		b = append(b, ',')
	}
	if hasID {
		b = append(b, `"topic_id":"`...)
		b = hex.AppendEncode(b, id[:])
		b = append(b, `",`...)
	}
	b = append(b, `"partitions":`...)
	return b
}

// partHead appends the start of the j'th partition object, up to its
// partition number; the '[' of the list before the first.
func partHead(b []byte, j int, partition int32) []byte {
	if j == 0 {
		b = append(b, `[{"partition":`...)
	} else {
		b = append(b, `,{"partition":`...)
	}
	return strconv.AppendInt(b, int64(partition), 10)
}

func errorCodeField(b []byte, code int16) []byte {
	if code == 0 {
		return b
	}
	b = append(b, `,"error_code":`...)
	return strconv.AppendInt(b, int64(code), 10)
}

// appendBatches appends the fields withBatches fills from s, read from
// record batch headers: batches, records, first_offset, next_offset,
// bytes, partial_batch, compression (those that are not zero).
func appendBatches(b []byte, s decode.Batches) []byte {
	if s.Batches != 0 {
		b = append(b, `,"batches":`...)
		b = strconv.AppendInt(b, int64(s.Batches), 10)
	}
	if s.Records != 0 {
		b = append(b, `,"records":`...)
		b = strconv.AppendInt(b, s.Records, 10)
	}
	if s.Batches > 0 {
		b = append(b, `,"first_offset":`...)
		b = strconv.AppendInt(b, s.FirstOffset, 10)
		b = append(b, `,"next_offset":`...)
		b = strconv.AppendInt(b, s.NextOffset, 10)
	}
	if s.Bytes != 0 {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, s.Bytes, 10)
	}
	if s.Partial {
		b = append(b, `,"partial_batch":true`...)
	}
	if c := codecText[s.Codecs]; c != "" {
		b = append(b, `,"compression":"`...)
		b = append(b, c...)
		b = append(b, '"')
	}
	return b
}

// codecText is codecNames of every mask.
var codecText = func() (t [256]string) {
	for m := range t {
		t[m] = codecNames(uint8(m))
	}
	return t
}()
