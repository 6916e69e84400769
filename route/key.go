package route

import (
	"hash/fnv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Routing keys: the shard of a key is Shard(key, n). The kinds cannot
// collide: each starts with its own letter and a NUL.

// GroupKey is the key of consumer group group: its shard writes the
// group's lines.
func GroupKey(group string) string { return "g\x00" + group }

// ClientKey is the key of client (ClientOf): its shard writes the lines
// of a client bound to no group.
func ClientKey(client string) string { return "c\x00" + client }

// HostKey is the key of a client host (client_id_churn's).
func HostKey(host string) string { return "h\x00" + host }

// TxnKey is the key of every transaction and of the partitions' last
// stable offsets: one shard follows them all, since a hanging_transaction
// of a partition names the open transaction that holds it.
func TxnKey() string { return "t\x00" }

// AgentKey is the key of a source of items (kwire aggregate: an agent
// run, as wire.Agent's String names it): its shard counts its batches.
func AgentKey(agent string) string { return "a\x00" + agent }

// ClientOf names the client with client id clientID on host (the client
// address of its connection, without port): what ClientKey takes.
func ClientOf(host, clientID string) string { return host + "\x00" + clientID }

// Shard is the shard of key among n (n > 0): FNV-1a 32 of key, modulo n.
// It is the partition of the routed topic in kwire aggregate --group,
// so it must not change.
func Shard(key string, n int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32() % uint32(n))
}

// requestKeys returns the keys of what a request names: binds are those
// its client is bound to from then on (the groups the correlator binds
// it to, the groups of its transactions' offsets, and the transactions,
// TxnKey, when it names a transactional id), named those it only names
// (LeaveGroup, DescribeGroups).
func requestKeys(req kmsg.Request) (named, binds []string) {
	groups := func(gs ...string) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = GroupKey(g)
		}
		return out
	}
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		return nil, groups(q.Group)
	case *kmsg.SyncGroupRequest:
		return nil, groups(q.Group)
	case *kmsg.HeartbeatRequest:
		return nil, groups(q.Group)
	case *kmsg.OffsetCommitRequest:
		return nil, groups(q.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return nil, groups(q.Group)
	case *kmsg.ShareGroupHeartbeatRequest:
		return nil, groups(q.GroupID)
	case *kmsg.ShareFetchRequest:
		if q.GroupID != nil {
			return nil, groups(*q.GroupID)
		}
	case *kmsg.ShareAcknowledgeRequest:
		if q.GroupID != nil {
			return nil, groups(*q.GroupID)
		}
	case *kmsg.OffsetFetchRequest:
		if q.Version >= 8 {
			for _, g := range q.Groups {
				binds = append(binds, GroupKey(g.Group))
			}
			return nil, binds
		}
		return nil, groups(q.Group)
	case *kmsg.FindCoordinatorRequest:
		switch {
		case q.CoordinatorType == 1:
			return nil, []string{TxnKey()}
		case q.CoordinatorType != 0:
			return nil, nil
		case q.Version >= 4:
			return nil, groups(q.CoordinatorKeys...)
		}
		return nil, groups(q.CoordinatorKey)
	case *kmsg.LeaveGroupRequest:
		return groups(q.Group), nil
	case *kmsg.DescribeGroupsRequest:
		return groups(q.Groups...), nil
	case *kmsg.InitProducerIDRequest:
		if q.TransactionalID != nil && *q.TransactionalID != "" {
			return nil, []string{TxnKey()}
		}
	case *kmsg.ProduceRequest:
		if q.TransactionID != nil && *q.TransactionID != "" {
			return nil, []string{TxnKey()}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		return nil, []string{TxnKey()}
	case *kmsg.AddOffsetsToTxnRequest:
		return nil, []string{TxnKey(), GroupKey(q.Group)}
	case *kmsg.EndTxnRequest:
		return nil, []string{TxnKey()}
	case *kmsg.WriteTxnMarkersRequest:
		// Broker to broker: the transactions' shard reads the epochs.
		return []string{TxnKey()}, nil
	case *kmsg.TxnOffsetCommitRequest:
		return nil, []string{TxnKey(), GroupKey(q.Group)}
	}
	return nil, nil
}
