package decode

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

func apiVersionsReq() *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.ClientSoftwareName, r.ClientSoftwareVersion = "kgo", "1.0"
	return r
}

func apiVersionsResp() *kmsg.ApiVersionsResponse {
	r := kmsg.NewPtrApiVersionsResponse()
	r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 0, MaxVersion: 11}}
	return r
}

func metadataReq() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr("orders")
	r.Topics = append(r.Topics, t)
	return r
}

func heartbeatReq(gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = "g1", "m1", gen
	return r
}

func heartbeatResp(code int16) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.ErrorCode = code
	return r
}

func produceReq(acks int16, records int) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Acks = acks
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, records) // opaque to the decoder
	for i := range p.Records {
		p.Records[i] = byte(i*7 + 3)
	}
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func produceResp() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "orders"
	t.Partitions = append(t.Partitions, kmsg.NewProduceResponseTopicPartition())
	r.Topics = append(r.Topics, t)
	return r
}

// damageClientID sets a request frame's client id length beyond the
// frame, as a flipped byte would.
func damageClientID(frame []byte) []byte {
	f := append([]byte(nil), frame...)
	f[12] |= 0x40
	return f
}

func summary(r *recorder) []string {
	var out []string
	for _, x := range r.ex {
		s := fmt.Sprintf("%s v%d #%d %s", kmsg.NameForKey(x.Key), x.Version, x.Corr, x.Response)
		if !x.HasReq {
			s += " noreq"
		}
		if x.Response == ResponseSeen && !x.HasResp {
			s += " noresp"
		}
		if x.ErrorCode != 0 {
			s += fmt.Sprintf(" err=%d", x.ErrorCode)
		}
		out = append(out, s)
	}
	return out
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n-want %v\n+got  %v", what, want, got)
	}
}

