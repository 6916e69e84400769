package decode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwire/kwire/capture"
)

// Hostile and broken captures, written as pcap files and read the way
// `kwire read` reads them: capture.OpenFiles into a Decoder. Kafka frames
// are built with kmsg; the TLS bytes come from crypto/tls. Every case puts
// good exchanges before and after the bad part and checks they all come
// out, with the right counters, and that the heap stayed small.

// capBuilder collects the packets of synthetic TCP connections (Ethernet,
// IPv4), 100µs apart, and writes them as a pcap file.
type capBuilder struct {
	tb   testing.TB
	now  time.Time
	pkts []packet
}

type packet struct {
	at   time.Time
	data []byte
}

// tcpConn is one synthetic connection: 10.0.0.1:cliPort -> 10.0.0.2:srvPort.
type tcpConn struct {
	b        *capBuilder
	cli, srv netip.AddrPort
	next     [2]uint32 // next sequence number, by capture.Dir
	id       uint16
}

func newCapBuilder(tb testing.TB) *capBuilder { return &capBuilder{tb: tb, now: t0} }

func (b *capBuilder) conn(cliPort, srvPort uint16) *tcpConn {
	return &tcpConn{b: b, cli: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), cliPort),
		srv: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 2}), srvPort), next: [2]uint32{1000, 500000}}
}

// segment builds one segment at seq (flags: letters of S A F R P) without
// adding it to the capture.
func (c *tcpConn) segment(dir capture.Dir, flags string, seq uint32, payload []byte) []byte {
	c.id++
	src, dst := c.cli, c.srv
	if dir == capture.ToClient {
		src, dst = dst, src
	}
	return tcpFrame(c.b.tb, src, dst, seq, c.id, flags, payload)
}

func tcpFrame(tb testing.TB, src, dst netip.AddrPort, seq uint32, id uint16, flags string, payload []byte) []byte {
	return new(framer).frame(tb, src, dst, seq, id, flags, payload)
}

// framer serializes Ethernet/IPv4/TCP frames with gopacket, reusing its
// layers and buffer: a frame is valid until the next call.
type framer struct {
	eth layers.Ethernet
	ip  layers.IPv4
	tcp layers.TCP
	buf gopacket.SerializeBuffer
}

func (f *framer) frame(tb testing.TB, src, dst netip.AddrPort, seq uint32, id uint16, flags string, payload []byte) []byte {
	if f.buf == nil {
		f.buf = gopacket.NewSerializeBuffer()
	}
	f.ip = layers.IPv4{Version: 4, TTL: 64, Id: id, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
		SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	f.tcp = layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: seq, Ack: 1, Window: 65535,
		SYN: strings.Contains(flags, "S"), ACK: strings.Contains(flags, "A"), FIN: strings.Contains(flags, "F"),
		RST: strings.Contains(flags, "R"), PSH: strings.Contains(flags, "P")}
	f.tcp.SetNetworkLayerForChecksum(&f.ip)
	f.eth = layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	if err := gopacket.SerializeLayers(f.buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &f.eth, &f.ip, &f.tcp, gopacket.Payload(payload)); err != nil {
		tb.Fatal(err)
	}
	return f.buf.Bytes()
}

// push adds frames to the capture, each 100µs after the previous packet.
func (b *capBuilder) push(frames ...[]byte) {
	for _, f := range frames {
		b.now = b.now.Add(100 * time.Microsecond)
		b.pkts = append(b.pkts, packet{at: b.now, data: f})
	}
}

// wait moves the capture clock on.
func (b *capBuilder) wait(d time.Duration) { b.now = b.now.Add(d) }

// segments cuts data into MSS-sized segments of dir at the next sequence
// numbers, without adding them.
func (c *tcpConn) segments(dir capture.Dir, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := min(len(data), 1448)
		out = append(out, c.segment(dir, "PA", c.next[dir], data[:n]))
		c.next[dir] += uint32(n)
		data = data[n:]
	}
	return out
}

func (c *tcpConn) send(dir capture.Dir, data []byte) { c.b.push(c.segments(dir, data)...) }

func (c *tcpConn) handshake() {
	c.b.push(c.segment(capture.ToServer, "S", c.next[0]-1, nil), c.segment(capture.ToClient, "SA", c.next[1]-1, nil),
		c.segment(capture.ToServer, "A", c.next[0], nil))
}

func (c *tcpConn) fin() {
	c.b.push(c.segment(capture.ToServer, "FA", c.next[0], nil), c.segment(capture.ToClient, "FA", c.next[1], nil))
	c.next[0]++
	c.next[1]++
}

