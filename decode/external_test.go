package decode

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/internal/captest"
)

// unmatchedLog writes down each unmatched response as it is reported:
// connection, correlation id, the API inferred and what its body says.
type unmatchedLog struct {
	lines []string
	other []AnomalyKind
}

func (u *unmatchedLog) Exchange(*Exchange) {}

func (u *unmatchedLog) Anomaly(a *Anomaly) {
	if a.Kind != AnomalyUnmatchedResponse {
		u.other = append(u.other, a.Kind)
		return
	}
	l := fmt.Sprintf("%s #%d %d bytes: ", a.Conn.Client, a.CorrelationID, a.Bytes)
	switch r := a.Resp.(type) {
	case nil:
		l += "not decoded"
	case *kmsg.MetadataResponse:
		var topics []string
		for _, t := range r.Topics {
			topics = append(topics, *t.Topic)
		}
		l += fmt.Sprintf("Metadata v%d: %d broker(s), controller %d, topics %s", a.Version, len(r.Brokers), r.ControllerID, strings.Join(topics, ","))
	case *kmsg.ApiVersionsResponse:
		l += fmt.Sprintf("ApiVersions v%d: error %d, %d API keys", a.Version, r.ErrorCode, len(r.ApiKeys))
	default:
		l += fmt.Sprintf("%s v%d", APIName(a.Key), a.Version)
	}
	u.lines = append(u.lines, l)
}

// TestExternalUnmatchedResponses reads nDPI's kafka.pcapng, as its project
// committed it: librdkafka connections captured without their start, on
// two of which the broker's answers were captured but not the requests
// (a Metadata v2 response on one; an ApiVersions v0 and a Metadata v2 on
// the other), which tshark shows as "Request missing". They are
// responses, each reported unmatched with its API inferred from the
// requests of the capture and its body decoded, and no byte of them is
// skipped as a resync.
func TestExternalUnmatchedResponses(t *testing.T) {
	path := captest.External(t, "ndpi/kafka.pcapng")
	ports, _ := capture.ParsePorts("9092")
	src, err := capture.OpenFiles([]string{path}, &capture.Options{Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	u := &unmatchedLog{}
	d := New(u, nil)
	if err := src.Run(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"172.16.17.101:49280 #131 120 bytes: Metadata v2: 1 broker(s), controller 1001, topics LB_MAIN_LOG_INPUT",
		"172.16.17.101:58052 #140 350 bytes: ApiVersions v0: error 0, 56 API keys",
		"172.16.17.101:58052 #141 120 bytes: Metadata v2: 1 broker(s), controller 1001, topics LB_MAIN_LOG_INPUT",
	}
	diff(t, "unmatched responses", want, u.lines)
	diff(t, "other anomalies", []AnomalyKind(nil), u.other)
	st := d.Stats()
	if st.Requests != 14 || st.Responses != 11 || st.Unmatched != 3 || st.Resyncs != 0 || st.SkippedBytes != 0 {
		t.Errorf("requests %d, responses %d, unmatched %d, resyncs %d, skipped %d bytes: want 14, 11, 3, 0, 0 (tshark: 14 requests, 14 responses)",
			st.Requests, st.Responses, st.Unmatched, st.Resyncs, st.SkippedBytes)
	}
}
