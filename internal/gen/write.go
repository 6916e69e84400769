package gen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// Edit leaves packets out of the written files, to model a capture that
// started late or lost packets. The truth keeps every frame and marks which
// are still intact.
type Edit struct {
	Kind        string // "cut" or "loss"
	Description string
	// Drop is called once per packet, in capture order; i is the
	// packet's index among all recorded packets.
	Drop     func(i int, p *Packet) bool
	CutNanos int64 // for a cut: packets before this Unix time are gone
	ConnID   int   // the connection a cut was chosen for; -1 if none
}

// EditInfo is an Edit as the truth reports it.
type EditInfo struct {
	Kind                string `json:"kind"`
	Description         string `json:"description"`
	CutNanos            int64  `json:"cut_ns,omitempty"`
	ConnID              int    `json:"conn_id"`
	DroppedPackets      int    `json:"dropped_packets"`
	DroppedDataSegments int    `json:"dropped_data_segments"`
}

// CutBefore drops every packet recorded before t: a capture started at t.
func CutBefore(t time.Time, conn *Conn, desc string) *Edit {
	id := -1
	if conn != nil {
		id = conn.ID
	}
	return &Edit{
		Kind:        "cut",
		Description: desc,
		Drop:        func(_ int, p *Packet) bool { return p.Time.Before(t) },
		CutNanos:    t.UnixNano(),
		ConnID:      id,
	}
}

// DropEveryNthData drops every nth data segment (counting segments with a
// payload in capture order, both directions together): the 0-based
// segments n-1, 2n-1, ... are left out.
func DropEveryNthData(n int) *Edit {
	seen := 0
	return &Edit{
		Kind:        "loss",
		Description: fmt.Sprintf("every %dth data segment (both directions, counted in capture order) is left out", n),
		ConnID:      -1,
		Drop: func(_ int, p *Packet) bool {
			if len(p.Payload) == 0 {
				return false
			}
			seen++
			return seen%n == 0
		},
	}
}

type span struct{ from, to int64 }

// Write writes the capture file(s) and <name>.truth.json into dir. Call it
// after Close.
func (c *Cluster) Write(dir, name, doc string, edit *Edit) (*Truth, error) {
	c.rec.mu.Lock()
	packets := slices.Clone(c.rec.packets)
	conns := slices.Clone(c.rec.conns)
	c.rec.mu.Unlock()

	keep := make([]bool, len(packets))
	dropped := map[*Conn]*[2][]span{}
	info := (*EditInfo)(nil)
	if edit != nil {
		info = &EditInfo{Kind: edit.Kind, Description: edit.Description, CutNanos: edit.CutNanos, ConnID: edit.ConnID}
	}
	for i, p := range packets {
		keep[i] = edit == nil || !edit.Drop(i, p)
		if keep[i] {
			continue
		}
		info.DroppedPackets++
		if n := int64(len(p.Payload)); n > 0 {
			info.DroppedDataSegments++
			d := dropped[p.Conn]
			if d == nil {
				d = new([2][]span)
				dropped[p.Conn] = d
			}
			d[p.Dir] = append(d[p.Dir], span{p.Off, p.Off + n})
		}
	}

	c.recordJoins()
	t := c.baseTruth(name, doc)
	t.Edit = info
	for _, f := range c.files(name) {
		n, err := c.writeFile(filepath.Join(dir, f.File), packets, keep, f.Nodes)
		if err != nil {
			return nil, err
		}
		f.Packets = n
		t.Captures = append(t.Captures, f)
	}
	t.Frames = connFrames(conns, packets, keep, dropped)
	t.Notes = append(t.Notes, crossCheck(t)...)

	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".truth.json"), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write truth: %w", err)
	}
	return t, c.writeExtra(dir, name)
}

// extraFile is a file a scenario writes next to its capture (AddFile).
type extraFile struct {
	suffix string
	data   func() []byte
}

// AddFile has Write also write <name><suffix> with what data returns
// then (e.g. the clients' TLS key log).
func (c *Cluster) AddFile(suffix string, data func() []byte) {
	c.mu.Lock()
	c.extra = append(c.extra, extraFile{suffix, data})
	c.mu.Unlock()
}

func (c *Cluster) writeExtra(dir, name string) error {
	c.mu.Lock()
	extra := slices.Clone(c.extra)
	c.mu.Unlock()
	for _, e := range extra {
		if err := os.WriteFile(filepath.Join(dir, name+e.suffix), e.data(), 0o644); err != nil {
			return fmt.Errorf("write %s%s: %w", name, e.suffix, err)
		}
	}
	return nil
}