// hb sends a Heartbeat v4 request with correlation id corr and its answer.
func (c *tcpConn) hb(corr int32) {
	c.send(capture.ToServer, reqFrame(heartbeatReq(1), 4, corr, "c"))
	c.send(capture.ToClient, respFrame(heartbeatResp(0), 4, corr))
}

// file returns the capture as pcap bytes; snaplen > 0 cuts every packet
// to that many bytes, as tcpdump -s would.
func (b *capBuilder) file(snaplen int) []byte {
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	if err := w.WriteFileHeader(uint32(orDefault(snaplen, 262144)), layers.LinkTypeEthernet); err != nil {
		b.tb.Fatal(err)
	}
	for _, p := range b.pkts {
		data := p.data
		if snaplen > 0 && len(data) > snaplen {
			data = data[:snaplen]
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.at, CaptureLength: len(data), Length: len(p.data)}, data); err != nil {
			b.tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func writeFile(tb testing.TB, name string, b []byte) string {
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// result is what a capture gave: exchanges and anomalies, counters, Run's
// error, and the heap's growth.
type result struct {
	rec  *recorder
	cap  capture.Stats
	dec  Stats
	err  error
	heap uint64 // peak heap (live and not yet collected) above the start, sampled
}

// heapProbe samples the heap in use (runtime/metrics, no stop-the-world)
// every 16 chunks and keeps the peak.
type heapProbe struct {
	next   capture.Sink
	n      int
	sample []metrics.Sample
	peak   uint64
}

func newHeapProbe(next capture.Sink) *heapProbe {
	runtime.GC()
	p := &heapProbe{next: next, sample: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
	p.peak = p.read()
	return p
}

func (p *heapProbe) read() uint64 {
	metrics.Read(p.sample)
	return p.sample[0].Value.Uint64()
}

func (p *heapProbe) Chunk(c *capture.Chunk) {
	p.next.Chunk(c)
	if p.n++; p.n%16 == 0 {
		p.peak = max(p.peak, p.read())
	}
}

// runCapture reads the files as kwire read does (default options, broker
// port 9092) and checks that the decoder dropped every connection's state.
func runCapture(t testing.TB, paths ...string) result {
	t.Helper()
	ports, _ := capture.ParsePorts("9092")
	src, err := capture.OpenFiles(paths, &capture.Options{Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	r := result{rec: &recorder{}}
	d := New(r.rec, nil)
	probe := newHeapProbe(d)
	start := probe.peak
	r.err = src.Run(context.Background(), probe)
	probe.peak = max(probe.peak, probe.read())
	r.cap, r.dec, r.heap = src.Stats(), d.Stats(), probe.peak-start
	if len(d.conns) != 0 || d.buffered != 0 {
		t.Errorf("decoder kept the state of %d connections (%d bytes) after every close", len(d.conns), d.buffered)
	}
	return r
}

// hbs lists the summaries of Heartbeat exchanges seen, by correlation id.
func hbs(corrs ...int32) []string {
	var out []string
	for _, c := range corrs {
		out = append(out, fmt.Sprintf("Heartbeat v4 #%d seen", c))
	}
	return out
}

// noise returns n bytes of seeded random data: the same in every run.
func noise(seed uint64, n int) []byte {
	r := mrand.New(mrand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// heapCeiling is the growth of the heap allowed to the small cases: far
// below what the bad part would take if it were buffered (a 2 GB frame,
// 10,000 unsolicited responses...).
const heapCeiling = 16 << 20

func TestAdversarialCaptures(t *testing.T) {
	tests := []struct {
		name      string
		snaplen   int
		build     func(b *capBuilder)
		want      []string
		anomalies []AnomalyKind
		check     func(t *testing.T, r result)
	}{{
		name: "random bytes on the Kafka port",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(1)
			c.send(capture.ToServer, noise(1, 8192)) // inside a live Kafka connection
			c.send(capture.ToClient, noise(2, 8192))
			c.hb(2)
			c.hb(3)
			junk := b.conn(40002, 9092) // a connection carrying nothing but noise
			junk.handshake()
			junk.send(capture.ToServer, noise(3, 100<<10))
			junk.send(capture.ToClient, noise(4, 100<<10))
			after := b.conn(40003, 9092)
			after.handshake()
			after.hb(4)
		},
		want:      hbs(1, 2, 3, 4),
		anomalies: []AnomalyKind{AnomalyResync, AnomalyResync, AnomalyNotKafka},
		check: func(t *testing.T, r result) {
			if r.dec.NonKafkaConns != 1 || r.dec.Resyncs != 2 || r.dec.DecodeErrors != 0 {
				t.Errorf("non_kafka, resyncs, decode_errors = %d, %d, %d; want 1, 2, 0", r.dec.NonKafkaConns, r.dec.Resyncs, r.dec.DecodeErrors)
			}
		},
	}, {
		name: "frame lengths of 2 GB",
		build: func(b *capBuilder) {
			huge := func(f []byte) []byte {
				f = append([]byte(nil), f...)
				binary.BigEndian.PutUint32(f, 1<<31-1)
				return f
			}
			c := b.conn(40001, 9092) // a Produce request claiming 2 GB, then silence
			c.handshake()
			c.hb(1)
			c.send(capture.ToServer, append(huge(reqFrame(produceReq(1, 100), 9, 2, "p")), noise(5, 64<<10)...))
			c.fin()
			r := b.conn(40002, 9092) // a response claiming 2 GB
			r.handshake()
			r.send(capture.ToServer, reqFrame(heartbeatReq(1), 4, 3, "c"))
			r.send(capture.ToClient, append(huge(respFrame(heartbeatResp(0), 4, 3)), noise(6, 64<<10)...))
			r.fin()
			j := b.conn(40003, 9092) // 2 GB length before a header that is not a request
			j.handshake()
			j.send(capture.ToServer, binary.BigEndian.AppendUint32(nil, 1<<31-1))
			j.send(capture.ToServer, noise(7, 100))
			j.hb(4)
			j.hb(5)
		},
		want:      append(hbs(1), "Produce v9 #2 missing noreq", "Heartbeat v4 #3 seen noresp", "Heartbeat v4 #4 seen", "Heartbeat v4 #5 seen"),
		anomalies: []AnomalyKind{AnomalyOversize, AnomalyOversize, AnomalyResync},
		check: func(t *testing.T, r result) {
			if r.dec.Oversize != 2 {
				t.Errorf("oversize_frames = %d, want 2", r.dec.Oversize)
			}
		},
	}, {
		name: "responses with no requests",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(1)
			var unsolicited []byte
			for corr := range int32(10000) {
				unsolicited = append(unsolicited, respFrame(heartbeatResp(0), 4, 100+corr)...)
			}
			c.send(capture.ToClient, unsolicited)
			c.hb(2)
			c.fin()
		},
		want: hbs(1, 2),
		check: func(t *testing.T, r result) {
			if r.dec.Unmatched != 10000 || r.dec.Exchanges != 2 {
				t.Errorf("unmatched, exchanges = %d, %d; want 10000, 2", r.dec.Unmatched, r.dec.Exchanges)
			}
			if n := len(r.rec.an); n != 10000 {
				t.Errorf("%d unmatched_response anomalies, want 10000", n)
			}
			r.rec.an = nil // checked: 10000 of them
		},
	}, {
		name: "correlation id reuse",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(7)
			// Two requests in flight with the same id, of different APIs:
			// brokers answer in order, so each response is its own.
			c.send(capture.ToServer, cat(reqFrame(metadataReq(), 12, 7, "c"), reqFrame(heartbeatReq(1), 4, 7, "c")))
			c.send(capture.ToClient, cat(respFrame(kmsg.NewPtrMetadataResponse(), 12, 7), respFrame(heartbeatResp(0), 4, 7)))
			c.hb(7)
			c.hb(8)
		},
		want: []string{"Heartbeat v4 #7 seen", "Metadata v12 #7 seen", "Heartbeat v4 #7 seen", "Heartbeat v4 #7 seen", "Heartbeat v4 #8 seen"},
		check: func(t *testing.T, r result) {
			if r.dec.DecodeErrors != 0 || r.dec.Unmatched != 0 {
				t.Errorf("decode_errors, unmatched = %d, %d; want 0, 0", r.dec.DecodeErrors, r.dec.Unmatched)
			}
		},
	}, {
		name: "TLS on the Kafka port",
		build: func(b *capBuilder) {
			toSrv, toCli := tlsSession(t)
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(1)
			tc := b.conn(40002, 9092) // TLS from the handshake on
			tc.handshake()
			tc.send(capture.ToServer, toSrv[0])
			tc.send(capture.ToClient, toCli[0])
			tc.send(capture.ToServer, toSrv[1])
			tc.send(capture.ToClient, toCli[1])
			mid := b.conn(40003, 9092) // TLS application data, capture started mid-stream
			mid.send(capture.ToServer, toSrv[1])
			mid.send(capture.ToClient, toCli[1])
			c.hb(2)
		},
		want:      hbs(1, 2),
		anomalies: []AnomalyKind{AnomalyTLS, AnomalyTLS},
		check: func(t *testing.T, r result) {
			if r.dec.TLSConns != 2 || r.dec.Resyncs != 0 || r.dec.DecodeErrors != 0 {
				t.Errorf("tls_connections, resyncs, decode_errors = %d, %d, %d; want 2, 0, 0", r.dec.TLSConns, r.dec.Resyncs, r.dec.DecodeErrors)
			}
		},
	}, {
		name:    "packets cut by the snaplen",
		snaplen: 200,
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(1)
			c.send(capture.ToServer, reqFrame(produceReq(-1, 5000), 9, 2, "p"))
			c.send(capture.ToClient, respFrame(produceResp(), 9, 2))
			c.hb(3)
		},
		want:      append(hbs(1), "Produce v9 #2 seen noreq", "Heartbeat v4 #3 seen"),
		anomalies: []AnomalyKind{AnomalyGap, AnomalyGap, AnomalyGap, AnomalyGap},
		check: func(t *testing.T, r result) {
			if r.cap.SnaplenTruncated != 4 || r.dec.Resyncs != 0 {
				t.Errorf("snaplen_truncated, resyncs = %d, %d; want 4, 0", r.cap.SnaplenTruncated, r.dec.Resyncs)
			}
		},
	}, {
		name: "duplicated and reordered segments",
		build: func(b *capBuilder) {
			c := b.conn(40001, 9092)
			c.handshake()
			c.hb(1)
			meta := kmsg.NewPtrMetadataResponse()
			for i := range 200 {
				tp := kmsg.NewMetadataResponseTopic()
				tp.Topic = kmsg.StringPtr(fmt.Sprintf("topic-%03d", i))
				tp.Partitions = make([]kmsg.MetadataResponseTopicPartition, 3)
				meta.Topics = append(meta.Topics, tp)
			}
			c.send(capture.ToServer, reqFrame(metadataReq(), 12, 2, "c"))
			segs := c.segments(capture.ToClient, respFrame(meta, 12, 2))
			if len(segs) < 6 {
				t.Fatalf("metadata response in %d segments, want at least 6", len(segs))
			}
			dup := append([]byte(nil), segs[1]...) // the same packet captured twice
			retrans := c.segment(capture.ToClient, "PA", c.next[1]-uint32(len(segs[len(segs)-1])-54), segs[len(segs)-1][54:])
			b.push(segs[0], segs[2], segs[1], dup, segs[4], segs[3])
			b.push(segs[5:]...)
			b.push(retrans)
			c.hb(3)
		},
		want: append(hbs(1), "Metadata v12 #2 seen", "Heartbeat v4 #3 seen"),
		check: func(t *testing.T, r result) {
			if r.cap.Duplicates != 1 || r.cap.OutOfOrder != 2 || r.cap.Retransmitted != 1 || r.cap.Gaps != 0 {
				t.Errorf("duplicates, out_of_order, retransmitted, gaps = %d, %d, %d, %d; want 1, 2, 1, 0",
					r.cap.Duplicates, r.cap.OutOfOrder, r.cap.Retransmitted, r.cap.Gaps)
			}
		},
	}, {
		name: "capture starts mid-frame in both directions",
		build: func(b *capBuilder) {
			big := reqFrame(produceReq(-1, 5000), 9, 1, "p")
			for i, srvPort := range []uint16{9092, 30000} { // a broker port, and one to guess
				cliPort := uint16(40001)
				if srvPort != 9092 {
					cliPort = 20000 // the client on the lower port: guessed wrong first
				}
				c := b.conn(cliPort, srvPort)
				c.send(capture.ToServer, big[1234:])
				c.send(capture.ToClient, respFrame(produceResp(), 9, 1)[5:])
				c.hb(int32(2 + 2*i))
				c.hb(int32(3 + 2*i))
			}
		},
		want:      hbs(2, 3, 4, 5),
		anomalies: []AnomalyKind{AnomalyResync, AnomalyResync, AnomalyResync, AnomalyResync},
		check: func(t *testing.T, r result) {
			if r.dec.Resyncs != 4 || r.dec.Unmatched != 0 {
				t.Errorf("resyncs, unmatched = %d, %d; want 4, 0", r.dec.Resyncs, r.dec.Unmatched)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newCapBuilder(t)
			tt.build(b)
			r := runCapture(t, writeFile(t, "c.pcap", b.file(tt.snaplen)))
			if r.err != nil {
				t.Fatal(r.err)
			}
			diff(t, "exchanges", tt.want, summary(r.rec))
			if tt.check != nil {
				tt.check(t, r)
			}
			diff(t, "anomalies", tt.anomalies, r.rec.kinds())
			t.Logf("%d exchanges, %d anomalies, heap peak +%d KB", r.dec.Exchanges, len(r.rec.an), r.heap>>10)
			if r.heap > heapCeiling {
				t.Errorf("heap grew by %d MB, ceiling %d MB", r.heap>>20, heapCeiling>>20)
			}
		})
	}
}

// tlsSession runs a real TLS 1.3 handshake (crypto/tls, a throwaway
// certificate) over an in-memory pipe and returns what each side wrote:
// [0] the handshake flights, [1] an application data record.
func tlsSession(t *testing.T) (toSrv, toCli [2][]byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{"broker"}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	cp, sp := net.Pipe()
	var cw, sw bytes.Buffer
	cli := tls.Client(tapConn{cp, &cw}, &tls.Config{InsecureSkipVerify: true, Time: func() time.Time { return t0 }})
	srv := tls.Server(tapConn{sp, &sw}, &tls.Config{Certificates: []tls.Certificate{cert}, Time: func() time.Time { return t0 }})
	done, flight := make(chan error, 1), make(chan []byte, 1)
	go func() {
		err := srv.Handshake()
		if err == nil {
			// Read the client's data: the handshake (and session
			// tickets) are all written by then.
			_, err = io.ReadFull(srv, make([]byte, 5))
		}
		flight <- bytes.Clone(sw.Bytes())
		sw.Reset()
		if err == nil {
			_, err = srv.Write([]byte("world"))
		}
		done <- err
	}()
	if err := cli.Handshake(); err != nil {
		t.Fatal(err)
	}
	toSrv[0] = bytes.Clone(cw.Bytes())
	cw.Reset()
	if _, err := cli.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	hs := <-flight
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	toSrv[1], toCli[0], toCli[1] = bytes.Clone(cw.Bytes()), hs, bytes.Clone(sw.Bytes())
	if toSrv[0][0] != 0x16 || toCli[0][0] != 0x16 || toSrv[1][0] != 0x17 || toCli[1][0] != 0x17 {
		t.Fatalf("unexpected TLS records: %x %x %x %x", toSrv[0][:1], toCli[0][:1], toSrv[1][:1], toCli[1][:1])
	}
	return toSrv, toCli
}

// tapConn copies what is written to a connection into w.
type tapConn struct {
	net.Conn
	w *bytes.Buffer
}

func (c tapConn) Write(p []byte) (int, error) {
	c.w.Write(p)
	return c.Conn.Write(p)
}

// TestSYNFlood reads a million tiny connections to the broker port, half
// of them a bare SYN and half a SYN and one byte, between the exchanges of
// a connection opened before the flood and one opened after it. At the
// default caps (capture.Options.MaxConns 100,000) the flood fills the
// connection table; each new connection then replaces the oldest one that
// carried no payload (the bare SYNs), until only connections with a byte
// are left: 99,999 evicted, 200,000 tracked in all; the rest of the flood
// is counted, not tracked. The connection open before it is still decoded, and once the flood's
// connections go idle (5 minutes of capture time) new ones are tracked
// again. The heap is sampled throughout: its peak growth must stay under
// floodHeapCeiling.
func TestSYNFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a million connections: a few seconds")
	}
	const flood = 1_000_000
	b := newCapBuilder(t)
	a := b.conn(40001, 9092)
	a.handshake()
	a.hb(1)
	path := filepath.Join(t.TempDir(), "flood.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	put := func(at time.Time, data []byte) {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(data), Length: len(data)}, data); err != nil {
			t.Fatal(err)
		}
	}
	flush := func() {
		for _, p := range b.pkts {
			put(p.at, p.data)
		}
		b.pkts = b.pkts[:0]
	}
	flush()
	const tracked = 100000 // capture's default MaxConns: a, then the flood
	srv := netip.MustParseAddrPort("10.0.0.2:9092")
	overCap := 0 // packets of the connections beyond the cap
	var fr framer
	for i := range flood {
		b.now = b.now.Add(time.Microsecond)
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{172, 16, byte(i / 50000), 1}), uint16(10000+i%50000))
		put(b.now, fr.frame(t, src, srv, 7, 1, "S", nil))
		n := 1
		if i%2 == 1 {
			put(b.now, fr.frame(t, src, srv, 8, 2, "PA", []byte{0}))
			n++
		}
		if i >= 2*tracked-2 { // the bare SYNs evicted: the table is full of payload
			overCap += n
		}
	}
	a.hb(2) // the connection opened before the flood is still decoded
	b.wait(6 * time.Minute)
	c := b.conn(40002, 9092) // and a new one, once the flood is idle
	c.handshake()
	c.hb(3)
	flush()
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	start := time.Now()
	r := runCapture(t, path)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("%d packets in %v; heap peak +%d MB; capture %+v", r.cap.Packets, time.Since(start), r.heap>>20, r.cap)
	diff(t, "exchanges", hbs(1, 2, 3), summary(r.rec))
	diff(t, "anomalies", []AnomalyKind(nil), r.rec.kinds())
	// Connections over the cap are remembered (to count them once) up to
	// MaxConns of them, so conns_over_cap stops there.
	if r.cap.ConnsSeen != 2*tracked || r.cap.ConnsEvictedNoData != tracked-1 || r.cap.ConnsOverCap != tracked || r.cap.PacketsOverCap != uint64(overCap) {
		t.Errorf("conns_seen, conns_evicted_no_data, conns_over_cap, packets_over_cap = %d, %d, %d, %d; want %d, %d, %d, %d", r.cap.ConnsSeen,
			r.cap.ConnsEvictedNoData, r.cap.ConnsOverCap, r.cap.PacketsOverCap, 2*tracked, tracked-1, tracked, overCap)
	}
	if r.heap > floodHeapCeiling {
		t.Errorf("heap grew by %d MB, ceiling %d MB", r.heap>>20, floodHeapCeiling>>20)
	}
}

