package burrowcmp

import (
	"context"
	"fmt"
	"net/url"
)

// What Burrow's v3 API answers (core/protocol/evaluator.go and storage.go
// of Burrow 1.2.1), with the fields the comparison reads.

// Offset is a commit Burrow stored: the offset, when it was committed
// (Unix milliseconds, the commit's own timestamp from __consumer_offsets)
// and the lag against the broker's end offset Burrow knew then.
type Offset struct {
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	Lag       uint64 `json:"lag"`
}

// PartitionStatus is one partition of a group's evaluation: its status
// (OK, WARN, STOP, STALL, REWIND), the first and last commit of the window
// Burrow evaluated, and current_lag: the newest end offset Burrow fetched
// minus the newest commit it read.
type PartitionStatus struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Status     string  `json:"status"`
	Start      *Offset `json:"start"`
	End        *Offset `json:"end"`
	CurrentLag int64   `json:"current_lag"`
	Complete   float64 `json:"complete"`
}

// GroupStatus is a group's evaluation: its status (the worst of its
// partitions', ERR for anything worse than ERR) and every partition.
type GroupStatus struct {
	Group      string             `json:"group"`
	Status     string             `json:"status"`
	Complete   float64            `json:"complete"`
	Partitions []*PartitionStatus `json:"partitions"`
	TotalLag   int64              `json:"totallag"`
}

// Lag is /v3/kafka/<cluster>/consumer/<group>/lag: the group's evaluation
// with every partition (/status lists only the partitions not OK).
func (b *Burrow) Lag(ctx context.Context, group string) (*GroupStatus, error) {
	var out struct {
		Error   bool        `json:"error"`
		Message string      `json:"message"`
		Status  GroupStatus `json:"status"`
	}
	if err := b.get(ctx, "/v3/kafka/"+Cluster+"/consumer/"+url.PathEscape(group)+"/lag", &out); err != nil {
		return nil, err
	}
	if out.Error {
		return nil, fmt.Errorf("burrow: lag of %s: %s", group, out.Message)
	}
	return &out.Status, nil
}

// EndOffsets is /v3/kafka/<cluster>/topic/<topic>: the newest end offset
// Burrow fetched for each partition.
func (b *Burrow) EndOffsets(ctx context.Context, topic string) ([]int64, error) {
	var out struct {
		Error   bool    `json:"error"`
		Message string  `json:"message"`
		Offsets []int64 `json:"offsets"`
	}
	if err := b.get(ctx, "/v3/kafka/"+Cluster+"/topic/"+url.PathEscape(topic), &out); err != nil {
		return nil, err
	}
	if out.Error {
		return nil, fmt.Errorf("burrow: topic %s: %s", topic, out.Message)
	}
	return out.Offsets, nil
}

// Consumers is /v3/kafka/<cluster>/consumer: the groups Burrow has read
// commits of.
func (b *Burrow) Consumers(ctx context.Context) ([]string, error) {
	var out struct {
		Consumers []string `json:"consumers"`
	}
	err := b.get(ctx, "/v3/kafka/"+Cluster+"/consumer", &out)
	return out.Consumers, err
}
