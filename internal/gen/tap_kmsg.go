package gen

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TapExchange is one request as the broker read it off its tap and the
// broker's answer, parsed with kmsg: broker-side facts for the truth,
// independent of any client's hooks.
type TapExchange struct {
	Conn     *Conn
	ClientID string
	// ReqTime is the time of the request's last byte (as kwire's
	// decode.Exchange.ReqTime), RespTime of the response's first.
	ReqTime, RespTime time.Time
	Req               kmsg.Request
	Resp              kmsg.Response // nil when the broker never answered
}

// tapExchanges returns, in request order, every complete request with one
// of keys that the taps relayed so far, with its answer.
func (c *Cluster) tapExchanges(keys ...int16) []TapExchange { return c.rec.exchanges(keys...) }

// Exchanges returns, in request order, every complete request with one of
// keys that the recorded connections carried so far, with its answer.
func (rec *Recorder) Exchanges(keys ...int16) []TapExchange { return rec.r.exchanges(keys...) }

func (r *recorder) exchanges(keys ...int16) []TapExchange {
	r.mu.Lock()
	packets := slices.Clone(r.packets)
	conns := slices.Clone(r.conns)
	frames := make([][2][]Frame, len(conns))
	for i, conn := range conns {
		frames[i] = [2][]Frame{conn.framers[ToServer].all(), conn.framers[ToClient].all()}
	}
	r.mu.Unlock()

	streams := map[*Conn]*[2][]byte{}
	for _, p := range packets {
		if len(p.Payload) == 0 {
			continue
		}
		s := streams[p.Conn]
		if s == nil {
			s = new([2][]byte)
			streams[p.Conn] = s
		}
		s[p.Dir] = append(s[p.Dir], p.Payload...)
	}
	var out []TapExchange
	for i, conn := range conns {
		s := streams[conn]
		if s == nil {
			continue
		}
		resps := map[int32][]Frame{}
		for _, f := range frames[i][ToClient] {
			if f.Complete {
				resps[f.CorrelationID] = append(resps[f.CorrelationID], f)
			}
		}
		for _, f := range frames[i][ToServer] {
			if !f.Complete || !slices.Contains(keys, f.Key) {
				continue
			}
			req := parseRequest(s[ToServer][f.Offset+4 : f.End()])
			if req == nil {
				continue
			}
			x := TapExchange{Conn: conn, ClientID: f.ClientID, ReqTime: time.Unix(0, f.EndNanos), Req: req}
			q := resps[f.CorrelationID]
			// The first answer with the id that came after the request.
			for j, rf := range q {
				if rf.StartNanos < f.EndNanos {
					continue
				}
				x.RespTime = time.Unix(0, rf.StartNanos)
				x.Resp = parseResponse(req, s[ToClient][rf.Offset+4:rf.End()])
				resps[f.CorrelationID] = slices.Delete(q, j, j+1)
				break
			}
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b TapExchange) int { return a.ReqTime.Compare(b.ReqTime) })
	return out
}

// parseRequest parses a request frame's body (header and request).
func parseRequest(b []byte) kmsg.Request {
	if len(b) < 10 {
		return nil
	}
	key, version := int16(binary.BigEndian.Uint16(b)), int16(binary.BigEndian.Uint16(b[2:]))
	req := kmsg.RequestForKey(key)
	if req == nil || version > req.MaxVersion() {
		return nil
	}
	req.SetVersion(version)
	b = b[8:]
	n := int(int16(binary.BigEndian.Uint16(b))) // nullable client id
	b = b[2:]
	if n > 0 {
		if n > len(b) {
			return nil
		}
		b = b[n:]
	}
	if req.IsFlexible() {
		if b = skipTags(b); b == nil {
			return nil
		}
	}
	if err := req.ReadFrom(b); err != nil {
		return nil
	}
	return req
}

// parseResponse parses a response frame's body for req.
func parseResponse(req kmsg.Request, b []byte) kmsg.Response {
	if len(b) < 4 {
		return nil
	}
	b = b[4:]
	// The ApiVersions response header is never flexible.
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if b = skipTags(b); b == nil {
			return nil
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		return nil
	}
	return resp
}

// skipTags skips a header's tagged fields; nil if they are cut short.
func skipTags(b []byte) []byte {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil
	}
	b = b[w:]
	for range n {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < size {
			return nil
		}
		b = b[w+int(size):]
	}
	return b
}

