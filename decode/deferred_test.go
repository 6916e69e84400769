package decode

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// deferredLog is a Handler that writes down what it gets, in order; with
// rd set it decodes deferred responses first, as cmd/kwire's handoff does
// on its own goroutine.
type deferredLog struct {
	rd    *ResponseDecoder
	lines []string
}

func (l *deferredLog) Exchange(e *Exchange) {
	x := *e
	if l.rd != nil {
		if x.RespBody == nil && (x.Key == 0 || x.Key == 1) && x.Response == ResponseSeen {
			l.lines = append(l.lines, "response not deferred")
		}
		if x.RespBody != nil {
			x.RespBody = append([]byte{}, x.RespBody...) // the decoder's bytes are only valid now
		}
		if an := l.rd.Decode(&x); an != nil {
			l.Anomaly(an)
		}
	} else if e.RespBody != nil {
		l.lines = append(l.lines, "a body without DeferResponses")
	}
	// The response as it is now: what it points into is the decoder's.
	l.lines = append(l.lines, fmt.Sprintf("exchange %s v%d #%d %s err=%v resp=%+v", kmsg.NameForKey(x.Key), x.Version,
		x.CorrelationID, x.Response, x.RespErr, x.Resp))
}

func (l *deferredLog) Anomaly(a *Anomaly) {
	l.lines = append(l.lines, fmt.Sprintf("anomaly %s %s %s #%d %s", a.Kind, a.Dir, a.Time.Format("15:04:05.000"), a.CorrelationID, a.Detail))
}

// TestDeferredResponsesSame: Produce and Fetch responses left undecoded by
// DeferResponses and decoded by a ResponseDecoder give the same exchanges,
// anomalies (in the same place) and decode error count as decoding them
// in the Decoder; other responses are not deferred.
func TestDeferredResponsesSame(t *testing.T) {
	fetch := func(topics ...string) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		for _, name := range topics {
			tp := kmsg.NewFetchResponseTopic()
			tp.Topic = name
			p := kmsg.NewFetchResponseTopicPartition()
			p.HighWatermark, p.RecordBatches = 42, []byte{1, 2, 3}
			tp.Partitions = []kmsg.FetchResponseTopicPartition{p}
			resp.Topics = append(resp.Topics, tp)
		}
		return resp
	}
	truncated := func(frame []byte, cut int) []byte {
		frame = frame[:len(frame)-cut]
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		return frame
	}
	empty := func(corr int32) []byte { // a frame holding only the correlation id
		return binary.BigEndian.AppendUint32([]byte{0, 0, 0, 4}, uint32(corr))
	}
	steps := []step{
		req(reqFrame(kmsg.NewPtrFetchRequest(), 12, 1, "c")), resp(respFrame(fetch("a", "b"), 12, 1)),
		req(reqFrame(produceReq(-1, 100), 9, 2, "c")), resp(truncated(respFrame(produceResp(), 9, 2), 3)),
		req(reqFrame(kmsg.NewPtrFetchRequest(), 4, 3, "c")), resp(respFrame(fetch("c"), 4, 3)),
		req(reqFrame(produceReq(-1, 100), 7, 4, "c")), resp(respFrame(produceResp(), 7, 4)),
		req(reqFrame(kmsg.NewPtrFetchRequest(), 12, 5, "c")), resp(empty(5)),
		req(reqFrame(kmsg.NewPtrFetchRequest(), 4, 6, "c")), resp(truncated(respFrame(fetch("d"), 4, 6), 1)),
		req(reqFrame(heartbeatReq(1), 4, 7, "c")), resp(respFrame(heartbeatResp(0), 4, 7)),
	}
	run := func(deferred bool) (*deferredLog, Stats) {
		l := &deferredLog{}
		if deferred {
			l.rd = NewResponseDecoder()
		}
		_, d, _ := feedTo(l, &Options{DeferResponses: deferred}, newConn(capture.RolePort, true), 0, steps...)
		st := d.Stats()
		if l.rd != nil {
			st.DecodeErrors += l.rd.DecodeErrors
		}
		return l, st
	}
	want, wantStats := run(false)
	got, gotStats := run(true)
	if wantStats.DecodeErrors != 3 {
		t.Fatalf("the cases have %d decode errors, want 3: %q", wantStats.DecodeErrors, want.lines)
	}
	diff(t, "exchanges and anomalies", want.lines, got.lines)
	diff(t, "stats", wantStats, gotStats)
}