// floodHeapCeiling bounds the heap growth of TestSYNFlood: 100,000 tracked
// connections (reassembly state, the decoder's state for the 50,000 with a
// byte), 100,000 remembered over the cap, and the garbage not yet
// collected. Measured: about 200 MB, 2 KB per tracked connection.
const floodHeapCeiling = 384 << 20

// TestDamagedFiles reads captures cut short or damaged: what comes before
// the damage is decoded, a file cut short is not an error, a damaged
// record stops its file with an error naming it, and another file merged
// with it is read to its end.
func TestDamagedFiles(t *testing.T) {
	// Connection a is in the first file; b, alongside it, in the second.
	b := newCapBuilder(t)
	a, o := b.conn(40001, 9092), b.conn(40002, 9092)
	a.handshake()
	o.handshake()
	a.hb(1)
	o.hb(2)
	a.send(capture.ToServer, reqFrame(heartbeatReq(1), 4, 3, "c"))
	a.send(capture.ToClient, respFrame(heartbeatResp(0), 4, 3)) // the last record of a's file
	o.hb(4)
	isA := func(p packet) bool {
		return binary.BigEndian.Uint16(p.data[34:]) == 40001 || binary.BigEndian.Uint16(p.data[36:]) == 40001
	}
	split := func(keep func(packet) bool) *capBuilder {
		c := &capBuilder{tb: t}
		for _, p := range b.pkts {
			if keep(p) {
				c.pkts = append(c.pkts, p)
			}
		}
		return c
	}
	fileA := split(isA).file(0)
	fileO := split(func(p packet) bool { return !isA(p) }).file(0)
	// Offsets of the records of file a: a 24-byte file header, then a
	// 16-byte header and the data for each.
	var recs []int
	for off := 24; off < len(fileA); off += 16 + int(binary.LittleEndian.Uint32(fileA[off+8:])) {
		recs = append(recs, off)
	}
	last := recs[len(recs)-1]
	damaged := bytes.Clone(fileA)
	binary.LittleEndian.PutUint32(damaged[last+8:], 4000) // captured more than its length
	ng := pcapngOf(t, split(isA))
	tests := []struct {
		name string
		file []byte
		cut  int    // files truncated
		err  string // what Run's error says, besides the file name
		sync int    // files read past damage
	}{
		{"file cut inside a record", fileA[:last+30], 1, "", 0},
		{"file cut inside a record header", fileA[:last+7], 1, "", 0},
		{"pcapng cut inside a block", ng[:len(ng)-20], 1, "", 0},
		// The damaged record is skipped, and reading goes on (issue 15).
		{"damaged record length", damaged, 0, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pa := writeFile(t, "a.pcap", tt.file)
			r := runCapture(t, pa, writeFile(t, "o.pcap", fileO))
			switch {
			case tt.err == "" && r.err != nil:
				t.Fatalf("Run = %v, want nil", r.err)
			case tt.err != "" && (r.err == nil || !strings.Contains(r.err.Error(), tt.err) || !strings.Contains(r.err.Error(), pa)):
				t.Fatalf("Run = %v, want an error naming %s and %q", r.err, pa, tt.err)
			}
			// Before the damage, and all of the other file; a's last
			// request lost its response to the damage. A damaged
			// capture length whose original length is right is
			// repaired: nothing is lost.
			want := []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #4 seen", "Heartbeat v4 #3 missing"}
			if tt.sync > 0 {
				want = []string{"Heartbeat v4 #1 seen", "Heartbeat v4 #2 seen", "Heartbeat v4 #3 seen", "Heartbeat v4 #4 seen"}
			}
			diff(t, "exchanges", want, summary(r.rec))
			if r.cap.FilesRead != 2 || r.cap.FilesTruncated != tt.cut || r.cap.FilesResynced != tt.sync {
				t.Errorf("files_read, files_truncated, files_resynced = %d, %d, %d; want 2, %d, %d",
					r.cap.FilesRead, r.cap.FilesTruncated, r.cap.FilesResynced, tt.cut, tt.sync)
			}
		})
	}
}