// tapCommit is one partition of an OffsetCommit as the broker answered it.
type tapCommit struct {
	ClientID, MemberID string
	Generation         int32
	Topic              string
	Partition          int32
	Offset             int64
	Code               int16
	At                 time.Time
}

// tapCommits returns group's OffsetCommits (each partition) that the
// broker answered, with its error codes, from requests sent at or after
// since.
func (c *Cluster) tapCommits(group string, since time.Time) []tapCommit {
	var out []tapCommit
	for _, x := range c.tapExchanges(int16(kmsg.OffsetCommit)) {
		req := x.Req.(*kmsg.OffsetCommitRequest)
		resp, _ := x.Resp.(*kmsg.OffsetCommitResponse)
		if req.Group != group || resp == nil || x.ReqTime.Before(since) {
			continue
		}
		for _, t := range resp.Topics {
			name := t.Topic
			if ti := c.kf.TopicIDInfo(t.TopicID); name == "" && ti != nil {
				name = ti.Topic
			}
			for _, p := range t.Partitions {
				out = append(out, tapCommit{ClientID: x.ClientID, MemberID: req.MemberID, Generation: req.Generation,
					Topic: name, Partition: p.Partition, Offset: reqOffset(req, t.Topic, t.TopicID, p.Partition), Code: p.ErrorCode, At: x.ReqTime})
			}
		}
	}
	return out
}

func reqOffset(req *kmsg.OffsetCommitRequest, topic string, id [16]byte, p int32) int64 {
	for _, t := range req.Topics {
		if t.Topic != topic || t.TopicID != id {
			continue
		}
		for _, rp := range t.Partitions {
			if rp.Partition == p {
				return rp.Offset
			}
		}
	}
	return -1
}

// tapFetched returns how many records (control records excluded) the
// broker's Fetch responses carried to clientID for topic/p, answering
// requests sent at or after since, and the lowest fetch offset asked.
func (c *Cluster) tapFetched(clientID, topic string, p int32, since time.Time) (records, from int64) {
	from = -1
	for _, x := range c.tapExchanges(int16(kmsg.Fetch)) {
		resp, _ := x.Resp.(*kmsg.FetchResponse)
		if x.ClientID != clientID || resp == nil || x.ReqTime.Before(since) {
			continue
		}
		for _, t := range x.Req.(*kmsg.FetchRequest).Topics {
			if c.topicName(t.Topic, t.TopicID) != topic {
				continue
			}
			for _, rp := range t.Partitions {
				if rp.Partition == p && (from < 0 || rp.FetchOffset < from) {
					from = rp.FetchOffset
				}
			}
		}
		for _, t := range resp.Topics {
			if c.topicName(t.Topic, t.TopicID) != topic {
				continue
			}
			for _, rp := range t.Partitions {
				if rp.Partition == p {
					records += batchRecords(rp.RecordBatches)
				}
			}
		}
	}
	return records, from
}

func (c *Cluster) topicName(name string, id [16]byte) string {
	if ti := c.kf.TopicIDInfo(id); name == "" && ti != nil {
		return ti.Topic
	}
	return name
}

// batchRecords counts the records of the data batches in b (v2 batch
// headers: length at 8, attributes at 21, record count at 57).
func batchRecords(b []byte) int64 {
	var n int64
	for len(b) >= 61 {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
		if size < 61 || size > len(b) {
			break
		}
		if attrs := binary.BigEndian.Uint16(b[21:]); attrs&0x20 == 0 {
			n += int64(int32(binary.BigEndian.Uint32(b[57:])))
		}
		b = b[size:]
	}
	return n
}

// recordJoins gives the groups truth every JoinGroup with a member id as
// the broker read it (the tap's time of the request's last byte, as a
// capture shows it): the first JoinGroup after a generation formed names
// who started the next rebalance. The broker's order is the one that
// counts, and a client-side hook's clock can order two members' writes
// microseconds apart differently than the broker read them.
func (c *Cluster) recordJoins() {
	for _, x := range c.tapExchanges(int16(kmsg.JoinGroup)) {
		req := x.Req.(*kmsg.JoinGroupRequest)
		if req.MemberID == "" {
			continue
		}
		c.groups.add(groupReport{Kind: "join", Group: req.Group, MemberID: req.MemberID, ClientID: x.ClientID, Nanos: x.ReqTime.UnixNano()})
	}
}
