package jsonout

import (
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/decode"
)

// Summary is the compact view of a request or response body: the fields
// that matter to group and commit analysis. Record keys and values, SASL
// bytes and assignment payloads are never part of it.
type Summary struct {
	Group          string   `json:"group,omitempty"`
	Groups         []string `json:"groups,omitempty"`
	CoordinatorKey []string `json:"coordinator_keys,omitempty"`
	KeyType        *int8    `json:"key_type,omitempty"`
	MemberID       string   `json:"member_id,omitempty"`
	InstanceID     *string  `json:"instance_id,omitempty"`
	Generation     *int32   `json:"generation,omitempty"`
	MemberEpoch    *int32   `json:"member_epoch,omitempty"`
	Leader         string   `json:"leader,omitempty"`
	ProtocolType   string   `json:"protocol_type,omitempty"`
	Protocols      []string `json:"protocols,omitempty"`
	Protocol       string   `json:"protocol,omitempty"`
	Members        []string `json:"members,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	SessionTimeout *int32   `json:"session_timeout_ms,omitempty"`
	RebalanceTO    *int32   `json:"rebalance_timeout_ms,omitempty"`
	Acks           *int16   `json:"acks,omitempty"`
	Mechanism      string   `json:"mechanism,omitempty"`
	Coordinators   []Node   `json:"coordinators,omitempty"`
	Topics         []Topic  `json:"topics,omitempty"`
}

// Node is a broker named in a response (FindCoordinator).
type Node struct {
	Key       string `json:"key,omitempty"`
	NodeID    int32  `json:"node_id"`
	Host      string `json:"host"`
	Port      int32  `json:"port"`
	ErrorCode int16  `json:"error_code,omitempty"`
}

// Topic is one topic's partitions in a summary. TopicID is set (hex) when
// the message names the topic by id; Topic is then filled from the
// Metadata responses seen so far, or left empty when unknown.
type Topic struct {
	Topic      string      `json:"topic,omitempty"`
	TopicID    string      `json:"topic_id,omitempty"`
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition's numbers in a summary. Offset is the fetch
// position (Fetch), committed offset (OffsetCommit/OffsetFetch), the base
// offset assigned (Produce response), the timestamp asked for (ListOffsets
// request: -1 latest, -2 earliest) or the offset found (its response).
type Partition struct {
	Partition     int32  `json:"partition"`
	Offset        *int64 `json:"offset,omitempty"`
	ErrorCode     int16  `json:"error_code,omitempty"`
	HighWatermark *int64 `json:"high_watermark,omitempty"`
	LastStable    *int64 `json:"last_stable_offset,omitempty"`
	LogStart      *int64 `json:"log_start_offset,omitempty"`
	Batches       int    `json:"batches,omitempty"`
	Records       int64  `json:"records,omitempty"`
	FirstOffset   *int64 `json:"first_offset,omitempty"`
	NextOffset    *int64 `json:"next_offset,omitempty"`
	Bytes         int64  `json:"bytes,omitempty"`
	Partial       bool   `json:"partial_batch,omitempty"`
	Codecs        string `json:"compression,omitempty"`
	// NotCopied: the source did not copy the record bytes (eBPF --snap),
	// so the batch fields above are unknown, not zero.
	NotCopied bool `json:"records_not_copied,omitempty"`
}

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }

// topicIDs names topics by id (hex). It returns "" for the zero id.
func topicID(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// markNotCopied marks the partitions of a Produce request or Fetch
// response summary whose record bytes were not copied (by position, as
// decode.Exchange.RecordsNotCopied lists them).
func markNotCopied(s *Summary, ix []decode.PartitionIndex) {
	if s == nil {
		return
	}
	for _, i := range ix {
		if i.Topic < len(s.Topics) && i.Partition < len(s.Topics[i.Topic].Partitions) {
			s.Topics[i.Topic].Partitions[i.Partition].NotCopied = true
		}
	}
}

// withBatches fills p from b, read from record batch headers.
func withBatches(p *Partition, b decode.Batches) {
	p.Batches, p.Records, p.Bytes, p.Partial = b.Batches, b.Records, b.Bytes, b.Partial
	if b.Batches > 0 {
		p.FirstOffset, p.NextOffset = i64(b.FirstOffset), i64(b.NextOffset)
	}
	p.Codecs = codecNames(b.Codecs)
}

var codecName = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

func codecNames(mask uint8) string {
	s := ""
	for c, n := range codecName {
		if mask&(1<<c) != 0 && c != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	return s
}

// scanned gives the batch summary of each partition of a Produce request
// in turn (decode.ScanProduce's order): from pre, taken earlier, or by
// scanning the records when pre is nil.
type scanned struct {
	pre []decode.Batches
	n   int
}

func (s *scanned) next(records []byte) decode.Batches {
	if s == nil || s.n >= len(s.pre) {
		return decode.ScanBatches(records)
	}
	s.n++
	return s.pre[s.n-1]
}

// Summarize returns the summary of a request and of a response (either may
// be nil). names resolves topic ids; it may be nil.
func Summarize(req kmsg.Request, resp kmsg.Response, names *decode.Topics) (rq, rs *Summary) {
	return summarize(req, resp, names, nil)
}

// summarize is Summarize with a Produce request's batch summaries from
// pre when it has them (Lines.AppendScanned).
func summarize(req kmsg.Request, resp kmsg.Response, names *decode.Topics, pre *scanned) (rq, rs *Summary) {
	if req != nil {
		rq = summarizeRequest(req, names, pre)
	}
	if resp != nil {
		rs = summarizeResponse(resp, names)
	}
	return rq, rs
}
