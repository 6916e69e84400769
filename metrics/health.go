package metrics

import (
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kwire/kwire/capture"
	"github.com/kwire/kwire/correlate"
	"github.com/kwire/kwire/decode"
)

// The health counters: what the stats line says (docs/schema.md, "stats"),
// those of them that mean something on a live capture. Each family reads
// stats fields by their JSON path (section.field, section.live.field...);
// a family is exported when its fields are there (the live and eBPF ones
// only for such a capture). TestHealthFields holds every stats field to
// either a family or a reason in notExported.

// healthFamily is one health family: one field, or one per value of its
// label.
type healthFamily struct {
	name, typ, help string
	label           string // "" for one field
	fields          []healthField
}

type healthField struct{ value, path string }

func (h *healthFamily) family() Family {
	f := Family{Name: h.name, Type: h.typ, Help: h.help}
	if h.label != "" {
		f.Labels = []string{h.label}
	}
	return f
}

// counter and gauge make a family of one stats field.
func counter(name, path, help string) healthFamily {
	return healthFamily{name: name, typ: "counter", help: help, fields: []healthField{{"", path}}}
}

func gauge(name, path, help string) healthFamily {
	return healthFamily{name: name, typ: "gauge", help: help, fields: []healthField{{"", path}}}
}

// labelled makes a counter family of several stats fields, one value of
// label each: fields are label value, path pairs.
func labelled(name, label, help string, fields ...string) healthFamily {
	h := healthFamily{name: name, typ: "counter", help: help, label: label}
	for i := 0; i+1 < len(fields); i += 2 {
		h.fields = append(h.fields, healthField{fields[i], fields[i+1]})
	}
	return h
}

