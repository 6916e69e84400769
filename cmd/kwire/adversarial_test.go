package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/internal/gen"
)

// pcapWriter streams synthetic Ethernet/IPv4/TCP packets (gopacket) into
// a pcap file (pcapgo), 10µs apart.
type pcapWriter struct {
	t   testing.TB
	f   *os.File
	bw  *bufio.Writer
	w   *pcapgo.Writer
	now time.Time
	id  uint16
	buf gopacket.SerializeBuffer
}

func newPcapWriter(t testing.TB, path string) *pcapWriter {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &pcapWriter{t: t, f: f, bw: bufio.NewWriterSize(f, 1<<20), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		buf: gopacket.NewSerializeBuffer()}
	w.w = pcapgo.NewWriterNanos(w.bw)
	if err := w.w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *pcapWriter) packet(src, dst netip.AddrPort, seq uint32, flags string, payload []byte) {
	w.id++
	w.now = w.now.Add(10 * time.Microsecond)
	ip := &layers.IPv4{Version: 4, TTL: 64, Id: w.id, Protocol: layers.IPProtocolTCP,
		SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, Ack: 1, Window: 65535,
		SYN: strings.Contains(flags, "S"), ACK: strings.Contains(flags, "A"), FIN: strings.Contains(flags, "F"), PSH: strings.Contains(flags, "P")}
	tcp.SetNetworkLayerForChecksum(ip)
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	if err := gopacket.SerializeLayers(w.buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		w.t.Fatal(err)
	}
	data := w.buf.Bytes()
	if err := w.w.WritePacket(gopacket.CaptureInfo{Timestamp: w.now, CaptureLength: len(data), Length: len(data)}, data); err != nil {
		w.t.Fatal(err)
	}
}

func (w *pcapWriter) close() string {
	if err := w.bw.Flush(); err != nil {
		w.t.Fatal(err)
	}
	if err := w.f.Close(); err != nil {
		w.t.Fatal(err)
	}
	return w.f.Name()
}

// flow is one synthetic connection of a pcapWriter.
type flow struct {
	w        *pcapWriter
	cli, srv netip.AddrPort
	seq      [2]uint32 // next sequence number: to the server, to the client
}

func (w *pcapWriter) flow(cli, srv netip.AddrPort) *flow {
	return &flow{w: w, cli: cli, srv: srv, seq: [2]uint32{1000, 900000}}
}

func (f *flow) open() {
	f.w.packet(f.cli, f.srv, f.seq[0]-1, "S", nil)
	f.w.packet(f.srv, f.cli, f.seq[1]-1, "SA", nil)
	f.w.packet(f.cli, f.srv, f.seq[0], "A", nil)
}

// send writes data in MSS-sized segments, to the server or to the client.
func (f *flow) send(toServer bool, data []byte) {
	src, dst, d := f.cli, f.srv, 0
	if !toServer {
		src, dst, d = f.srv, f.cli, 1
	}
	for len(data) > 0 {
		n := min(len(data), 1448)
		f.w.packet(src, dst, f.seq[d], "PA", data[:n])
		f.seq[d] += uint32(n)
		data = data[n:]
	}
}

// exchange sends a request built with kmsg and its response.
func (f *flow) exchange(req kmsg.Request, version int16, corr int32, clientID string, resp kmsg.Response) {
	f.send(true, reqBytes(req, version, corr, clientID))
	f.send(false, respBytes(resp, version, corr))
}

func reqBytes(req kmsg.Request, version int16, corr int32, clientID string) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corr)
}

