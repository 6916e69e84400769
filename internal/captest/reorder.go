package captest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Reordered is what Reorder did.
type Reordered struct {
	// Data is the reordered capture, in the format of the input.
	Data []byte
	// Packets counts the records; Connections the TCP connections among
	// them, and Closing those picked to have their closes moved.
	Packets, Connections, Closing int
	// ClosesMoved counts the FIN or RST segments moved before the last
	// data segment of their direction, EarlyData the handshakes whose
	// last ACK was moved after the first data, Swapped the pairs of data
	// segments exchanged.
	ClosesMoved, EarlyData, Swapped int
	// ClientsLate or BrokersLate is the skew by which the packets of the
	// clients, or those of the brokers, were delivered late; the other is
	// zero.
	ClientsLate, BrokersLate time.Duration
	// Crossed counts the segments (with payload, SYN or FIN) delivered
	// after a packet of the other direction that acknowledges them, and
	// Answered those with payload delivered after payload the other
	// direction sent later (with the clients late, a request after its
	// response).
	Crossed, Answered int
	// MaxSwapDelay is the longest a swapped segment came late by (at most
	// ReorderOptions.MaxDelay).
	MaxSwapDelay time.Duration
}

// ReorderOptions says how much Reorder moves; nil means DefaultReorder.
type ReorderOptions struct {
	// Closing is the fraction of connections whose every direction has
	// its first FIN or RST moved before the last data segment it follows,
	// and whose handshake's last ACK, if it is a packet of its own, is
	// moved after the client's first data segment.
	Closing float64
	// Swap is the probability that a data segment changes places with the
	// next data segment of its direction, if that one came within
	// MaxDelay: reordering on the way holds a segment back for
	// microseconds to milliseconds, not across a client's pauses.
	Swap     float64
	MaxDelay time.Duration
	// Skew, when not zero, delivers the two directions as a tap with one
	// feed per direction, a SPAN port or a cloud traffic mirror does,
	// each on a path of its own: the packets the clients send, or those
	// the brokers send (Late, or picked by the seed), come late by a
	// time between Skew/4 and Skew, and are stamped when they come. Each
	// feed keeps its order; across feeds, a segment comes after the other
	// direction's packets that acknowledge it, and when the clients'
	// feed is late, a request after its response.
	Skew time.Duration
	Late Feed
}

// Feed names the packets one side of every connection sends.
type Feed int

// Feeds. FeedEither lets the seed pick.
const (
	FeedEither Feed = iota
	FeedClients
	FeedBrokers
)

// DefaultReorder is what the disorder tests use: half the connections
// closing early, 5% of data segments swapped.
var DefaultReorder = ReorderOptions{Closing: 0.5, Swap: 0.05, MaxDelay: 10 * time.Millisecond}

// CrossReorder is DefaultReorder with the clients' or the brokers' feed
// up to 5 ms late.
var CrossReorder = ReorderOptions{Closing: 0.5, Swap: 0.05, MaxDelay: 10 * time.Millisecond, Skew: 5 * time.Millisecond}

// Reorder returns a copy of src, a pcap or pcapng capture, in which
// segments of one direction of a TCP connection arrive out of order, as a
// loaded host, a multi-queue NIC or a SPAN port delivers them: nothing is
// added or removed, and the timestamps stay where they were, in the same
// increasing sequence; only the packets in those time slots move. Within a
// direction, packets move only past packets of their own direction and
// past packets of the other that carry no payload (pure ACKs, the other
// side's closes). Then, with ReorderOptions.Skew, one direction of every
// connection comes late, stamped when it comes, so that segments come
// after the other direction's packets that acknowledge them, and maybe
// requests after their responses. The same src, options and seed give
// the same copy.
func Reorder(src []byte, opts *ReorderOptions, seed uint64) (*Reordered, error) {
	if opts == nil {
		opts = &DefaultReorder
	}
	f, err := readCapture(src, "reorder")
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	items := make([]item, len(f.recs))
	var order []connKey
	seen := map[connKey]bool{}
	data := 0
	for i, r := range f.recs {
		items[i] = item{rec: r}
		s, ok := parseSegment(r)
		if !ok {
			continue
		}
		k := s.conn()
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		s.dir = s.src != k.a
		items[i].seg = s
		if len(s.payload) > 0 {
			data++
		}
	}
	res := &Reordered{Packets: len(f.recs), Connections: len(order)}
	// Swaps first, on the original order: a data segment with the next
	// data segment of its direction, when no payload of the other
	// direction lies between them. Such pairs are rarer than data
	// segments (most Kafka requests fit one segment and alternate with
	// their responses), so each is picked with the probability that swaps
	// opts.Swap of all data segments, where there are pairs enough.
	var pairs [][2]int
	for i := range items {
		if j := nextInDirection(items, i); j > 0 && items[j].rec.ci.Timestamp.Sub(items[i].rec.ci.Timestamp) <= opts.MaxDelay {
			pairs = append(pairs, [2]int{i, j})
		}
	}
	if len(pairs) > 0 {
		p := min(1, opts.Swap*float64(data)/2/float64(len(pairs)))
		used := map[int]bool{}
		for _, pr := range pairs {
			if used[pr[0]] || used[pr[1]] || rng.Float64() >= p {
				continue
			}
			used[pr[0]], used[pr[1]] = true, true
			swap(items, pr[0], pr[1])
			res.Swapped++
			if d := items[pr[1]].rec.ci.Timestamp.Sub(items[pr[0]].rec.ci.Timestamp); d > res.MaxSwapDelay {
				res.MaxSwapDelay = d
			}
		}
	}
	closing := map[connKey]bool{}
	for _, k := range order {
		if rng.Float64() < opts.Closing {
			closing[k] = true
			res.Closing++
		}
	}
	// Then the closes and early data, on the order the swaps left, one
	// connection after the other in order of first appearance.
	for _, k := range order {
		if !closing[k] {
			continue
		}
		for _, dir := range []bool{false, true} {
			// The first FIN or RST of the direction, and the last data
			// segment before it (the FIN's own payload aside).
			close, last := -1, -1
			for i, it := range items {
				s := it.seg
				if !s.tcp || s.conn() != k || s.dir != dir {
					continue
				}
				if s.flags&(flagFIN|flagRST) != 0 {
					close = i
					break
				}
				if len(s.payload) > 0 {
					last = i
				}
			}
			if close >= 0 && last >= 0 {
				moveBefore(items, close, last)
				res.ClosesMoved++
			}
		}
		if ack, first := handshakeACK(items, k); ack >= 0 && first >= 0 {
			moveAfter(items, ack, first)
			res.EarlyData++
		}
	}
	skew(items, opts, rng, res)
	out := make([]record, len(items))
	for i, it := range items {
		out[i] = it.rec
	}
	if res.Data, err = f.write(out, src); err != nil {
		return nil, fmt.Errorf("reorder: %w", err)
	}
	return res, nil
}

