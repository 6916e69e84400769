package decode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// metadataResp is a Metadata response whose body is mostly small numbers
// (partitions, replicas): in the bytes of such a body, most offsets read
// as a response header with a sane length and correlation id.
func metadataResp(partitions int) *kmsg.MetadataResponse {
	r := kmsg.NewPtrMetadataResponse()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 1, "b1", 9092
	r.Brokers = append(r.Brokers, b)
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr("orders")
	for i := range partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = int32(i), 1, []int32{1, 2, 3}, []int32{1, 2, 3}
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// TestUnmatchedResponses reads connections whose broker side sends
// responses to requests the capture does not have (it began after they
// were sent): each is reported as an unmatched response, its API inferred
// when the bytes and the requests seen allow it and its body decoded, and
// none of its bytes is skipped as a resync.
func TestUnmatchedResponses(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *capBuilder)
		// want: per unmatched response, "#corr API vN" or "#corr -".
		want []string
		// detail is in the detail of the last one.
		detail string
	}{{
		name: "a dense response up to the end, its API from another connection's request",
		build: func(b *capBuilder) {
			m := b.conn(40001, 9092)
			m.handshake()
			m.send(capture.ToServer, reqFrame(metadataReq(), 2, 1, "c"))
			m.send(capture.ToClient, respFrame(metadataResp(2), 2, 1))
			m.fin()
			c := b.conn(40002, 9092) // mid-stream: its request is not in the capture
			c.send(capture.ToClient, respFrame(metadataResp(400), 2, 77))
			c.fin()
		},
		want:   []string{"#77 Metadata v2"},
		detail: "of the APIs of the requests of the capture, its response alone reads these bytes",
	}, {
		name: "two responses before the first request, its API from the connection's requests",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.send(capture.ToClient, cat(respFrame(heartbeatResp(27), 4, 4), respFrame(heartbeatResp(0), 4, 5)))
			c.hb(6)
			c.fin()
		},
		want:   []string{"#4 Heartbeat v4 err=27", "#5 Heartbeat v4"},
		detail: "of the APIs of its connection's requests, its response alone reads these bytes",
	}, {
		name: "no request at all: the bytes alone fit several APIs",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.send(capture.ToClient, respFrame(heartbeatResp(0), 4, 9))
			c.fin()
		},
		want:   []string{"#9 -"},
		detail: "API not inferred: the responses of ",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newCapBuilder(t)
			tt.build(b)
			r := runCapture(t, writeFile(t, "c.pcap", b.file(0)))
			var got []string
			detail := ""
			for _, a := range r.rec.an {
				if a.Kind != AnomalyUnmatchedResponse {
					t.Errorf("%s anomaly: %s", a.Kind, a.Detail)
					continue
				}
				s := fmt.Sprintf("#%d -", a.CorrelationID)
				if a.Resp != nil {
					s = fmt.Sprintf("#%d %s v%d", a.CorrelationID, APIName(a.Key), a.Version)
					if code := ErrorCode(a.Resp); code != 0 {
						s += fmt.Sprintf(" err=%d", code)
					}
				}
				got, detail = append(got, s), a.Detail
			}
			diff(t, "unmatched responses", tt.want, got)
			if !strings.Contains(detail, tt.detail) {
				t.Errorf("detail %q: want %q in it", detail, tt.detail)
			}
			if r.dec.Unmatched != int64(len(tt.want)) || r.dec.Resyncs != 0 || r.dec.SkippedBytes != 0 {
				t.Errorf("unmatched %d, resyncs %d, skipped %d bytes: want %d, 0, 0", r.dec.Unmatched, r.dec.Resyncs, r.dec.SkippedBytes, len(tt.want))
			}
		})
	}
}