var health = []healthFamily{
	counter("kwire_capture_packets_total", "capture.packets", "Packets captured."),
	counter("kwire_capture_bytes_total", "capture.bytes", "Bytes of the packets captured, as on the wire."),
	counter("kwire_capture_tcp_packets_total", "capture.tcp_packets", "Packets decoded down to a TCP header."),
	counter("kwire_capture_ip_fragments_total", "capture.ip_fragments", "IP fragments (not reassembled)."),
	counter("kwire_capture_undecodable_packets_total", "capture.undecodable", "Packets whose link, IP or TCP header is broken or cut short."),
	counter("kwire_capture_snaplen_truncated_packets_total", "capture.snaplen_truncated", "Packets captured shorter than they were on the wire."),
	counter("kwire_capture_duplicate_packets_total", "capture.duplicates", "TCP packets dropped as copies of one just seen (one packet on two interfaces)."),
	counter("kwire_capture_damaged_packets_total", "capture.damaged_packets", "Packets dropped for a wrong TCP checksum on a connection whose checksums are otherwise right."),
	counter("kwire_capture_conns_total", "capture.conns_seen", "TCP connections tracked."),
	gauge("kwire_capture_conns_open", "capture.conns_open", "TCP connections tracked and not closed."),
	counter("kwire_capture_conns_over_cap_total", "capture.conns_over_cap", "Connections not tracked because --max-conns were open."),
	counter("kwire_capture_packets_over_cap_total", "capture.packets_over_cap", "Packets of connections not tracked because --max-conns were open."),
	counter("kwire_capture_conns_evicted_no_data_total", "capture.conns_evicted_no_data", "Connections that never carried data closed to make room at --max-conns."),
	counter("kwire_capture_gaps_total", "capture.gaps", "Gaps in TCP streams: bytes never captured (lost packets, kernel drops)."),
	counter("kwire_capture_gap_bytes_total", "capture.gap_bytes", "Bytes the gaps of known size stand for."),
	counter("kwire_capture_buffer_limit_gaps_total", "capture.buffer_limit_gaps", "Gaps forced because out-of-order data hit --max-reorder-mb (in kwire_capture_gaps_total)."),
	counter("kwire_capture_out_of_order_segments_total", "capture.out_of_order", "Segments buffered because they came ahead of the next expected byte."),
	counter("kwire_capture_retransmitted_segments_total", "capture.retransmitted", "Segments with data seen already."),
	counter("kwire_capture_delivered_bytes_total", "capture.delivered_bytes", "TCP payload bytes delivered to the decoder."),
	counter("kwire_capture_tls_connections_total", "capture.tls_connections", "Connections whose first bytes are a TLS record (--tls-keylog)."),
	counter("kwire_capture_tls_decrypted_total", "capture.tls_decrypted", "TLS connections the key log had the secrets of: decrypted."),
	counter("kwire_capture_tls_no_keys_total", "capture.tls_no_keys", "TLS connections passed on encrypted: no secrets in the key log, or no hellos captured."),
	counter("kwire_capture_tls_unsupported_total", "capture.tls_unsupported", "TLS connections passed on encrypted: a version or cipher suite kwire does not decrypt."),
	counter("kwire_capture_tls_handshake_only_total", "capture.tls_handshake_only", "TLS connections that ended before the server's hello."),
	counter("kwire_capture_tls_decrypt_failures_total", "capture.tls_decrypt_failures", "TLS records that did not authenticate with the logged keys (their plaintext is a gap)."),
	counter("kwire_capture_tls_records_unsent_total", "capture.tls_records_unsent", "TLS sequence numbers senders gave records the wire never carried."),
	counter("kwire_capture_tls_keys_late_total", "capture.tls_keys_late", "TLS connections whose secrets reached the key log late."),

	counter("kwire_capture_kernel_packets_total", "capture.live.kernel_packets", "Packets the kernel filter let through to the ring (live)."),
	counter("kwire_capture_kernel_drops_total", "capture.live.kernel_drops", "Packets (eBPF: events) the kernel dropped because the ring was full: lost (live)."),
	counter("kwire_capture_kernel_queue_freezes_total", "capture.live.kernel_queue_freezes", "Times the kernel ring filled up (live)."),
	counter("kwire_capture_user_filtered_packets_total", "capture.live.user_filtered", "Packets dropped in user space by the port filter (live)."),
	counter("kwire_capture_conns_idle_closed_total", "capture.live.conns_idle_closed", "Connections forgotten after --idle-timeout without a packet (live)."),
	counter("kwire_capture_packets_written_total", "capture.live.packets_written", "Packets saved with -w (live)."),
	counter("kwire_capture_packets_not_written_total", "capture.live.packets_not_written", "Packets not saved after -w's file failed (live)."),

	counter("kwire_ebpf_events_total", "capture.ebpf.events", "Ring-buffer events read (--ebpf)."),
	counter("kwire_ebpf_kernel_events_total", "capture.ebpf.kernel_events", "Events the probes submitted (--ebpf)."),
	counter("kwire_ebpf_ring_drops_total", "capture.ebpf.ring_drops", "Events lost because the ring was full (--ebpf)."),
	counter("kwire_ebpf_calls_total", "capture.ebpf.calls", "Data system calls on sockets of the broker ports (--ebpf)."),
	counter("kwire_ebpf_call_bytes_total", "capture.ebpf.call_bytes", "Bytes those system calls moved (--ebpf)."),
	counter("kwire_ebpf_copied_bytes_total", "capture.ebpf.copied_bytes", "Bytes copied to kwire (--ebpf)."),
	counter("kwire_ebpf_snap_bytes_total", "capture.ebpf.snap_bytes", "Bytes left uncopied by --snap (--ebpf)."),
	counter("kwire_ebpf_sendfile_bytes_total", "capture.ebpf.sendfile_bytes", "Bytes sent by sendfile, which no probe sees (--ebpf)."),
	counter("kwire_ebpf_user_read_errors_total", "capture.ebpf.user_read_errors", "Buffers the probe could not read (--ebpf)."),
	counter("kwire_ebpf_iov_truncated_total", "capture.ebpf.iov_truncated", "Vectored calls with more iovecs than the probe walks (--ebpf)."),
	counter("kwire_ebpf_sockets_total", "capture.ebpf.sockets", "Sockets seen (--ebpf)."),
	counter("kwire_ebpf_muted_sockets_total", "capture.ebpf.muted_sockets", "Sockets muted as the other end of a connection followed already (--ebpf)."),
	counter("kwire_ebpf_late_events_total", "capture.ebpf.late_events", "Events whose bytes were already delivered or given up on (--ebpf)."),
	gauge("kwire_ebpf_tls_targets", "capture.ebpf.tls_targets", "Binaries and libraries probed for TLS plaintext (--ebpf --tls)."),
	gauge("kwire_ebpf_tls_probes", "capture.ebpf.tls_probes", "Uprobes attached for TLS plaintext (--ebpf --tls)."),
	counter("kwire_ebpf_tls_calls_total", "capture.ebpf.tls_calls", "TLS library calls whose plaintext was delivered (--ebpf --tls)."),
	counter("kwire_ebpf_tls_bytes_total", "capture.ebpf.tls_bytes", "Plaintext bytes of those calls (--ebpf --tls)."),
	counter("kwire_ebpf_tls_no_socket_total", "capture.ebpf.tls_no_socket", "TLS library calls whose socket was never found: plaintext lost (--ebpf --tls)."),
	counter("kwire_ebpf_tls_cipher_bytes_total", "capture.ebpf.tls_cipher_bytes", "Ciphertext bytes left out, their plaintext delivered instead (--ebpf --tls)."),
	labelled("kwire_ebpf_tls_skipped_processes_total", "reason", "Processes not probed for TLS plaintext, by reason: jvm (use a key log), no_tls (no TLS library kwire probes), failed (--ebpf --tls).",
		"jvm", "capture.ebpf.tls_skipped_jvm", "no_tls", "capture.ebpf.tls_skipped_no_tls", "failed", "capture.ebpf.tls_skipped_failed"),

	counter("kwire_decode_kafka_connections_total", "decode.kafka_connections", "Connections that carried Kafka."),
	counter("kwire_decode_non_kafka_connections_total", "decode.non_kafka_connections", "Connections on a Kafka port that did not carry Kafka (ignored)."),
	counter("kwire_decode_tls_connections_total", "decode.tls_connections", "Connections that carried TLS kwire could not decrypt."),
	counter("kwire_decode_unmatched_responses_total", "decode.unmatched_responses", "Responses with no request captured."),
	counter("kwire_decode_responses_missing_total", "decode.responses_missing", "Requests whose response was not seen (a long-poll Fetch still waiting at the end is one)."),
	counter("kwire_decode_responses_lost_total", "decode.responses_lost", "Responses lost in a gap."),
	counter("kwire_decode_acks0_produce_total", "decode.acks0_produce", "Produce requests with acks=0 (no response)."),
	counter("kwire_decode_gaps_total", "decode.gaps", "Gaps the decoder met in Kafka streams."),
	counter("kwire_decode_gap_bytes_total", "decode.gap_bytes", "Bytes of those gaps."),
	counter("kwire_decode_not_copied_bytes_total", "decode.not_copied_bytes", "Bytes an eBPF source did not copy: past --snap, or sent with sendfile (--ebpf)."),
	counter("kwire_decode_records_not_copied_bytes_total", "decode.records_not_copied_bytes", "Of those, record bytes (Produce records, Fetch record batches, a broker's sendfile) in frames decoded around them (--ebpf)."),
	counter("kwire_decode_not_copied_frames_total", "decode.not_copied_frames", "Frames whose uncopied bytes were outside record data: header only (--ebpf)."),
	counter("kwire_decode_resyncs_total", "decode.resyncs", "Times the decoder found the next frame again after a gap or garbage."),
	counter("kwire_decode_skipped_bytes_total", "decode.skipped_bytes", "Bytes skipped while resynchronising."),
	counter("kwire_decode_errors_total", "decode.decode_errors", "Frames kmsg could not decode."),
	counter("kwire_decode_unknown_api_total", "decode.unknown_api", "Requests of an API key kmsg does not know."),
	counter("kwire_decode_unsupported_versions_total", "decode.unsupported_versions", "Requests of a version above what kmsg knows."),
	counter("kwire_decode_oversize_frames_total", "decode.oversize_frames", "Frames larger than --max-frame (skipped)."),
	counter("kwire_decode_pending_overflow_total", "decode.pending_overflow", "Requests given up on past --max-pending awaiting a response."),
	counter("kwire_decode_sasl_frames_total", "decode.sasl_frames", "SASL authentication frames (dropped after decoding)."),
	counter("kwire_decode_buffer_limit_frames_total", "decode.buffer_limit_frames", "Frames dropped at --max-buffer."),

	labelled("kwire_correlate_fetches_total", "attribution", "Consumer Fetch requests, by how they were tied to a group: attributed, ambiguous or unattributed.",
		"attributed", "correlate.fetches_attributed", "ambiguous", "correlate.fetches_ambiguous", "unattributed", "correlate.fetches_unattributed"),
	counter("kwire_correlate_replica_fetches_total", "correlate.replica_fetches", "Fetch requests from brokers (replication, not consumption)."),
	counter("kwire_correlate_unknown_fetch_sessions_total", "correlate.unknown_fetch_sessions", "Incremental fetches of a session whose full fetch was not seen."),
	counter("kwire_correlate_expiries_retracted_total", "correlate.expiries_retracted", "Members judged expired that the broker later answered as members."),
	counter("kwire_correlate_hazards_incomplete_total", "correlate.hazards_incomplete", "Hazards made info because the capture lost data where their evidence would be."),
	gauge("kwire_correlate_unresolved_topic_ids", "correlate.unresolved_topic_ids", "Topic ids no Metadata response named yet."),
	labelled("kwire_correlate_limits_total", "limit", "What the correlator's caps dropped or forgot, by the stats field that counts it (--max-groups, --max-members, "+
		"--max-partitions, --max-clients, --max-topic-ids).",
		"groups_dropped", "correlate.limits.groups_dropped", "groups_evicted", "correlate.limits.groups_evicted",
		"members_dropped", "correlate.limits.members_dropped", "partitions_dropped", "correlate.limits.partitions_dropped",
		"clients_evicted", "correlate.limits.clients_evicted", "generations_dropped", "correlate.limits.generations_dropped",
		"commits_dropped", "correlate.limits.commits_dropped", "fetch_sessions_evicted", "correlate.limits.fetch_sessions_evicted",
		"topic_ids_evicted", "correlate.limits.topic_ids_evicted", "transactional_ids_evicted", "correlate.limits.transactional_ids_evicted",
		"share_held_dropped", "correlate.limits.share_held_dropped", "ends_dropped", "correlate.limits.ends_dropped"),
}