// respBytes frames a response: length, correlation id, header tags when
// flexible (never for ApiVersions, KIP-511), body.
func respBytes(resp kmsg.Response, version int16, corr int32) []byte {
	resp.SetVersion(version)
	b := binary.BigEndian.AppendUint32(make([]byte, 4, 64), uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func addr(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// ndjsonLine returns the first line of out whose "type" is typ, decoded.
func ndjsonLine(t *testing.T, out []byte, typ string) map[string]any {
	t.Helper()
	for _, l := range bytes.Split(out, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil && m["type"] == typ {
			return m
		}
	}
	t.Fatalf("no %q line in the output", typ)
	return nil
}

// field returns the number at a dotted path of m (0 when absent).
func field(m map[string]any, path string) float64 {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		o, _ := v.(map[string]any)
		v = o[k]
	}
	n, _ := v.(float64)
	return n
}

func (f *flow) fin() {
	f.w.packet(f.cli, f.srv, f.seq[0], "FA", nil)
	f.w.packet(f.srv, f.cli, f.seq[1], "FA", nil)
}

func heartbeat() (*kmsg.HeartbeatRequest, *kmsg.HeartbeatResponse) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "g", "m", 1
	return req, kmsg.NewPtrHeartbeatResponse()
}

func (f *flow) hb(corr int32) {
	req, resp := heartbeat()
	f.exchange(req, 4, corr, "c", resp)
}

// noise is n bytes of seeded random data.
func noise(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// clientHello returns the first TLS flight of a crypto/tls client.
func clientHello(t *testing.T) []byte {
	c, s := net.Pipe()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 64<<10)
		n, _ := s.Read(buf)
		s.Close()
		got <- buf[:n]
	}()
	tls.Client(c, &tls.Config{ServerName: "broker"}).Handshake() // fails: the peer hangs up
	c.Close()
	b := <-got
	if len(b) < 6 || b[0] != 0x16 || b[5] != 1 {
		t.Fatalf("not a ClientHello record: % x", b[:min(len(b), 6)])
	}
	return b
}

// TestAdversarialRead runs every output format over one capture holding
// each kind of hostile traffic between good exchanges: the command exits
// 0, every good exchange is printed, and the stats line counts the bad
// parts. (decode/adversarial_test.go checks each case in detail.)
func TestAdversarialRead(t *testing.T) {
	w := newPcapWriter(t, filepath.Join(t.TempDir(), "hostile.pcap"))
	srv := addr("10.0.0.2:9092")
	a := w.flow(addr("10.0.0.1:40001"), srv)
	a.open()
	a.hb(1)
	for corr := range int32(50) { // responses with no request
		_, resp := heartbeat()
		a.send(false, respBytes(resp, 4, 1000+corr))
	}
	junk := w.flow(addr("10.0.0.1:40002"), srv) // random bytes on the Kafka port
	junk.open()
	junk.send(true, noise(1, 100<<10))
	huge := w.flow(addr("10.0.0.1:40003"), srv) // a 2 GB frame
	huge.open()
	huge.hb(3)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	frame := reqBytes(produce, 9, 4, "p")
	binary.BigEndian.PutUint32(frame, 1<<31-1)
	huge.send(true, append(frame, noise(2, 10<<10)...))
	huge.fin()
	tlsConn := w.flow(addr("10.0.0.1:40004"), srv)
	tlsConn.open()
	tlsConn.send(true, clientHello(t))
	reuse := w.flow(addr("10.0.0.1:40005"), srv) // correlation id reuse
	reuse.open()
	meta, hb := kmsg.NewPtrMetadataRequest(), kmsg.NewPtrHeartbeatRequest()
	reuse.send(true, append(reqBytes(meta, 12, 7, "c"), reqBytes(hb, 4, 7, "c")...))
	reuse.send(false, append(respBytes(kmsg.NewPtrMetadataResponse(), 12, 7), respBytes(kmsg.NewPtrHeartbeatResponse(), 4, 7)...))
	mid := w.flow(addr("10.0.0.1:40006"), srv) // capture starts mid-frame both ways
	big := kmsg.NewPtrProduceRequest()
	big.Acks = -1
	big.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: noise(3, 5000)}}}}
	mid.send(true, reqBytes(big, 9, 1, "p")[1234:])
	mid.send(false, respBytes(kmsg.NewPtrProduceResponse(), 9, 1)[5:])
	mid.hb(5)
	a.hb(2)
	path := w.close()

	want := map[string]float64{
		"decode.exchanges": 7, "decode.tls_connections": 1, "decode.non_kafka_connections": 1,
		"decode.unmatched_responses": 50, "decode.oversize_frames": 1, "decode.resyncs": 2, "decode.decode_errors": 0,
	}
	for _, args := range [][]string{{"read", "--json"}, {"analyze", "--json"}, {"read", "--text"}, {"analyze", "--text"}} {
		out := runKwire(t, append(args, path)...)
		if args[1] == "--text" {
			if !bytes.Contains(out, []byte("Heartbeat")) && args[0] == "read" {
				t.Errorf("kwire %v: no Heartbeat exchange in the text output", args)
			}
			continue
		}
		st := ndjsonLine(t, out, "stats")
		for k, v := range want {
			if got := field(st, k); got != v {
				t.Errorf("kwire %v: stats %s = %v, want %v", args, k, got, v)
			}
		}
		if args[0] == "read" {
			if n := bytes.Count(out, []byte(`"type":"exchange"`)); n != 7 {
				t.Errorf("kwire read: %d exchange lines, want 7", n)
			}
		}
	}
}