// pcapngOf writes b's packets as a pcapng file.
func pcapngOf(t *testing.T, b *capBuilder) []byte {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range b.pkts {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.at, CaptureLength: len(p.data), Length: len(p.data)}, p.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGuessedSidesClosedFirst: on a connection whose sides were guessed,
// the broker's direction ends (FIN) before the client's first request is
// found, which swaps the sides. Both closes must still be seen as the two
// directions, or the connection's state is never dropped (found by
// FuzzReader: closed flags were not swapped with the sides).
func TestGuessedSidesClosedFirst(t *testing.T) {
	r := &recorder{}
	d := New(r, nil)
	conn := newConn(capture.RoleGuess, false)
	chunk := func(dir capture.Dir, kind capture.Kind, data []byte) {
		d.Chunk(&capture.Chunk{Conn: conn, Dir: dir, Kind: kind, Data: data, Reason: capture.CloseFIN, Time: t0})
	}
	chunk(capture.ToServer, capture.Data, respFrame(heartbeatResp(0), 4, 1)) // guessed wrong: the broker
	chunk(capture.ToServer, capture.Close, nil)
	chunk(capture.ToClient, capture.Data, reqFrame(heartbeatReq(1), 4, 2, "c")) // a request: sides swapped
	if conn.Client.Port() != 9092 {
		t.Fatalf("client %v after the request, want the swapped side", conn.Client)
	}
	chunk(capture.ToServer, capture.Close, nil) // the client's FIN, now ToServer
	if len(d.conns) != 0 {
		t.Errorf("decoder kept the connection after both directions closed")
	}
	diff(t, "exchanges", []string{"Heartbeat v4 #2 missing"}, summary(r))
}

// TestDamagedNegativeKey: a gap cuts a frame whose header has a negative
// key. No exchange may come of it (found by FuzzFramer: an exchange with
// key -1 and version -20479 was reported).
func TestDamagedNegativeKey(t *testing.T) {
	f := reqFrame(produceReq(-1, 500), 9, 1, "p")
	binary.BigEndian.PutUint16(f[4:], 0xffff) // key -1
	r, d, _ := feed(nil, newConn(capture.RolePort, true), 0, req(f[:100]), gap(capture.ToServer, 100), req(f[200:]),
		req(reqFrame(heartbeatReq(1), 4, 2, "c")), resp(respFrame(heartbeatResp(0), 4, 2)))
	diff(t, "exchanges", hbs(2), summary(r))
	// A header no request can have is not waited for: its bytes are
	// skipped at once, up to the next frame (lookahead.go junkRequest).
	diff(t, "anomalies", []AnomalyKind{AnomalyGap, AnomalyResync}, r.kinds())
	if st := d.Stats(); st.Requests != 1 {
		t.Errorf("requests = %d, want 1", st.Requests)
	}
}

// TestBufferedBound: what the decoder holds for later, across
// connections, stays within Options.MaxBuffered: request bodies awaiting
// responses that never come (a capture of one direction, `tcpdump dst
// port 9092`), and responses to requests never seen. Beyond the cap the
// bodies are dropped (the exchanges keep their headers) and the held
// responses reported unmatched, and buffer_limit_frames counts them.
func TestBufferedBound(t *testing.T) {
	const maxBuffered = 16 << 20
	body := produceReq(1, 512<<10) // acks=1: a response is awaited
	tests := []struct {
		name  string
		conns int
		dir   capture.Dir
		frame []byte
	}{
		{"request bodies awaiting responses", 4, capture.ToServer, reqFrame(body, 9, 0, "p")},
		{"responses to requests never seen", 20, capture.ToClient, respFrame(&kmsg.FetchResponse{Topics: []kmsg.FetchResponseTopic{{
			Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: make([]byte, 1<<20)}}}}}, 11, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			d := New(r, &Options{MaxBuffered: maxBuffered})
			// The live heap (after a collection), once per connection:
			// what the decoder holds, without the garbage.
			live := newHeapProbe(nil)
			start, peak := live.peak, uint64(0)
			frames := 0
			for c := range tt.conns {
				conn := newConn(capture.RolePort, true)
				conn.ID = uint64(c + 1)
				for i := range int32(50) {
					binary.BigEndian.PutUint32(tt.frame[8-4*int(tt.dir):], uint32(i)) // correlation id
					d.Chunk(&capture.Chunk{Conn: conn, Dir: tt.dir, Kind: capture.Data, Data: tt.frame, Time: t0})
					frames++
				}
				runtime.GC()
				peak = max(peak, live.read()-start)
			}
			held := int64(0)
			for _, cs := range d.conns {
				held += cs.buffered()
			}
			t.Logf("%d frames of %d KB; held %d MB at the end, live heap peak +%d MB", frames, len(tt.frame)>>10, held>>20, peak>>20)
			if held > maxBuffered+int64(len(tt.frame)) || peak > 2*maxBuffered {
				t.Errorf("held %d MB, live heap grew %d MB; --max-buffer is %d MB", held>>20, peak>>20, maxBuffered>>20)
			}
			if d.Stats().BufferLimit == 0 {
				t.Errorf("buffer_limit_frames = 0, want > 0")
			}
			for c := range tt.conns {
				d.Chunk(&capture.Chunk{Conn: &capture.Conn{ID: uint64(c + 1)}, Kind: capture.Close, Reason: capture.CloseEOF})
			}
			if st := d.Stats(); st.Exchanges+st.Unmatched != int64(frames) || d.buffered != 0 {
				t.Errorf("exchanges + unmatched = %d, want %d; buffered %d after close, want 0", st.Exchanges+st.Unmatched, frames, d.buffered)
			}
		})
	}
}

