package main

import (
	"flag"
	"time"

	"github.com/kwire/kwire/correlate"
)

// limitFlags are the memory caps of the commands that read traffic, on
// top of --max-frame and --max-buffer. The defaults fit a busy broker
// host; every cap has a counter that says when it bit:
//
//	--max-conns       capture stats conns_over_cap, packets_over_cap
//	--max-reorder-mb  capture stats buffer_limit_gaps
//	--max-pending     decode stats pending_overflow (and a pending_overflow anomaly)
//	--max-groups      summary stats.limits.groups_evicted, groups_dropped
//	--max-members     summary stats.limits.members_dropped
//	--max-partitions  summary stats.limits.partitions_dropped
//	--max-clients     summary stats.limits.clients_evicted, transactional_ids_evicted
//	--max-topic-ids   summary stats.limits.topic_ids_evicted
//
// --metrics has caps of its own on label values (metricsFlags), counted
// in kwire_metrics_label_values_folded and kwire_metrics_folded_total:
// the group label follows --max-groups.
//
// The defaults repeat those of the packages (capture.Options,
// decode.Options, correlate.Options), so that --help shows them.
type limitFlags struct {
	conns, pending                       int
	groups, members, partitions, clients int
	topicIDs                             int
	// reorderMB is --max-reorder-mb of read and analyze (kwire live has
	// its own, with its other capture flags).
	reorderMB int
	// healthWindow is --health-window: not a cap, but the correlator's
	// other setting every command shares.
	healthWindow time.Duration
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	// kwire live has its own --max-conns, with its other capture flags.
	switch fs.Name() {
	case "live":
	case "aggregate":
		fs.IntVar(&l.conns, "max-conns", 100000, "most agents' connections whose ids are remembered; beyond half of it the older half is forgotten and counted (conns_forgotten)")
	default:
		fs.IntVar(&l.conns, "max-conns", 100000, "most TCP connections tracked at once; packets of further ones are dropped and counted (conns_over_cap)")
	}
	if fs.Name() != "live" {
		fs.IntVar(&l.reorderMB, "max-reorder-mb", 125, "most out-of-order bytes held for reassembly, in `MiB`, a sixteenth of it per connection; "+
			"beyond it the missing bytes become counted gaps (buffer_limit_gaps). A damaged file's sequence numbers fill it")
	}
	fs.IntVar(&l.pending, "max-pending", 1024, "most requests awaiting a response on one connection; beyond it the oldest is reported missing (pending_overflow)")
	fs.IntVar(&l.groups, "max-groups", 10000, "most consumer groups tracked. A full table forgets groups that requests only named (no member, generation or commit seen), "+
		"least recently used first (groups_evicted); past that, requests for more groups are counted and ignored (groups_dropped)")
	fs.IntVar(&l.members, "max-members", 2000, "most members remembered per group, departed ones forgotten first (members_dropped)")
	fs.IntVar(&l.partitions, "max-partitions", 100000, "most topic partitions tracked per group (partitions_dropped)")
	fs.IntVar(&l.clients, "max-clients", 100000, "most clients (host and client id) remembered, least recently seen forgotten first (clients_evicted)")
	fs.DurationVar(&l.healthWindow, "health-window", 60*time.Second, "capture time over which each group partition's consumer health is judged (summary health: "+
		"ok, lagging, stalled, stopped, rewind; docs/schema.md)")
	fs.IntVar(&l.topicIDs, "max-topic-ids", 100000, "most topic ids remembered with their names, and apart without, least recently seen forgotten first (topic_ids_evicted)")
}

// correlate returns the correlator's options with the caps asked for.
func (l *limitFlags) correlate() *correlate.Options {
	return &correlate.Options{MaxGroups: l.groups, MaxMembersPerGroup: l.members,
		MaxPartitionsPerGroup: l.partitions, MaxClients: l.clients, MaxTopicIDs: l.topicIDs, HealthWindow: l.healthWindow}
}

// reorderPages returns the reassembly bounds of --max-reorder-mb, in
// pages of 1900 bytes (capture.Options): the default, 125 MiB, is the
// capture package's own (about 65536 pages, 4096 per connection); zero
// or less leaves the capture package's defaults.
func (l *limitFlags) reorderPages() (perConn, total int) {
	if l.reorderMB <= 0 {
		return 0, 0
	}
	total = max(1, l.reorderMB<<20/1900)
	return max(1, total/16), total
}
