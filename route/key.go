package route

import (
	"hash/fnv"
	"slices"

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

// requestGroups returns the groups a request names and those of them the
// correlator binds its client to (correlate's bind callers).
func requestGroups(req kmsg.Request) (named, binds []string) {
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		return nil, []string{q.Group}
	case *kmsg.SyncGroupRequest:
		return nil, []string{q.Group}
	case *kmsg.HeartbeatRequest:
		return nil, []string{q.Group}
	case *kmsg.OffsetCommitRequest:
		return nil, []string{q.Group}
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return nil, []string{q.Group}
	case *kmsg.OffsetFetchRequest:
		if q.Version >= 8 {
			for _, g := range q.Groups {
				binds = append(binds, g.Group)
			}
			return nil, binds
		}
		return nil, []string{q.Group}
	case *kmsg.FindCoordinatorRequest:
		if q.CoordinatorType != 0 {
			return nil, nil
		}
		if q.Version >= 4 {
			return nil, slices.Clone(q.CoordinatorKeys)
		}
		return nil, []string{q.CoordinatorKey}
	case *kmsg.LeaveGroupRequest:
		return []string{q.Group}, nil
	case *kmsg.DescribeGroupsRequest:
		return slices.Clone(q.Groups), nil
	}
	return nil, nil
}
