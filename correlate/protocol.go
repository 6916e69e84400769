package correlate

import (
	"bytes"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer protocol (protocol type "consumer") is the only one whose
// member metadata and assignments kwire decodes; others (connect, ...) are
// opaque and only their sizes are kept.
const consumerProtocol = "consumer"

// decodable reports whether metadata and assignments of protocolType are
// decoded: "consumer", or unknown yet ("": decoding is attempted).
func decodable(protocolType string) bool {
	return protocolType == consumerProtocol || protocolType == ""
}

// decodeSubscription reads consumer-protocol member metadata and returns
// its sorted topics. Like franz-go's group balancer, metadata that fails to
// parse as v1 is retried as v0: some clients claimed v1 without sending
// its owned partitions. b is not modified (it may alias capture buffers).
func decodeSubscription(b []byte) ([]string, bool) {
	var meta kmsg.ConsumerMemberMetadata
	meta.Default()
	if err := meta.ReadFrom(b); err != nil {
		if !bytes.HasPrefix(b, []byte{0, 1}) {
			return nil, false
		}
		v0 := bytes.Clone(b)
		v0[0], v0[1] = 0, 0
		meta = kmsg.ConsumerMemberMetadata{}
		meta.Default()
		if err := meta.ReadFrom(v0); err != nil {
			return nil, false
		}
	}
	topics := slices.Clone(meta.Topics)
	slices.Sort(topics)
	return slices.Compact(topics), true
}

// decodeAssignment reads a consumer-protocol assignment into topic ->
// sorted partitions. Empty bytes are an empty assignment.
func decodeAssignment(b []byte) (map[string][]int32, bool) {
	out := map[string][]int32{}
	if len(b) == 0 {
		return out, true
	}
	var a kmsg.ConsumerMemberAssignment
	a.Default()
	if err := a.ReadFrom(b); err != nil {
		return nil, false
	}
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	return sortedAssignment(out), true
}

// protocolMetadata returns the metadata a JoinGroup request offered for
// protocol name.
func protocolMetadata(req *kmsg.JoinGroupRequest, name string) ([]byte, bool) {
	for _, p := range req.Protocols {
		if p.Name == name {
			return p.Metadata, true
		}
	}
	return nil, false
}