// notExported are the stats fields no family exports, and why.
var notExported = map[string]string{
	"capture.skipped_non_ip":       "the live capture's kernel filter passes TCP only",
	"capture.skipped_non_tcp":      "the live capture's kernel filter passes TCP only",
	"capture.repaired_packets":     "damaged capture files only (offline)",
	"capture.files_read":           "capture files only (offline)",
	"capture.files_truncated":      "capture files only (offline)",
	"capture.files_resynced":       "capture files only (offline)",
	"capture.file_bytes_skipped":   "capture files only (offline)",
	"capture.orig_len_short":       "capture files only (offline)",
	"decode.requests":              "kwire_requests_total counts them by API and broker",
	"decode.responses":             "kwire_requests_total and kwire_decode_responses_missing_total tell it",
	"decode.exchanges":             "kwire_requests_total counts them by API and broker",
	"correlate.exchanges":          "kwire_requests_total counts them by API and broker",
	"correlate.fetches":            "the sum of kwire_correlate_fetches_total",
	"correlate.commits":            "kwire_offset_commits_total counts them by group and outcome",
	"correlate.commits_accepted":   "kwire_offset_commits_total counts them by group and outcome",
	"correlate.commits_rejected":   "kwire_offset_commits_total counts them by group and outcome",
	"correlate.commits_unanswered": "kwire_offset_commits_total counts them by group and outcome",
}

