package realgen

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogTruth is one partition's records as the broker holds them once the
// scenario is over (a consumer of the whole partition, read_uncommitted).
type LogTruth struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	LogStart  int64  `json:"log_start_offset"`
	End       int64  `json:"high_watermark"`
	// Records are runs [first key index, first offset, count] of the
	// records, keyed "k<i>" by the Java producer, at consecutive offsets
	// with consecutive keys; a record with another key is a run of its
	// own with key index -1.
	Records [][3]int64 `json:"records"`
}

// keyAt returns the key index of the record at off, -1 when there is
// none (or it has no "k<i>" key).
func (l *LogTruth) keyAt(off int64) int64 {
	for _, r := range l.Records {
		if off >= r[1] && off < r[1]+r[2] && r[0] >= 0 {
			return r[0] + off - r[1]
		}
	}
	return -1
}

// listOffset asks the partition's leader for its earliest (-2) or latest
// (-1) offset.
func listOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("ListOffsets %s/%d: no answer", topic, partition)
}

// readLog reads every record of topic/partition from the broker.
func (e *Env) readLog(ctx context.Context, topic string, partition int32) (LogTruth, error) {
	lt := LogTruth{Topic: topic, Partition: partition}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.C.Addrs()...), kgo.ClientID("rk-truth"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return lt, err
	}
	defer cl.Close()
	if lt.LogStart, err = listOffset(ctx, cl, topic, partition, -2); err != nil {
		return lt, fmt.Errorf("%s/%d earliest: %w", topic, partition, err)
	}
	if lt.End, err = listOffset(ctx, cl, topic, partition, -1); err != nil {
		return lt, fmt.Errorf("%s/%d latest: %w", topic, partition, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	next := lt.LogStart
	for next < lt.End {
		fs := cl.PollFetches(rctx)
		if err := fs.Err0(); err != nil {
			return lt, fmt.Errorf("read %s/%d at %d of %d: %w", topic, partition, next, lt.End, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			key := int64(-1)
			if k, ok := strings.CutPrefix(string(r.Key), "k"); ok {
				if n, err := strconv.ParseInt(k, 10, 64); err == nil {
					key = n
				}
			}
			if n := len(lt.Records); n > 0 && key >= 0 {
				if l := &lt.Records[n-1]; l[0] >= 0 && l[0]+l[2] == key && l[1]+l[2] == r.Offset {
					l[2]++
					next = r.Offset + 1
					return
				}
			}
			lt.Records = append(lt.Records, [3]int64{key, r.Offset, 1})
			next = r.Offset + 1
		})
	}
	e.Logf("%s/%d: log %d..%d, %d runs", topic, partition, lt.LogStart, lt.End, len(lt.Records))
	return lt, nil
}

// AckedLost are records a producer's broker acknowledged that the
// partition's log no longer holds at their offset: lost (acks=1, the
// leader failed before its followers had them).
type AckedLost struct {
	ClientID  string `json:"client_id"`
	Acks      string `json:"acks"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Acked counts the records the producer had acknowledged.
	Acked int64 `json:"acked"`
	// Offsets are the lost records' offsets, as [first, last] runs; N
	// counts them.
	Offsets [][2]int64 `json:"offsets"`
	N       int64      `json:"n"`
}

// ackedLost compares the records producer reports (report_acked) say
// were acknowledged with the log.
func ackedLost(rs []Report, client string, l LogTruth) (AckedLost, error) {
	out := AckedLost{ClientID: client, Topic: l.Topic, Partition: l.Partition}
	found := false
	for _, r := range rs {
		if r.Kind != "produced" || r.ClientID != client || r.Topic != l.Topic || r.Partition != l.Partition {
			continue
		}
		var p struct {
			Acks  string     `json:"acks"`
			Acked [][3]int64 `json:"acked"`
		}
		if err := json.Unmarshal(r.Raw, &p); err != nil {
			return out, err
		}
		found, out.Acks = true, p.Acks
		for _, run := range p.Acked {
			for i := int64(0); i < run[2]; i++ {
				key, off := run[0]+i, run[1]+i
				out.Acked++
				if l.keyAt(off) == key {
					continue
				}
				out.N++
				if n := len(out.Offsets); n > 0 && out.Offsets[n-1][1]+1 == off {
					out.Offsets[n-1][1] = off
				} else {
					out.Offsets = append(out.Offsets, [2]int64{off, off})
				}
			}
		}
	}
	if !found {
		return out, fmt.Errorf("no produced report of %s for %s/%d", client, l.Topic, l.Partition)
	}
	return out, nil
}