// files lists the capture files the cluster's Split asks for.
func (c *Cluster) files(name string) []CaptureFile {
	var all []int32
	for i := range c.addrs {
		all = append(all, int32(i))
	}
	mk := func(file string, nodes []int32) CaptureFile {
		return CaptureFile{File: file, Link: c.opts.Link.String(), MSS: c.opts.MSS, Nodes: nodes}
	}
	var out []CaptureFile
	if c.opts.Split != PerBroker {
		out = append(out, mk(name+".pcapng", all))
	}
	if c.opts.Split != Combined {
		for _, n := range all {
			out = append(out, mk(fmt.Sprintf("%s.b%d.pcapng", name, n), []int32{n}))
		}
	}
	return out
}

func (c *Cluster) writeFile(path string, packets []*Packet, keep []bool, nodes []int32) (int, error) {
	return writePcapng(path, packets, c.opts.Link, c.opts.MSS, func(i int, p *Packet) bool {
		return keep[i] && slices.Contains(nodes, p.Conn.Node)
	})
}

// writePcapng writes the packets include says yes to, in order, to a new
// pcapng file at path.
func writePcapng(path string, packets []*Packet, link Link, mss int, include func(i int, p *Packet) bool) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("create capture: %w", err)
	}
	defer f.Close()
	intf := pcapgo.DefaultNgInterface
	intf.Name = "lo"
	intf.LinkType = link.LinkType()
	intf.SnapLength = 262144
	opts := pcapgo.DefaultNgWriterOptions
	opts.SectionInfo.Application = "kwire-gen"
	w, err := pcapgo.NewNgWriterInterface(f, intf, opts)
	if err != nil {
		return 0, err
	}
	buf := gopacket.NewSerializeBuffer()
	n := 0
	for i, p := range packets {
		if !include(i, p) {
			continue
		}
		if err := serialize(buf, link, p, mss); err != nil {
			return 0, fmt.Errorf("serialize packet %d: %w", i, err)
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			return 0, err
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return n, f.Close()
}

// connFrames builds the per-connection frame lists, every frame marked
// intact or not.
func connFrames(conns []*Conn, packets []*Packet, keep []bool, dropped map[*Conn]*[2][]span) []ConnFrames {
	kept := map[*Conn]int{}
	syn := map[*Conn]bool{}
	for i, p := range packets {
		if keep[i] {
			kept[p.Conn]++
			if p.Flags&SYN != 0 && p.Dir == ToServer {
				syn[p.Conn] = true
			}
		}
	}
	var out []ConnFrames
	for _, c := range conns {
		cf := ConnFrames{
			ID: c.ID, Node: c.Node, Client: c.Client.String(), Server: c.Server.String(),
			ClosedBy: c.closedBy, Packets: kept[c], HasSYN: syn[c],
			BytesToServer: c.sent[ToServer], BytesToClient: c.sent[ToClient],
			ToServer: c.framers[ToServer].all(), ToClient: c.framers[ToClient].all(),
		}
		if cf.ClosedBy == "" {
			cf.ClosedBy = "open"
		}
		var d [2][]span
		if p := dropped[c]; p != nil {
			d = *p
		}
		for _, s := range d[ToServer] {
			cf.DroppedToServer += s.to - s.from
		}
		for _, s := range d[ToClient] {
			cf.DroppedToClient += s.to - s.from
		}
		markIntact(cf.ToServer, d[ToServer])
		markIntact(cf.ToClient, d[ToClient])
		out = append(out, cf)
	}
	return out
}

// markIntact sets Intact on frames no dropped span touches. Both lists are
// in stream order.
func markIntact(frames []Frame, drops []span) {
	j := 0
	for i := range frames {
		f := &frames[i]
		for j < len(drops) && drops[j].to <= f.Offset {
			j++
		}
		f.Intact = f.Complete && (j == len(drops) || drops[j].from >= f.End())
	}
}

// crossCheck compares the tap's complete request frames with kfake's
// counts and says where they differ.
func crossCheck(t *Truth) []string {
	tap := map[string]int{}
	for _, cf := range t.Frames {
		for _, f := range cf.ToServer {
			if f.Complete {
				tap[f.API]++
			}
		}
	}
	var notes []string
	keys := map[string]bool{}
	for k := range tap {
		keys[k] = true
	}
	for k := range t.RequestsBroker {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if tap[k] != t.RequestsBroker[k] {
			notes = append(notes, fmt.Sprintf("%s: the tap relayed %d complete requests, kfake handled %d", k, tap[k], t.RequestsBroker[k]))
		}
	}
	if len(notes) == 0 {
		notes = append(notes, "cross-check: every complete request frame the tap relayed was handled by kfake, per API")
	}
	return notes
}
