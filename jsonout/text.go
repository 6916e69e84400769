package jsonout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kwire/kwire/capture"
)

func textExchange(l *exchangeLine) string {
	var b strings.Builder
	ts := l.TS
	if i := strings.IndexByte(ts, 'T'); i >= 0 {
		ts = strings.TrimSuffix(ts[i+1:], "Z")
	}
	fmt.Fprintf(&b, "%s c%d %s>%s %s v%d #%d", ts, l.Conn.ID, l.Conn.Client, l.Conn.Broker, l.API, l.APIVersion, l.CorrelationID)
	if l.ClientID != "" {
		fmt.Fprintf(&b, " %q", l.ClientID)
	}
	switch {
	case l.ResponseSeen:
		fmt.Fprintf(&b, " %s", time.Duration(l.LatencyUS)*time.Microsecond)
		if l.Error != "" {
			b.WriteString(" " + l.Error)
		}
	default:
		b.WriteString(" response:" + l.Response)
	}
	textSummary(&b, l.Req)
	if l.Resp != nil {
		b.WriteString(" =>")
		textSummary(&b, l.Resp)
	}
	if l.ReqErr != "" {
		b.WriteString(" [request: " + l.ReqErr + "]")
	}
	if l.RespErr != "" {
		b.WriteString(" [response: " + l.RespErr + "]")
	}
	return b.String()
}

func textSummary(b *strings.Builder, s *Summary) {
	if s == nil {
		return
	}
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, " %s=%s", k, v)
		}
	}
	kv("group", s.Group)
	kv("groups", strings.Join(s.Groups, ","))
	kv("key", strings.Join(s.CoordinatorKey, ","))
	kv("member", s.MemberID)
	if s.InstanceID != nil {
		kv("instance", *s.InstanceID)
	}
	if s.Generation != nil {
		kv("gen", fmt.Sprint(*s.Generation))
	}
	if s.MemberEpoch != nil {
		kv("epoch", fmt.Sprint(*s.MemberEpoch))
	}
	kv("leader", s.Leader)
	kv("protocols", strings.Join(s.Protocols, ","))
	kv("protocol", s.Protocol)
	if len(s.Members) > 0 {
		kv("members", fmt.Sprint(len(s.Members)))
	}
	kv("reason", s.Reason)
	if s.Acks != nil {
		kv("acks", fmt.Sprint(*s.Acks))
	}
	for _, c := range s.Coordinators {
		fmt.Fprintf(b, " coordinator=%d@%s:%d", c.NodeID, c.Host, c.Port)
	}
	for _, t := range s.Topics {
		name := t.Topic
		if name == "" {
			name = "id:" + t.TopicID
		}
		fmt.Fprintf(b, " %s[%s]", name, textPartitions(t.Partitions))
	}
}

