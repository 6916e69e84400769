package captest

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"
)

// skew delivers one feed late (ReorderOptions.Skew): the packets the
// clients send, or those the brokers send, each stamped when it arrives,
// its time plus the skew, and the copy put in order of arrival; each feed
// keeps its own order. It counts what came to lie after what.
func skew(items []item, opts *ReorderOptions, rng *rand.Rand, res *Reordered) {
	if opts.Skew <= 0 {
		return
	}
	d := opts.Skew/4 + time.Duration(rng.Int64N(int64(opts.Skew*3/4)+1))
	late := opts.Late
	if late == FeedEither {
		late = FeedClients + Feed(rng.IntN(2))
	}
	if late == FeedClients {
		res.ClientsLate = d
	} else {
		res.BrokersLate = d
	}
	clients := clientSides(items)
	type arrival struct {
		it   item
		t    time.Time
		orig int
	}
	arr := make([]arrival, len(items))
	var last [2]time.Time // of each feed: brokers', clients'
	for i, it := range items {
		t, feed := it.rec.ci.Timestamp, 0
		if it.seg.tcp && it.seg.src == clients[it.seg.conn()] {
			feed = 1
		}
		if feed == 1 && res.ClientsLate > 0 || feed == 0 && res.BrokersLate > 0 {
			t = t.Add(d)
		}
		if t.Before(last[feed]) {
			t = last[feed] // a packet of the feed never overtakes the one before it
		}
		last[feed] = t
		arr[i] = arrival{it, t, i}
	}
	slices.SortStableFunc(arr, func(a, b arrival) int { return a.t.Compare(b.t) })
	// What each direction saw of the other so far: the furthest
	// acknowledgement and the latest packet with payload (by index in
	// the order before the skew).
	type seen struct {
		ack     uint32
		acked   bool
		payload int
	}
	other := map[connKey]*[2]seen{}
	for i, a := range arr {
		a.it.rec.ci.Timestamp = a.t
		items[i] = a.it
		s := a.it.seg
		if !s.tcp {
			continue
		}
		k := s.conn()
		o := other[k]
		if o == nil {
			o = &[2]seen{{payload: -1}, {payload: -1}}
			other[k] = o
		}
		dir := 0
		if s.dir {
			dir = 1
		}
		if end, ok := s.end(); ok && o[1-dir].acked && int32(o[1-dir].ack-end) >= 0 {
			res.Crossed++
			if len(s.payload) > 0 && o[1-dir].payload > a.orig {
				res.Answered++
			}
		}
		if s.flags&flagACK != 0 && (!o[dir].acked || int32(s.ack-o[dir].ack) > 0) {
			o[dir].ack, o[dir].acked = s.ack, true
		}
		if len(s.payload) > 0 {
			o[dir].payload = max(o[dir].payload, a.orig)
		}
	}
}

// end returns the sequence number after s, if s takes sequence space.
func (s segment) end() (uint32, bool) {
	n := uint32(len(s.payload))
	if s.flags&(flagSYN|flagFIN) != 0 {
		n++
	}
	return s.seq + n, n > 0
}

// clientSides returns the client endpoint of each connection: the sender
// of its SYN, else the receiver of its SYN-ACK, else the endpoint with the
// higher port (an ephemeral port, the broker's being the lower).
func clientSides(items []item) map[connKey]netip.AddrPort {
	client := map[connKey]netip.AddrPort{}
	known := map[connKey]bool{}
	for _, it := range items {
		s := it.seg
		if !s.tcp {
			continue
		}
		k := s.conn()
		switch {
		case known[k]:
		case s.flags&flagSYN != 0 && s.flags&flagACK == 0:
			client[k], known[k] = s.src, true
		case s.flags&flagSYN != 0:
			client[k], known[k] = s.dst, true
		default:
			if _, ok := client[k]; !ok {
				client[k] = k.a
				if k.b.Port() > k.a.Port() {
					client[k] = k.b
				}
			}
		}
	}
	return client
}