// item is a record with what Reorder parsed of it.
type item struct {
	rec record
	seg segment
}

// nextInDirection returns the index of the data segment that follows
// items[i], a data segment, in its direction, if no payload of the other
// direction and no FIN or RST of its own lies between them; else -1.
func nextInDirection(items []item, i int) int {
	s := items[i].seg
	if !s.tcp || len(s.payload) == 0 || s.flags&(flagFIN|flagRST) != 0 {
		return -1
	}
	for j := i + 1; j < len(items); j++ {
		o := items[j].seg
		if !o.tcp || o.conn() != s.conn() || (o.dir != s.dir && len(o.payload) == 0) {
			continue
		}
		if o.dir != s.dir || o.flags&(flagFIN|flagRST) != 0 {
			return -1
		}
		if len(o.payload) > 0 {
			return j
		}
	}
	return -1
}

// handshakeACK returns the indexes of the last ACK of connection k's
// handshake, if it is a packet of its own, and of the client's first data
// segment if it follows that ACK directly in its direction.
func handshakeACK(items []item, k connKey) (ack, first int) {
	ack, first = -1, -1
	for i, it := range items {
		s := it.seg
		if !s.tcp || s.conn() != k || s.flags&flagSYN == 0 || s.flags&flagACK != 0 {
			continue
		}
		client := s.dir // the side that sent the SYN
		for j := i + 1; j < len(items); j++ {
			o := items[j].seg
			if !o.tcp || o.conn() != k || o.dir != client {
				continue
			}
			if ack < 0 && len(o.payload) == 0 && o.flags == flagACK {
				ack = j
				continue
			}
			if ack >= 0 && len(o.payload) > 0 && o.flags&(flagFIN|flagRST|flagSYN) == 0 {
				first = j
			}
			break
		}
		break
	}
	return ack, first
}

// swap exchanges items i and j, each taking the other's timestamp, so that
// the capture's timestamps stay in the same sequence.
func swap(items []item, i, j int) {
	ti, tj := items[i].rec.ci.Timestamp, items[j].rec.ci.Timestamp
	items[i], items[j] = items[j], items[i]
	items[i].rec.ci.Timestamp, items[j].rec.ci.Timestamp = ti, tj
}

// moveAfter moves items[from] to index to (to > from), after what was
// there, with that item's timestamp: a pure ACK seen late, every other
// packet at its time.
func moveAfter(items []item, from, to int) {
	it := items[from]
	it.rec.ci.Timestamp = items[to].rec.ci.Timestamp
	copy(items[from:to], items[from+1:to+1])
	items[to] = it
}

// moveBefore moves items[from] to index to (to < from), before what was
// there, with that item's timestamp: it is seen that much earlier, and
// every other packet keeps its time.
func moveBefore(items []item, from, to int) {
	it := items[from]
	it.rec.ci.Timestamp = items[to].rec.ci.Timestamp
	copy(items[to+1:from+1], items[to:from])
	items[to] = it
}

const (
	flagFIN = 1 << iota
	flagSYN
	flagRST
	flagACK
)

// segment is what Reorder needs of a packet.
type segment struct {
	tcp      bool
	src, dst netip.AddrPort
	flags    int
	seq, ack uint32
	payload  []byte
	dir      bool // false: from the connection's lower endpoint
}

type connKey struct{ a, b netip.AddrPort }

func (s segment) conn() connKey {
	if s.src.Compare(s.dst) < 0 {
		return connKey{s.src, s.dst}
	}
	return connKey{s.dst, s.src}
}

func parseSegment(r record) (segment, bool) {
	p := gopacket.NewPacket(r.data, r.link, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok || p.NetworkLayer() == nil {
		return segment{}, false
	}
	nf := p.NetworkLayer().NetworkFlow()
	sa, ok1 := netip.AddrFromSlice(nf.Src().Raw())
	da, ok2 := netip.AddrFromSlice(nf.Dst().Raw())
	if !ok1 || !ok2 {
		return segment{}, false
	}
	s := segment{tcp: true, src: netip.AddrPortFrom(sa, uint16(tcp.SrcPort)), dst: netip.AddrPortFrom(da, uint16(tcp.DstPort)), seq: tcp.Seq, ack: tcp.Ack, payload: tcp.Payload}
	for _, fl := range []struct {
		on bool
		f  int
	}{{tcp.FIN, flagFIN}, {tcp.SYN, flagSYN}, {tcp.RST, flagRST}, {tcp.ACK, flagACK}} {
		if fl.on {
			s.flags |= fl.f
		}
	}
	return s, true
}
