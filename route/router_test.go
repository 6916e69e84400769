package route

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// sent is one item a Router gave to a shard.
type sent struct {
	shard int32
	item  string
}

func conn(id uint64) *capture.Conn {
	return &capture.Conn{ID: id, Client: netip.MustParseAddrPort("10.0.0.1:40000"), Server: netip.MustParseAddrPort("10.0.0.9:9092")}
}

func exchange(id uint64, clientID string, req kmsg.Request) *decode.Exchange {
	return &decode.Exchange{Conn: conn(id), Key: req.Key(), ClientID: clientID, Req: req}
}

func join(group string) kmsg.Request {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group = group
	return r
}

func leave(group string) kmsg.Request {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Group = group
	return r
}

// TestRouter: which shards each item of a short story goes to.
func TestRouter(t *testing.T) {
	const n = 8
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	client := ClientOf("10.0.0.1", "c1")
	self, host := Shard(ClientKey(client), n), Shard(HostKey("10.0.0.1"), n)
	ga, gb := Shard(GroupKey("a"), n), Shard(GroupKey("b"), n)
	if len(uniq(self, host, ga, gb)) != 4 {
		t.Fatalf("the test wants 4 shards apart: client %d, host %d, a %d, b %d", self, host, ga, gb)
	}
	all := func(item string) []sent {
		var out []sent
		for q := range int32(n) {
			out = append(out, sent{q, item})
		}
		return out
	}
	type step struct {
		name string
		at   time.Time
		x    *decode.Exchange // or
		a    *decode.Anomaly
		want []sent
	}
	steps := []step{
		{name: "hello", at: t0, x: exchange(1, "c1", kmsg.NewPtrApiVersionsRequest()),
			want: sorted(sent{self, "hello"}, sent{host, "hello"})},
		{name: "metadata", at: t0, x: exchange(1, "c1", kmsg.NewPtrMetadataRequest()), want: all("metadata")},
		{name: "join", at: t0.Add(time.Second), x: exchange(2, "c1", join("a")),
			// the earlier fetch first: the client is bound to a now
			want: []sent{{ga, "hello"}, {ga, "join"}}},
		{name: "leave", at: t0.Add(2 * time.Second), x: exchange(2, "c1", leave("b")),
			want: sorted(sent{ga, "leave"}, sent{gb, "leave"})},
		{name: "earlier", at: t0.Add(-time.Second), x: exchange(1, "c1", kmsg.NewPtrFetchRequest()),
			want: sorted(sent{ga, "earlier"}, sent{host, "earlier"})},
		{name: "unbound fetch", at: t0, x: exchange(4, "c2", kmsg.NewPtrFetchRequest()), want: all("unbound fetch")},
		{name: "produce", at: t0.Add(3 * time.Second), x: exchange(1, "c1", kmsg.NewPtrProduceRequest()),
			want: sorted(sent{self, "produce"}, sent{ga, "produce"})},
		{name: "gap", a: &decode.Anomaly{Conn: conn(2)}, want: sorted(sent{self, "gap"}, sent{ga, "gap"})},
		{name: "stray", a: &decode.Anomaly{Conn: conn(3)}, want: all("stray")},
	}
	var got []sent
	var cur string
	r := New[string](n, func(q int32, item string) {
		if item != cur && item != "hello" {
			t.Errorf("%s: sent %s, which is not buffered", cur, item)
		}
		got = append(got, sent{q, item})
	})
	for _, s := range steps {
		got, cur = nil, s.name
		if s.x != nil {
			r.Exchange("agent", s.at, s.x, s.name)
		} else {
			r.Anomaly("agent", s.a, s.name)
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: sent %v, want %v", s.name, got, s.want)
		}
	}
	if k, known := r.AnomalyClient("agent", &decode.Anomaly{Conn: conn(2)}); k != client || !known {
		t.Errorf("AnomalyClient of connection 2: %q %v, want %q true", k, known, client)
	}
	if k, known := r.AnomalyClient("other", &decode.Anomaly{Conn: conn(2)}); k != ClientOf("10.0.0.1", "") || known {
		t.Errorf("AnomalyClient of another source's connection 2: %q %v, want the host's", k, known)
	}
}

func uniq(qs ...int32) []int32 {
	slices.Sort(qs)
	return slices.Compact(qs)
}

func sorted(s ...sent) []sent {
	slices.SortFunc(s, func(a, b sent) int { return int(a.shard - b.shard) })
	return s
}

// TestEventKey: which key owns each kind of line.
func TestEventKey(t *testing.T) {
	tests := []struct {
		name string
		ev   correlate.Event
		want string
	}{
		{"member", &correlate.MemberEvent{Group: "a"}, GroupKey("a")},
		{"group hazard", &correlate.HazardEvent{Group: "a", ClientHost: "h", ClientID: "c"}, GroupKey("a")},
		{"churn", &correlate.HazardEvent{Kind: correlate.HazardClientIDChurn, ClientHost: "h"}, HostKey("h")},
		{"client hazard", &correlate.HazardEvent{ClientHost: "h", ClientID: "c"}, ClientKey(ClientOf("h", "c"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := EventKey(tt.ev); !ok || got != tt.want {
				t.Errorf("EventKey = %q %v, want %q true", got, ok, tt.want)
			}
		})
	}
}