func TestDecode(t *testing.T) {
	unsupported := kmsg.NewPtrApiVersionsResponse()
	unsupported.ErrorCode = 35
	tests := []struct {
		name      string
		opts      *Options
		steps     []step
		want      []string
		anomalies []AnomalyKind
	}{{
		name: "flexible and non-flexible headers, ApiVersions response header v0",
		steps: []step{
			req(reqFrame(apiVersionsReq(), 3, 1, "c")), resp(respFrame(apiVersionsResp(), 3, 1)),
			req(reqFrame(metadataReq(), 12, 2, "c")), resp(respFrame(kmsg.NewPtrMetadataResponse(), 12, 2)),
			req(reqFrame(heartbeatReq(3), 0, 3, "c")), resp(respFrame(heartbeatResp(27), 0, 3)),
		},
		want: []string{"ApiVersions v3 #1 seen", "Metadata v12 #2 seen", "Heartbeat v0 #3 seen err=27"},
	}, {
		name: "pipelined requests answered in order",
		steps: []step{
			req(cat(reqFrame(heartbeatReq(1), 4, 7, "c"), reqFrame(heartbeatReq(1), 4, 8, "c"), reqFrame(heartbeatReq(1), 4, 9, "c"))),
			resp(cat(respFrame(heartbeatResp(0), 4, 7), respFrame(heartbeatResp(0), 4, 8), respFrame(heartbeatResp(0), 4, 9))),
		},
		want: []string{"Heartbeat v4 #7 seen", "Heartbeat v4 #8 seen", "Heartbeat v4 #9 seen"},
	}, {
		name: "acks=0 produce expects no response",
		steps: []step{
			req(reqFrame(produceReq(0, 300), 9, 1, "p")),
			req(reqFrame(produceReq(-1, 300), 9, 2, "p")), resp(respFrame(produceResp(), 9, 2)),
		},
		want: []string{"Produce v9 #1 not_expected", "Produce v9 #2 seen"},
	}, {
		name: "UNSUPPORTED_VERSION ApiVersions answer is a v0 body",
		steps: []step{
			req(reqFrame(apiVersionsReq(), 4, 1, "c")), resp(respFrame(unsupported, 0, 1)),
		},
		want: []string{"ApiVersions v4 #1 seen err=35"},
	}, {
		name: "response whose request was not seen",
		steps: []step{
			resp(respFrame(heartbeatResp(0), 4, 42)),
			req(reqFrame(heartbeatReq(1), 4, 43, "c")), resp(respFrame(heartbeatResp(0), 4, 43)),
		},
		want:      []string{"Heartbeat v4 #43 seen"},
		anomalies: []AnomalyKind{AnomalyUnmatchedResponse},
	}, {
		// A flipped byte of a capture file in a client id length: the
		// request is the next of its connection, its answer is decoded.
		name: "damaged client id length",
		steps: []step{
			req(reqFrame(heartbeatReq(1), 4, 7, "c")), resp(respFrame(heartbeatResp(0), 4, 7)),
			req(damageClientID(reqFrame(heartbeatReq(1), 4, 8, "c"))), resp(respFrame(heartbeatResp(27), 4, 8)),
			req(reqFrame(heartbeatReq(1), 4, 9, "c")), resp(respFrame(heartbeatResp(0), 4, 9)),
		},
		want:      []string{"Heartbeat v4 #7 seen", "Heartbeat v4 #8 seen noreq err=27", "Heartbeat v4 #9 seen"},
		anomalies: []AnomalyKind{AnomalyDecodeError},
	}, {
		name: "damaged client id length of a connection's first request",
		steps: []step{
			req(damageClientID(reqFrame(apiVersionsReq(), 3, 0, "c"))), resp(respFrame(apiVersionsResp(), 3, 0)),
			req(reqFrame(metadataReq(), 12, 1, "c")), resp(respFrame(kmsg.NewPtrMetadataResponse(), 12, 1)),
		},
		want:      []string{"ApiVersions v3 #0 seen noreq", "Metadata v12 #1 seen"},
		anomalies: []AnomalyKind{AnomalyDecodeError},
	}, {
		// Not the next correlation id: not taken for a request.
		name: "damaged client id length, correlation id out of turn",
		steps: []step{
			req(reqFrame(heartbeatReq(1), 4, 7, "c")), resp(respFrame(heartbeatResp(0), 4, 7)),
			req(damageClientID(reqFrame(heartbeatReq(1), 4, 20, "c"))), resp(respFrame(heartbeatResp(0), 4, 20)),
		},
		want:      []string{"Heartbeat v4 #7 seen"},
		anomalies: []AnomalyKind{AnomalyUnmatchedResponse, AnomalyResync}, // its bytes, never resynced
	}, {
		name: "request never answered before the capture ended",
		steps: []step{
			req(reqFrame(heartbeatReq(1), 4, 1, "c")),
		},
		want: []string{"Heartbeat v4 #1 missing"},
	}}
	for _, tt := range tests {
		for _, split := range []int{0, 1, 7} {
			t.Run(fmt.Sprintf("%s/split=%d", tt.name, split), func(t *testing.T) {
				r, _, _ := feed(tt.opts, newConn(capture.RolePort, true), split, tt.steps...)
				diff(t, "exchanges", tt.want, summary(r))
				diff(t, "anomalies", tt.anomalies, r.kinds())
			})
		}
	}
}

// TestTopicsBounded: a stream of made-up topic ids does not grow Topics
// past MaxTopicNames; a name learned after it is known.
func TestTopicsBounded(t *testing.T) {
	var names Topics
	id := func(i int) [16]byte { return [16]byte{1, byte(i >> 16), byte(i >> 8), byte(i)} }
	meta := func(i int) *Exchange {
		r := kmsg.NewPtrMetadataResponse()
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(fmt.Sprint("t", i)), id(i)
		r.Topics = append(r.Topics, mt)
		return &Exchange{Resp: r}
	}
	for i := range MaxTopicNames + 10 {
		if i == MaxTopicNames-1 {
			names.Name(id(0)) // in use: kept when the table is trimmed
		}
		names.Learn(meta(i))
	}
	// Full at the MaxTopicNames+1st id: the least recently used go, down
	// to under 90%; the 9 ids after it are added.
	const forgotten = MaxTopicNames - MaxTopicNames*9/10 + 1
	if names.Len() != MaxTopicNames+10-forgotten || names.Forgotten != forgotten {
		t.Errorf("%d names kept, %d forgotten; want %d, %d", names.Len(), names.Forgotten, MaxTopicNames+10-forgotten, forgotten)
	}
	if n, ok := names.Name(id(MaxTopicNames + 9)); !ok || n != fmt.Sprint("t", MaxTopicNames+9) {
		t.Errorf("last name: %q %v", n, ok)
	}
	if _, ok := names.Name(id(0)); !ok {
		t.Error("the name looked up before the trim was forgotten")
	}
	if n, ok := names.Name(id(1)); ok {
		t.Errorf("the least recently used name is kept: %q", n)
	}
}