func textPartitions(ps []Partition) string {
	parts := make([]string, 0, len(ps))
	for _, p := range ps {
		s := fmt.Sprint(p.Partition)
		if p.Offset != nil {
			s += fmt.Sprintf("@%d", *p.Offset)
		}
		if p.Records > 0 {
			s += fmt.Sprintf("+%d", p.Records)
		}
		if p.ErrorCode != 0 {
			s += ":" + ErrorName(p.ErrorCode)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func textStats(l *statsLine) string {
	c, d := &l.Capture, &l.Decode
	var apis []string
	for _, k := range slices.Sorted(maps.Keys(d.ByAPI)) {
		apis = append(apis, fmt.Sprintf("%s=%d", k, d.ByAPI[k]))
	}
	loss := ""
	if c.Live != nil {
		// Live capture: what the kernel dropped is never in the stream.
		loss = fmt.Sprintf(", kernel dropped %d of %d packets", c.Live.KernelDrops, c.Live.KernelPackets+c.Live.KernelDrops)
		if c.Live.PacketsNotWritten > 0 {
			loss += fmt.Sprintf(", %d not written to the -w file", c.Live.PacketsNotWritten)
		}
	}
	if c.FilesResynced > 0 {
		loss += fmt.Sprintf(", %d damaged file(s) read past the damage (%d bytes skipped)", c.FilesResynced, c.FileBytesSkipped)
	}
	if c.ConnsOverCap > 0 {
		loss += fmt.Sprintf(", %d connections over --max-conns (%d packets)", c.ConnsOverCap, c.PacketsOverCap)
	}
	if t := c.TLSStats; t.TLSConns > 0 {
		// --tls-keylog: what the key log decrypted, and what it could not.
		loss += fmt.Sprintf(", %d TLS connections decrypted of %d (%d without keys, %d unsupported",
			t.TLSDecrypted, t.TLSConns, t.TLSNoKeys, t.TLSUnsupported)
		if t.TLSHandshakeOnly > 0 {
			loss += fmt.Sprintf(", %d ended in their handshake", t.TLSHandshakeOnly)
		}
		loss += fmt.Sprintf("; %d records failed to decrypt", t.TLSDecryptFailures)
		if t.TLSRecordsUnsent > 0 {
			loss += fmt.Sprintf("; %d record numbers never sent", t.TLSRecordsUnsent)
		}
		if t.TLSKeysLate > 0 {
			loss += fmt.Sprintf("; %d decrypted out of capture order: keys logged late", t.TLSKeysLate)
		}
		loss += ")"
	}
	line := fmt.Sprintf("-- %d packets, %d bytes%s, %d kafka connections (%d not kafka, %d tls); %d exchanges (%d responses missing, %d lost, %d unmatched); %d gaps (%d bytes), %d resyncs (%d bytes skipped), %d decode errors\n-- by api: %s",
		c.Packets, c.Bytes, loss, d.KafkaConns, d.NonKafkaConns, d.TLSConns, d.Exchanges, d.Missing, d.Lost, d.Unmatched,
		d.Gaps, d.GapBytes, d.Resyncs, d.SkippedBytes, d.DecodeErrors, strings.Join(apis, " "))
	return line + ebpfText(c, d) + missingText(d)
}

// ebpfText tells what an eBPF source did not copy, and what of that the
// decoder placed in record data (the rest cost frames their body).
func ebpfText(c *capture.Stats, d *decodeStats) string {
	e := c.EBPF
	if e == nil {
		return ""
	}
	return fmt.Sprintf("\n-- eBPF: %d probe events, %d dropped (ring full); %d bytes not copied (%d sent with sendfile, %d past --snap), "+
		"of which %d record bytes in decoded frames; %d frames decoded without their body (bytes not copied outside their records)",
		e.Events, e.RingDrops, d.NotCopiedBytes, e.SendfileBytes, e.SnapBytes, d.RecordsNotCopiedBytes, d.NotCopiedFrames)
}

// heldOpen are the APIs whose requests a broker holds unanswered for a
// while by design: Fetch and ShareFetch (long poll, up to the request's
// max wait), JoinGroup and SyncGroup (until the rebalance completes).
var heldOpen = map[int16]bool{1: true, 11: true, 14: true, 78: true}

// missingText explains the responses missing (their connection closed,
// or the capture ended, first): by API, those a broker holds open apart,
// which are normal, from the others.
func missingText(d *decodeStats) string {
	if d.Missing == 0 {
		return ""
	}
	var held, other []string
	var nHeld, nOther int64
	for k, n := range d.MissingByKey {
		if n == 0 {
			continue
		}
		if heldOpen[int16(k)] {
			held, nHeld = append(held, fmt.Sprintf("%s %d", APIName(int16(k)), n)), nHeld+n
		} else {
			other, nOther = append(other, fmt.Sprintf("%s %d", APIName(int16(k)), n)), nOther+n
		}
	}
	var b strings.Builder
	if nHeld > 0 {
		fmt.Fprintf(&b, "\n-- %d response(s) missing are normal (%s): requests a broker holds open (a Fetch's long poll, "+
			"a JoinGroup or SyncGroup until the rebalance completes), cut off by a close or the end of the capture", nHeld, strings.Join(held, ", "))
	}
	if nOther > 0 {
		fmt.Fprintf(&b, "\n-- %d response(s) missing (%s): their connection closed, or the capture ended, before the broker answered: "+
			"normal in the capture's last moments or when a client exits mid-request; otherwise a broker that stopped answering", nOther, strings.Join(other, ", "))
	}
	return b.String()
}
