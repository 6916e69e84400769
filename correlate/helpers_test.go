package correlate

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/decode"
)

// base is the capture time of the hand-built exchanges' clock zero.
var base = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// recorder is a Sink keeping every event.
type recorder struct{ events []Event }

func (r *recorder) Event(ev Event) { r.events = append(r.events, ev) }

// harness feeds hand-built exchanges to a Correlator. Requests and
// responses are encoded with kmsg and decoded again at their version, as
// the decoder would, and the encoded bytes are scribbled over after each
// call: the Correlator must not keep references into them.
type harness struct {
	t     *testing.T
	c     *Correlator
	rec   *recorder
	conns map[string]*capture.Conn
	// joined remembers "group/member" of members that joined (see stableGroup).
	joined map[string]bool
	// notCopied is set on the next exchange fed (then cleared): the
	// partitions whose records decode found not copied.
	notCopied []decode.PartitionIndex
}

func newHarness(t *testing.T, opts *Options) *harness {
	rec := &recorder{}
	return &harness{t: t, c: New(opts, rec), rec: rec, conns: map[string]*capture.Conn{}, joined: map[string]bool{}}
}

// conn returns the connection from client to broker ("ip:port" each).
func (h *harness) conn(client, broker string) *capture.Conn {
	k := client + ">" + broker
	if c := h.conns[k]; c != nil {
		return c
	}
	c := &capture.Conn{ID: uint64(len(h.conns) + 1), Client: netip.MustParseAddrPort(client), Server: netip.MustParseAddrPort(broker)}
	h.conns[k] = c
	return c
}

// ex feeds one exchange: the request at base+at, its response (nil: not
// seen) 1ms later.
func (h *harness) ex(at time.Duration, conn *capture.Conn, clientID string, req kmsg.Request, resp kmsg.Response) {
	h.t.Helper()
	e := &decode.Exchange{
		Conn: conn, Key: req.Key(), Version: req.GetVersion(), ClientID: clientID,
		ReqTime: base.Add(at), Response: decode.ResponseMissing,
	}
	reqBytes := req.AppendTo(nil)
	r := kmsg.RequestForKey(req.Key())
	r.SetVersion(req.GetVersion())
	if err := r.ReadFrom(reqBytes); err != nil {
		h.t.Fatalf("%s v%d request: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	e.Req = r
	var respBytes []byte
	if resp != nil {
		resp.SetVersion(req.GetVersion())
		respBytes = resp.AppendTo(nil)
		rr := r.ResponseKind()
		if err := rr.ReadFrom(respBytes); err != nil {
			h.t.Fatalf("%s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		e.Resp, e.Response, e.RespTime = rr, decode.ResponseSeen, e.ReqTime.Add(time.Millisecond)
	}
	e.RecordsNotCopied, h.notCopied = h.notCopied, nil
	h.c.Exchange(e)
	for _, b := range [][]byte{reqBytes, respBytes} {
		for i := range b {
			b[i] = 0xa5
		}
	}
}

// close ends the input at base+at: hazards held for loss are out then.
func (h *harness) close(at time.Duration) { h.c.Close(base.Add(at)) }

// events returns the recorded events of type typ.
func (h *harness) events(typ string) []Event {
	var out []Event
	for _, ev := range h.rec.events {
		if ev.Type() == typ {
			out = append(out, ev)
		}
	}
	return out
}

// diff returns a (-want +got) line diff of the JSON forms of want and got,
// or "" when they are equal.
func diff(want, got any) string {
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	if string(w) == string(g) {
		return ""
	}
	a, b := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	// Longest common subsequence, then walk it.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(&sb, "  %s\n", a[i])
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&sb, "+ %s\n", b[j])
			j++
		default:
			fmt.Fprintf(&sb, "- %s\n", a[i])
			i++
		}
	}
	return sb.String()
}

// Message builders.

func consumerMeta(version int16, topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = version
	m.Topics = topics
	return m.AppendTo(nil)
}

func consumerAssignment(a map[string][]int32) []byte {
	m := kmsg.NewConsumerMemberAssignment()
	for _, t := range sortedKeys(a) {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t, a[t]
		m.Topics = append(m.Topics, at)
	}
	return m.AppendTo(nil)
}

func joinReq(version int16, group, member string, meta []byte) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID = version, group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 20000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta
	r.Protocols = append(r.Protocols, p)
	return r
}

func joinResp(code int16, gen int32, leader, member string, members map[string][]byte) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode, r.Generation, r.LeaderID, r.MemberID = code, gen, leader, member
	r.Protocol = kmsg.StringPtr("range")
	r.ProtocolType = kmsg.StringPtr("consumer")
	for _, id := range sortedKeys(members) {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID, m.ProtocolMetadata = id, members[id]
		r.Members = append(r.Members, m)
	}
	return r
}

func syncReq(group, member string, gen int32, plan map[string]map[string][]int32) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 5, group, member, gen
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for _, id := range sortedKeys(plan) {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, consumerAssignment(plan[id])
		r.GroupAssignment = append(r.GroupAssignment, a)
	}
	return r
}

func syncResp(code int16, a map[string][]int32) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	r.MemberAssignment = consumerAssignment(a)
	return r
}

func heartbeatReq(group, member string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 4, group, member, gen
	return r
}

func heartbeatResp(code int16) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.ErrorCode = code
	return r
}

func commitReq(group, member string, gen int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 8, group, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p := int32(0); p < 64; p++ {
		if off, ok := offsets[p]; ok {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			t.Partitions = append(t.Partitions, rp)
		}
	}
	r.Topics = append(r.Topics, t)
	return r
}

func commitResp(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	r := kmsg.NewPtrOffsetCommitResponse()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// batches returns n record batches of one record each from offset first.
func batches(first int64, n int) []byte {
	var out []byte
	for i := 0; i < n; i++ {
		b := kmsg.RecordBatch{FirstOffset: first + int64(i), Magic: 2, NumRecords: 1, Records: []byte{0}}
		b.Length = int32(len(b.AppendTo(nil)) - 12)
		out = b.AppendTo(out)
	}
	return out
}

// fetchReq fetches partitions of topic (by name) from offsets; version 13+
// names the topic by id: use fetchReqID.
func fetchReq(version int16, topic string, offsets map[int32]int64) *kmsg.FetchRequest {
	return fetchReqID(version, topic, [16]byte{}, offsets)
}

func fetchReqID(version int16, topic string, id [16]byte, offsets map[int32]int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = version
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, id
	for p := int32(0); p < 64; p++ {
		if off, ok := offsets[p]; ok {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = p, off
			t.Partitions = append(t.Partitions, rp)
		}
	}
	if len(t.Partitions) > 0 {
		r.Topics = append(r.Topics, t)
	}
	return r
}

// fetchResp answers req's topic with data per partition, all with high
// watermark hwm.
func fetchResp(req *kmsg.FetchRequest, hwm int64, data map[int32][]byte) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	t := kmsg.NewFetchResponseTopic()
	if len(req.Topics) > 0 {
		t.Topic, t.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
	}
	for p := int32(0); p < 64; p++ {
		if b, ok := data[p]; ok {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p, hwm, hwm, 0
			rp.RecordBatches = b
			t.Partitions = append(t.Partitions, rp)
		}
	}
	r.Topics = append(r.Topics, t)
	return r
}
