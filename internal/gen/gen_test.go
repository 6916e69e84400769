package gen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain lets the test binary serve as a child process (StartChild
// re-executes os.Executable with "child NAME").
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(ChildMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// tinyScenario produces and consumes a few records, optionally from a
// child process.
func tinyScenario(opts Options, child bool) Scenario {
	return Scenario{
		Name:    "tiny",
		Options: opts,
		Run: func(ctx context.Context, c *Cluster) error {
			const topic, n = "tiny", 40
			if child {
				ch, err := c.StartChild(ctx, "producer", ProducerArgs{ClientID: "tiny-child", Topic: topic, Records: n, Size: 3000})
				if err != nil {
					return err
				}
				if err := ch.Wait(ctx); err != nil {
					return fmt.Errorf("child: %w", err)
				}
			} else {
				cl, err := c.Kgo(kgo.ClientID("tiny-producer"))
				if err != nil {
					return err
				}
				err = produce(ctx, cl, topic, 0, n, 3000, 10)
				cl.Close()
				if err != nil {
					return err
				}
			}
			return consumeAll(ctx, c, "tiny-reader", n, nil, topic)
		},
	}
}

// TestChildKilled starts a group member in a child process, SIGKILLs it
// once it owns partitions, and expects its connections to end in the
// capture and the loss of its counts to be noted.
func TestChildKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kfake cluster and a child process")
	}
	s := Scenario{
		Name:    "killed",
		Options: Options{Kfake: []kfake.Opt{kfake.SeedTopics(2, "tiny")}},
		Run: func(ctx context.Context, c *Cluster) error {
			ch, err := c.StartChild(ctx, "member", MemberArgs{ClientID: "doomed", Group: "g", Topics: []string{"tiny"}})
			if err != nil {
				return err
			}
			select {
			case <-ch.Ready():
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := ch.Kill(); err != nil {
				return err
			}
			if err := ch.Wait(ctx); err == nil {
				return errors.New("killed child exited cleanly")
			}
			return nil
		},
	}
	truth, err := Run(context.Background(), s, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	noted := false
	for _, n := range truth.Notes {
		noted = noted || strings.Contains(n, "child member")
	}
	if !noted {
		t.Errorf("no note about the killed child: %q", truth.Notes)
	}
	for _, cf := range truth.Frames {
		if cf.ClosedBy != "client" && cf.ClosedBy != "reset by client" {
			t.Errorf("conn %d closed by %q, want the client (the kernel closes a killed process's sockets)", cf.ID, cf.ClosedBy)
		}
	}
}

func TestCapture(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kfake cluster and real clients")
	}
	seed := []kfake.Opt{kfake.SeedTopics(2, "tiny")}
	for _, tc := range []struct {
		name  string
		opts  Options
		child bool
		edit  *Edit
	}{
		{name: "ethernet", opts: Options{Link: LinkEthernet, Kfake: seed}},
		{name: "sll2 mss 1448", opts: Options{Link: LinkSLL2, MSS: EthernetMSS, Kfake: seed}},
		{name: "null child", opts: Options{Link: LinkNull, Kfake: seed}, child: true},
		{name: "loss", opts: Options{Link: LinkEthernet, MSS: EthernetMSS, Kfake: seed}, edit: DropEveryNthData(5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := tinyScenario(tc.opts, tc.child)
			if tc.edit != nil {
				s.Edit = func(*Cluster) (*Edit, error) { return tc.edit, nil }
			}
			truth, err := Run(context.Background(), s, dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := truth.RequestsClient["Produce"]; got == 0 {
				t.Errorf("requests_client has no Produce (child counts lost?): %v", truth.RequestsClient)
			}
			got := readCapture(t, filepath.Join(dir, "tiny.pcapng"), tc.opts.Link.LinkType())
			checkAgainstTruth(t, truth, got, tc.edit != nil)
		})
	}
}

// stream is one direction of one connection as read back from a file.
type stream struct {
	isn     uint32
	synSeen bool
	bytes   int64
	covered []span // stream offsets present, from seq numbers
	lastEnd int64
}

type connKey struct{ client, server string }

// readCapture decodes every packet as Link/IPv4/TCP and collects payload
// bytes per connection and direction.
func readCapture(t *testing.T, path string, lt layers.LinkType) map[connKey]*[2]stream {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != lt {
		t.Fatalf("link type %v, want %v", r.LinkType(), lt)
	}
	out := map[connKey]*[2]stream{}
	for n := 0; ; n++ {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := gopacket.NewPacket(data, lt, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if ip == nil || tcp == nil || p.ErrorLayer() != nil {
			t.Fatalf("packet %d is not IPv4/TCP: %v", n, p)
		}
		src := netip.AddrPortFrom(netip.MustParseAddr(ip.SrcIP.String()), uint16(tcp.SrcPort)).String()
		dst := netip.AddrPortFrom(netip.MustParseAddr(ip.DstIP.String()), uint16(tcp.DstPort)).String()
		key, d := connKey{src, dst}, ToServer
		if _, ok := out[connKey{dst, src}]; ok {
			key, d = connKey{dst, src}, ToClient
		} else if tcp.SYN && tcp.ACK {
			key, d = connKey{dst, src}, ToClient
		}
		s := out[key]
		if s == nil {
			s = new([2]stream)
			out[key] = s
		}
		st := &s[d]
		if tcp.SYN {
			st.isn, st.synSeen = tcp.Seq, true
			continue
		}
		if len(tcp.Payload) == 0 {
			continue
		}
		off := int64(tcp.Seq - st.isn - 1)
		st.bytes += int64(len(tcp.Payload))
		st.covered = append(st.covered, span{off, off + int64(len(tcp.Payload))})
	}
	return out
}

func checkAgainstTruth(t *testing.T, truth *Truth, got map[connKey]*[2]stream, lossy bool) {
	t.Helper()
	if len(got) != len(truth.Frames) {
		t.Errorf("capture has %d connections, truth %d", len(got), len(truth.Frames))
	}
	var nframes, intact int
	defer func() {
		if nframes == 0 || (lossy && intact == nframes) || (!lossy && intact != nframes) {
			t.Errorf("%d frames, %d intact (lossy %v)", nframes, intact, lossy)
		}
	}()
	for _, cf := range truth.Frames {
		s := got[connKey{cf.Client, cf.Server}]
		if s == nil {
			t.Errorf("connection %s -> %s missing from capture", cf.Client, cf.Server)
			continue
		}
		for d, frames := range [2][]Frame{cf.ToServer, cf.ToClient} {
			var sum int64
			for _, f := range frames {
				sum += 4 + int64(f.Size)
			}
			dropped := [2]int64{cf.DroppedToServer, cf.DroppedToClient}[d]
			if s[d].bytes+dropped != sum {
				t.Errorf("conn %d %v: payload %d + dropped %d bytes, frames cover %d", cf.ID, Dir(d), s[d].bytes, dropped, sum)
			}
			if !lossy && dropped != 0 {
				t.Errorf("conn %d %v: %d bytes dropped without an edit", cf.ID, Dir(d), dropped)
			}
			for _, f := range frames {
				nframes++
				if f.Intact {
					intact++
				}
				if f.Intact != covered(s[d].covered, f.Offset, f.End()) {
					t.Errorf("conn %d %v frame at %d: intact %v, but the file says otherwise", cf.ID, Dir(d), f.Offset, f.Intact)
				}
			}
		}
	}
}

// covered reports whether [from, to) is fully inside the union of spans
// (which arrive in stream order).
func covered(spans []span, from, to int64) bool {
	at := from
	for _, s := range spans {
		if s.from <= at && s.to > at {
			at = s.to
		}
		if at >= to {
			return true
		}
	}
	return at >= to
}
