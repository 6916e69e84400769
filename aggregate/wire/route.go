package wire

import "fmt"

// RoutedVersion is the first byte of a routed record (kwire aggregate
// --group's second topic, docs/aggregate.md). It differs from Version so
// that neither stage misreads the other's topic. Records of routedV1
// (no ticks) are still read.
const RoutedVersion = 0x82

const routedV1 = 0x81

// Routed is one record of the routed topic: what the first stage of
// kwire aggregate --group (the router) sends to one partition of that
// topic for one record of the agents' topic.
//
//	routed  = version:byte(0x82) src_partition:uvarint src_offset:uvarint
//	          receipts:uvarint (host:string run:uvarint seq:uvarint)*
//	          items:uvarint (host:string run:uvarint seq:uvarint
//	          index:uvarint home:varint batch:string)*
//	          ticks:uvarint (host:string run:uvarint seq:uvarint
//	          indexes:uvarint index:uvarint* batch:string)*
//
// (version 0x81, still read, ends after items.)
//
// A receipt says the router read batch seq of that agent (sent to the one
// partition that counts the agent's batches). An item is item number
// index of that agent batch, re-encoded alone as a batch of its own
// (the agents' format, its connection declared in it); home is the
// partition whose owner writes its output line (anomalies), -1 for none.
// Items may come from earlier agent batches than the record the router
// read (a client bound to a group late gets its earlier items again).
// Ticks are the items of the agent batch read that this partition does
// not get whole, for the correlator's Tick (docs/aggregate.md, "Several
// aggregators").
type Routed struct {
	// SrcPartition and SrcOffset are the agents' topic record the router
	// read when it sent this: with the partition it is sent to they
	// identify it (a router that takes a partition over sends some again).
	SrcPartition int32
	SrcOffset    int64
	Receipts     []Receipt
	Items        []RoutedItem
	Ticks        []RoutedTicks
}

// Receipt is one agent batch the router read.
type Receipt struct {
	Agent Agent
	Seq   uint64
}

// RoutedItem is one item of an agent batch, as a batch of its own.
type RoutedItem struct {
	Agent Agent
	Seq   uint64
	Index int
	Home  int32
	// Batch is a batch of the agents' format (Version) holding the item
	// alone (Decode reads it). It may point into the record: keep that
	// unchanged.
	Batch []byte
}

// RoutedTicks are items of one agent batch, as a batch of their own, for
// the correlator's Tick only: of an exchange the bodies Tick reads
// (correlate.TickBodies), of any other none.
type RoutedTicks struct {
	Agent Agent
	Seq   uint64
	// Indexes are the items' numbers in the agent batch, in Batch's
	// order.
	Indexes []int
	// Batch is a batch of the agents' format holding the items, as
	// RoutedItem's.
	Batch []byte
}

// AppendRouted appends r's encoding to dst.
func AppendRouted(dst []byte, r *Routed) []byte {
	w := writer{b: dst}
	w.byte(RoutedVersion)
	w.uvarint(uint64(r.SrcPartition))
	w.uvarint(uint64(r.SrcOffset))
	w.uvarint(uint64(len(r.Receipts)))
	for _, rc := range r.Receipts {
		w.string(rc.Agent.Host)
		w.uvarint(rc.Agent.Run)
		w.uvarint(rc.Seq)
	}
	w.uvarint(uint64(len(r.Items)))
	for _, it := range r.Items {
		w.string(it.Agent.Host)
		w.uvarint(it.Agent.Run)
		w.uvarint(it.Seq)
		w.uvarint(uint64(it.Index))
		w.varint(int64(it.Home))
		w.bytes(it.Batch)
	}
	w.uvarint(uint64(len(r.Ticks)))
	for _, tk := range r.Ticks {
		w.string(tk.Agent.Host)
		w.uvarint(tk.Agent.Run)
		w.uvarint(tk.Seq)
		w.uvarint(uint64(len(tk.Indexes)))
		for _, i := range tk.Indexes {
			w.uvarint(uint64(i))
		}
		w.bytes(tk.Batch)
	}
	return w.b
}

// DecodeRouted reads a routed record. Its items' batches point into
// value.
func DecodeRouted(value []byte) (*Routed, error) {
	if len(value) == 0 || value[0] != RoutedVersion && value[0] != routedV1 {
		return nil, fmt.Errorf("%w: not a routed record", ErrCorrupt)
	}
	r := reader{b: value[1:]}
	out := &Routed{SrcPartition: int32(r.index()), SrcOffset: int64(r.uvarint())}
	n := r.count(3)
	for range n {
		out.Receipts = append(out.Receipts, Receipt{Agent: Agent{Host: r.string(), Run: r.uvarint()}, Seq: r.uvarint()})
	}
	n = r.count(6)
	for range n {
		it := RoutedItem{Agent: Agent{Host: r.string(), Run: r.uvarint()}, Seq: r.uvarint(), Index: r.index(), Home: r.int32()}
		it.Batch = r.bytes()
		out.Items = append(out.Items, it)
	}
	if value[0] != routedV1 {
		n = r.count(5)
		for range n {
			tk := RoutedTicks{Agent: Agent{Host: r.string(), Run: r.uvarint()}, Seq: r.uvarint()}
			m := r.count(1)
			for range m {
				tk.Indexes = append(tk.Indexes, r.index())
			}
			tk.Batch = r.bytes()
			out.Ticks = append(out.Ticks, tk)
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}