// TestLimitFlags checks that each memory cap's flag reaches its stage and
// that the cap's counter says when it bit: zero at the default, more with
// the flag set low.
func TestLimitFlags(t *testing.T) {
	tests := []struct {
		flag, value, file, counter string
	}{
		{"--max-conns", "2", "group", "stats:capture.conns_over_cap"},
		{"--max-pending", "1", "pipeline", "stats:decode.pending_overflow"},
		{"--max-buffer", "1000", "compress", "stats:decode.buffer_limit_frames"},
		{"--max-frame", "1000", "group", "stats:decode.oversize_frames"},
		{"--max-groups", "1", "h_offset_reset", "summary:stats.limits.groups_dropped"},
		{"--max-members", "1", "group", "summary:stats.limits.members_dropped"},
		{"--max-partitions", "1", "group", "summary:stats.limits.partitions_dropped"},
		{"--max-clients", "1", "group", "summary:stats.limits.clients_evicted"},
		{"--max-topic-ids", "1", "compress", "summary:stats.limits.topic_ids_evicted"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			file := filepath.Join(testdataDir(), tt.file+".pcapng")
			typ, path, _ := strings.Cut(tt.counter, ":")
			at := func(args ...string) float64 {
				return field(ndjsonLine(t, runKwire(t, append(append([]string{"analyze", "--json"}, args...), file)...), typ), path)
			}
			if n := at(); n != 0 {
				t.Fatalf("%s = %v with the default caps, want 0", tt.counter, n)
			}
			if n := at(tt.flag, tt.value); n == 0 {
				t.Errorf("%s = 0 with %s %s, want > 0", tt.counter, tt.flag, tt.value)
			}
		})
	}
}

// Markers put in record keys, values and headers: none may be printed.
var recordMarkers = []string{"kw-rec-key-7f3a1c", "kw-rec-value-c91e4d", "kw-hdr-key-5d2b9a", "kw-hdr-value-0b8e6f"}

// TestRecordsNeverPrinted produces records with recognisable keys, values
// and headers (uncompressed, so the capture holds them in the clear) with
// kgo to a kfake broker, consumes them in a group, and greps every output
// format for them: record data is never printed (there is no flag that
// prints it).
func TestRecordsNeverPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kfake cluster")
	}
	c, err := gen.NewCluster(&gen.Options{Brokers: 1, Kfake: []kfake.Opt{kfake.SeedTopics(1, "records")}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := c.Kgo(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.DefaultProduceTopic("records"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", recordMarkers[0], i), Value: fmt.Appendf(nil, "%s-%d", recordMarkers[1], i),
			Headers: []kgo.RecordHeader{{Key: recordMarkers[2], Value: []byte(recordMarkers[3])}}})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := c.Kgo(kgo.ConsumeTopics("records"), kgo.ConsumerGroup("records-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(recs); {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", n, len(recs), err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	dir := t.TempDir()
	if _, err := c.Write(dir, "records", "records with recognisable keys, values and headers", nil); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "records.pcapng")
	raw := readFile(t, file)
	for _, m := range recordMarkers {
		if bytes.Count(raw, []byte(m)) < 2 { // produced and fetched
			t.Fatalf("%s holds %q %d times: the test would prove nothing", file, m, bytes.Count(raw, []byte(m)))
		}
	}
	for _, args := range [][]string{
		{"read", "--json", file}, {"read", "--text", file},
		{"analyze", "--json", file}, {"analyze", "--text", file},
	} {
		out := runKwire(t, args...)
		for _, m := range recordMarkers {
			if bytes.Contains(out, []byte(m)) {
				t.Errorf("kwire %v printed record data %q", args, m)
			}
		}
		if args[0] == "read" && (!bytes.Contains(out, []byte("Produce")) || !bytes.Contains(out, []byte("Fetch"))) {
			t.Errorf("kwire %v: Produce and Fetch exchanges not decoded", args)
		}
	}
}
