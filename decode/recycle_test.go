package decode

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// recycler hands every exchange's messages back to the decoder as soon as
// it has looked at them, as cmd/kwire's handoff does later.
type recycler struct {
	d     *Decoder
	resps []*kmsg.FetchResponse
	seen  []kmsg.FetchResponse // each response as it was when handled
	names [][]string           // and its topics
}

func (r *recycler) Exchange(e *Exchange) {
	if resp, ok := e.Resp.(*kmsg.FetchResponse); ok {
		r.resps = append(r.resps, resp)
		r.seen = append(r.seen, *resp)
		var names []string
		for _, tp := range resp.Topics {
			names = append(names, tp.Topic)
		}
		r.names = append(r.names, names)
	}
	r.d.Recycle(e.Req, e.Resp)
}

func (r *recycler) Anomaly(*Anomaly) {}

// TestRecycleNoStaleFields: a recycled Fetch response read again at an
// older version carries nothing of the newer one (kmsg reads only the
// fields of the version), and its topics are the new frame's.
func TestRecycleNoStaleFields(t *testing.T) {
	r := &recycler{}
	r.d = New(r, nil)
	conn := newConn(capture.RolePort, true)
	now := t0
	send := func(dir capture.Dir, b []byte) {
		now = now.Add(time.Millisecond)
		r.d.Chunk(&capture.Chunk{Conn: conn, Dir: dir, Kind: capture.Data, Data: b, Time: now})
	}
	fetch := func(topics ...string) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		for _, name := range topics {
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic = name
			tp.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
			resp.Topics = append(resp.Topics, tp)
		}
		return resp
	}
	newer := fetch("a", "b", "c")
	newer.ErrorCode, newer.SessionID, newer.ThrottleMillis = 71, 1234, 5
	send(capture.ToServer, reqFrame(kmsg.NewPtrFetchRequest(), 12, 1, "c"))
	send(capture.ToClient, respFrame(newer, 12, 1))
	send(capture.ToServer, reqFrame(kmsg.NewPtrFetchRequest(), 4, 2, "c"))
	send(capture.ToClient, respFrame(fetch("d"), 4, 2))

	if len(r.resps) != 2 {
		t.Fatalf("%d Fetch responses decoded, want 2", len(r.resps))
	}
	if r.resps[0] != r.resps[1] {
		t.Fatalf("the second response is a new message: the first was not recycled")
	}
	first, second := r.seen[0], r.seen[1]
	if first.SessionID != 1234 || first.ErrorCode != 71 || len(r.names[0]) != 3 {
		t.Fatalf("v12 response decoded as session %d, error %d, %d topics", first.SessionID, first.ErrorCode, len(r.names[0]))
	}
	if second.SessionID != 0 || second.ErrorCode != 0 || second.ThrottleMillis != 0 || second.Version != 4 {
		t.Errorf("v4 response read into the recycled message: version %d, session %d, error %d, throttle %d; want v4 and zeros",
			second.Version, second.SessionID, second.ErrorCode, second.ThrottleMillis)
	}
	if got := r.names[1]; len(got) != 1 || got[0] != "d" {
		t.Errorf("v4 response topics %q, want only d", got)
	}
}
