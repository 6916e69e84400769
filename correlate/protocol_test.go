package correlate

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sloppyV1 is v0 metadata labelled v1: no owned partitions follow the user
// data, as some clients sent it (franz-go #493).
func sloppyV1(topics ...string) []byte {
	b := consumerMeta(0, topics...)
	b[1] = 1
	return b
}

func TestDecodeSubscription(t *testing.T) {
	v3 := kmsg.NewConsumerMemberMetadata()
	v3.Version, v3.Topics, v3.Rack = 3, []string{"b", "a"}, kmsg.StringPtr("r1")
	tests := []struct {
		name   string
		meta   []byte
		want   []string
		wantOK bool
	}{
		{"v0", consumerMeta(0, "t"), []string{"t"}, true},
		{"v1", consumerMeta(1, "b", "a", "b"), []string{"a", "b"}, true},
		{"v3 with rack", v3.AppendTo(nil), []string{"a", "b"}, true},
		{"v1 without owned partitions falls back to v0", sloppyV1("x", "y"), []string{"x", "y"}, true},
		{"garbage", []byte{0, 5, 1}, nil, false},
		{"empty", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := bytes.Clone(tt.meta)
			got, ok := decodeSubscription(tt.meta)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("topics (-want +got):\n%s", d)
			}
			if !bytes.Equal(in, tt.meta) {
				t.Errorf("input modified: %x -> %x", in, tt.meta)
			}
		})
	}
}

func TestDecodeAssignment(t *testing.T) {
	tests := []struct {
		name   string
		b      []byte
		want   map[string][]int32
		wantOK bool
	}{
		{"empty bytes are no partitions", nil, map[string][]int32{}, true},
		{"sorted", consumerAssignment(map[string][]int32{"t": {2, 0, 1}}), map[string][]int32{"t": {0, 1, 2}}, true},
		{"truncated", consumerAssignment(map[string][]int32{"t": {2, 0, 1}})[:7], nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := decodeAssignment(tt.b)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("assignment (-want +got):\n%s", d)
			}
		})
	}
}

// TestSloppyMetadataInGeneration: the leader's JoinGroup lists a member
// whose v1 metadata lacks owned partitions; its subscription is still read.
func TestSloppyMetadataInGeneration(t *testing.T) {
	h := newHarness(t, nil)
	c := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	h.ex(0, c, "c1", joinReq(9, "g", "m1", sloppyV1("orders")),
		joinResp(0, 1, "m1", "m1", map[string][]byte{"m1": sloppyV1("orders")}))
	h.ex(10*ms, c, "c1", syncReq("g", "m1", 1, map[string]tps{"m1": {"orders": {0}}}), syncResp(0, tps{"orders": {0}}))
	evs := h.events("generation")
	if len(evs) != 1 {
		t.Fatalf("got %d generation events, want 1", len(evs))
	}
	if d := diff([]string{"orders"}, evs[0].(*GenerationEvent).Members[0].Subscription); d != "" {
		t.Errorf("subscription (-want +got):\n%s", d)
	}
}

// TestOpaqueProtocol: a connect group's assignments are not decoded.
func TestOpaqueProtocol(t *testing.T) {
	h := newHarness(t, nil)
	c := h.conn("10.0.0.1:5000", "10.0.0.9:9092")
	join := joinReq(9, "connect-cluster", "w1", []byte("worker-metadata"))
	join.ProtocolType = "connect"
	join.Protocols[0].Name = "sessioned"
	resp := joinResp(0, 1, "w1", "w1", map[string][]byte{"w1": []byte("worker-metadata")})
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("connect"), kmsg.StringPtr("sessioned")
	h.ex(0, c, "w", join, resp)
	sync := syncReq("connect-cluster", "w1", 1, nil)
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("connect"), kmsg.StringPtr("sessioned")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = "w1", []byte("connectors: a, b")
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	sresp := syncResp(0, nil)
	sresp.ProtocolType, sresp.Protocol = kmsg.StringPtr("connect"), kmsg.StringPtr("sessioned")
	sresp.MemberAssignment = []byte("connectors: a, b")
	h.ex(10*ms, c, "w", sync, sresp)

	evs := h.events("generation")
	if len(evs) != 1 {
		t.Fatalf("got %d generation events, want 1", len(evs))
	}
	g := evs[0].(*GenerationEvent)
	want := GenerationMember{MemberID: "w1", ClientID: "w", ClientHost: "10.0.0.1", AssignmentBytes: 16}
	if d := diff(want, g.Members[0]); d != "" || !g.OpaqueProtocol || g.ProtocolType != "connect" {
		t.Errorf("opaque=%v type=%q member (-want +got):\n%s", g.OpaqueProtocol, g.ProtocolType, d)
	}
}