// statsFields flattens the integer fields of the stats into path -> value
// (section.json_name; nested structs add their JSON name, but for the
// embedded TLSStats and correlate's limits, which keep theirs).
func statsFields(cs capture.Stats, ds decode.Stats, cr correlate.Stats) map[string]float64 {
	out := map[string]float64{}
	flatten("capture", reflect.ValueOf(cs), out)
	flatten("decode", reflect.ValueOf(ds), out)
	flatten("correlate", reflect.ValueOf(cr), out)
	return out
}

func flatten(prefix string, v reflect.Value, out map[string]float64) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[prefix+"."+name] = float64(fv.Int())
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[prefix+"."+name] = float64(fv.Uint())
		case reflect.Struct, reflect.Pointer:
			if fv.Kind() == reflect.Pointer && (fv.IsNil() || fv.Elem().Kind() != reflect.Struct) {
				continue
			}
			sub := prefix
			if !f.Anonymous && name != "" {
				sub += "." + name
			}
			flatten(sub, fv, out)
		}
	}
}

// healthCollector exports the health families of the last stats taken.
type healthCollector struct {
	descs map[string]*prometheus.Desc
}

func newHealthCollector() *healthCollector {
	c := &healthCollector{descs: map[string]*prometheus.Desc{}}
	for _, h := range health {
		f := h.family()
		c.descs[h.name] = prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
	}
	return c
}

func (c *healthCollector) collect(ch chan<- prometheus.Metric, fields map[string]float64) {
	for i := range health {
		h := &health[i]
		typ := prometheus.CounterValue
		if h.typ == "gauge" {
			typ = prometheus.GaugeValue
		}
		for _, f := range h.fields {
			v, ok := fields[f.path]
			if !ok {
				continue
			}
			var labels []string
			if h.label != "" {
				labels = []string{f.value}
			}
			ch <- prometheus.MustNewConstMetric(c.descs[h.name], typ, v, labels...)
		}
	}
}