// TestBufferedBoundClaims: many streams at once start frames whose
// length claims megabytes and stop after a few bytes (a damaged file:
// flipped length prefixes, connections cut by damaged headers). Each
// stream's buffer is sized for the frame it claims, so the decoder
// counts capacity, not the bytes so far, against Options.MaxBuffered:
// before, 200 such streams held 600 MB of buffers with --max-buffer 16
// MB (issue 15).
func TestBufferedBoundClaims(t *testing.T) {
	const maxBuffered, conns = 16 << 20, 200
	frame := reqFrame(produceReq(1, 3<<20), 9, 1, "p")
	r := &recorder{}
	d := New(r, &Options{MaxBuffered: maxBuffered})
	live := newHeapProbe(nil)
	start, peak := live.peak, uint64(0)
	for c := range conns {
		conn := newConn(capture.RolePort, true)
		conn.ID = uint64(c + 1)
		d.Chunk(&capture.Chunk{Conn: conn, Dir: capture.ToServer, Kind: capture.Data, Data: frame[:200], Time: t0})
		if c%20 == 19 {
			runtime.GC()
			peak = max(peak, live.read()-start)
		}
	}
	held := int64(0)
	for _, cs := range d.conns {
		held += int64(cap(cs.dir[0].buf) + cap(cs.dir[1].buf))
	}
	t.Logf("%d streams claiming %d KB, 200 bytes each: buffers of %d MB at the end, live heap peak +%d MB",
		conns, len(frame)>>10, held>>20, peak>>20)
	if held > maxBuffered+int64(len(frame)) || peak > 2*maxBuffered {
		t.Errorf("buffers of %d MB, live heap grew %d MB; --max-buffer is %d MB", held>>20, peak>>20, maxBuffered>>20)
	}
	if d.Stats().BufferLimit == 0 {
		t.Errorf("buffer_limit_frames = 0, want > 0")
	}
	for c := range conns {
		d.Chunk(&capture.Chunk{Conn: &capture.Conn{ID: uint64(c + 1)}, Kind: capture.Close, Reason: capture.CloseEOF})
	}
	if d.buffered != 0 {
		t.Errorf("buffered %d after close, want 0", d.buffered)
	}
}
